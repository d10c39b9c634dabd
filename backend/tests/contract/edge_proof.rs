//! The `/v1` API replies only to what the edge forwards (SPEC §7, "The edge is the only way
//! in"): with `EDGE_PROOF_SECRET` set, a payment without the edge's proof, with a forged one
//! (another secret), a stale one (a minute old), one for another body, or one already used (the
//! same request replayed) is refused 403 `forbidden` before its token is read (so also without a
//! token), and nothing is claimed or debited; a request with a fresh proof pays. Health and the
//! policy stay open to load balancers. A proof taken from a log and sent with another token or
//! another key is refused by every replica; sent unchanged to another replica, it only replays
//! the reply. During a rotation both secrets prove a request, after it only the new one.
//! (Through the real edge: `edge/tests/identity.rs`.)

use secret_settings::SecretString;
use serde_json::Value;
use shared::edge_proof::{self, Accepted, PROOF_HEADER, ProvedRequest};
use test_harness::Received;

use crate::support::{Options, SECRET, TestApp, new_key, payment_body};

const PREVIOUS_PROOF_SECRET: &str = "the-edge-proof-secret-before-this-one-456";

const PROOF_SECRET: &str = "the-edge-proof-secret-of-these-tests-0123";

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// User 21's token, the same string every time: a proof covers the token's exact bytes, and
/// `TestApp::token` signs a new `exp` each second.
fn owners_token() -> &'static str {
    static TOKEN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TOKEN.get_or_init(|| TestApp::token(21))
}

/// Pays `body` with `key` as user 21, sending `proof` (none if `None`) as the edge would.
async fn pay(app: &TestApp, key: &str, body: &Value, proof: Option<String>) -> Received {
    pay_as(&app.url, owners_token(), key, body, proof).await
}

/// Pays `body` with `key` at the replica at `url` with `token`, sending `proof`.
async fn pay_as(
    url: &str,
    token: &str,
    key: &str,
    body: &Value,
    proof: Option<String>,
) -> Received {
    let mut request = reqwest::Client::new()
        .post(format!("{url}/v1/bills/elec-1/pay"))
        .bearer_auth(token)
        .header("Idempotency-Key", key)
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some(proof) = proof {
        request = request.header(PROOF_HEADER, proof);
    }
    Received::from(request.send().await.expect("the backend replies")).await
}

/// The edge's proof of user 21's payment of `body` with `key`.
fn proof(secret: &str, key: &str, body: &Value, at: i64, nonce: &str) -> String {
    proof_as(secret, owners_token(), key, body, at, nonce)
}

/// The edge's proof of a payment of `body` with `token` and `key`.
fn proof_as(secret: &str, token: &str, key: &str, body: &Value, at: i64, nonce: &str) -> String {
    let body = body.to_string();
    let authorization = format!("Bearer {token}");
    let request = ProvedRequest {
        method: "POST",
        path_and_query: "/v1/bills/elec-1/pay",
        authorization: Some(authorization.as_bytes()),
        idempotency_key: Some(key.as_bytes()),
        body: body.as_bytes(),
    };
    edge_proof::sign(secret.as_bytes(), request, at, nonce)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn only_requests_with_a_fresh_proof_of_the_edge_reach_the_api() {
    let mut options = Options::default();
    options.identity.edge_proof_secrets = vec![SecretString::from(PROOF_SECRET)];
    let app = TestApp::spawn_with(options).await;
    let (key, body) = (new_key(), payment_body(5_000));
    let other_body = payment_body(5_001);

    let refusals = [
        ("no proof", None),
        (
            "another secret",
            Some(proof(SECRET, &key, &body, now(), "a")),
        ),
        (
            "a minute old",
            Some(proof(PROOF_SECRET, &key, &body, now() - 60, "b")),
        ),
        (
            "for another body",
            Some(proof(PROOF_SECRET, &key, &other_body, now(), "c")),
        ),
        ("garbled", Some("v2 t=now".to_owned())),
        (
            "the first version, without token or key",
            Some(proof(PROOF_SECRET, &key, &body, now(), "d").replacen("v2", "v1", 1)),
        ),
    ];
    for (what, proof) in refusals {
        let refused = pay(&app, &key, &body, proof).await;
        let problem = refused.assert_problem(403, "forbidden");
        assert_eq!(
            problem["detail"], "This API is reached through the edge only.",
            "{what}"
        );
    }
    // The proof is checked before the token: no proof and no token is 403, not 401; a good
    // proof with no token reaches authentication, 401.
    let unauthenticated = |proof: Option<String>| {
        let mut request = app
            .http
            .post(format!("{}/v1/bills/elec-1/pay", app.url))
            .header("Idempotency-Key", &key)
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(proof) = proof {
            request = request.header(PROOF_HEADER, proof);
        }
        async { Received::from(request.send().await.expect("the backend replies")).await }
    };
    unauthenticated(None).await.assert_problem(403, "forbidden");
    let body_text = body.to_string();
    let request = ProvedRequest {
        method: "POST",
        path_and_query: "/v1/bills/elec-1/pay",
        authorization: None,
        idempotency_key: Some(key.as_bytes()),
        body: body_text.as_bytes(),
    };
    let proved_only = edge_proof::sign(PROOF_SECRET.as_bytes(), request, now(), "no-token");
    assert_eq!(unauthenticated(Some(proved_only)).await.status, 401);
    app.assert_nothing_written("refused proofs").await;

    let good = proof(PROOF_SECRET, &key, &body, now(), "fresh-1");
    assert_eq!(pay(&app, &key, &body, Some(good.clone())).await.status, 201);
    pay(&app, &key, &body, Some(good))
        .await
        .assert_problem(403, "forbidden");
    let retry = proof(PROOF_SECRET, &key, &body, now(), "fresh-2");
    let replayed = pay(&app, &key, &body, Some(retry)).await;
    assert!(replayed.is_replay(), "a retry with its own proof replays");
    assert_eq!(app.ledger().await.debits.len(), 1);

    for open in ["/healthz", "/readyz", "/idempotency-policy"] {
        let reply = app
            .http
            .get(format!("{}{open}", app.url))
            .send()
            .await
            .expect("replies");
        assert_eq!(reply.status(), 200, "{open} needs no proof");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_proof_from_a_log_is_refused_with_another_token_or_key_at_every_replica() {
    let mut options = Options::default();
    options.identity.edge_proof_secrets = vec![SecretString::from(PROOF_SECRET)];
    let app = TestApp::spawn_with(options.clone()).await;
    let replica = app.spawn_replica(&options).await;
    let (key, body) = (new_key(), payment_body(5_000));
    let logged = proof(PROOF_SECRET, &key, &body, now(), "logged-1");
    assert_eq!(
        pay(&app, &key, &body, Some(logged.clone())).await.status,
        201
    );

    let (thief, other_key) = (TestApp::token(22), new_key());
    for url in [&app.url, &replica.url] {
        let with_another_token = pay_as(url, &thief, &key, &body, Some(logged.clone())).await;
        with_another_token.assert_problem(403, "forbidden");
        let with_another_key =
            pay_as(url, owners_token(), &other_key, &body, Some(logged.clone())).await;
        with_another_key.assert_problem(403, "forbidden");
    }
    // Unchanged at the replica that has not seen its nonce: the same user's same request,
    // which replays the first reply and moves nothing.
    let unchanged = pay_as(&replica.url, owners_token(), &key, &body, Some(logged)).await;
    assert!(unchanged.is_replay(), "{unchanged:?}");
    assert_eq!(app.ledger().await.debits.len(), 1);
    assert_eq!(app.count("idempotency_keys").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_secret_rotates_with_no_refused_request() {
    let (key, body) = (new_key(), payment_body(5_000));
    let backend_with = |secrets: &[&str]| {
        let mut options = Options::default();
        options.identity.edge_proof_secrets =
            secrets.iter().copied().map(SecretString::from).collect();
        options
    };
    // 1. The backend learns the new secret and keeps the old; the edge still signs with the old.
    let app = TestApp::spawn_with(backend_with(&[PROOF_SECRET, PREVIOUS_PROOF_SECRET])).await;
    let by_old_edge = proof(PREVIOUS_PROOF_SECRET, &key, &body, now(), "old-1");
    assert_eq!(pay(&app, &key, &body, Some(by_old_edge)).await.status, 201);
    // 2. The edge moves to the new secret.
    let by_new_edge = proof(PROOF_SECRET, &key, &body, now(), "new-1");
    assert!(pay(&app, &key, &body, Some(by_new_edge)).await.is_replay());
    // 3. The backend forgets the old one: a proof under it is refused.
    let rotated = app.spawn_replica(&backend_with(&[PROOF_SECRET])).await;
    let by_new_edge = proof(PROOF_SECRET, &key, &body, now(), "new-2");
    let at_rotated = pay_as(&rotated.url, owners_token(), &key, &body, Some(by_new_edge)).await;
    assert!(at_rotated.is_replay());
    let late_old = proof(PREVIOUS_PROOF_SECRET, &key, &body, now(), "old-2");
    pay_as(&rotated.url, owners_token(), &key, &body, Some(late_old))
        .await
        .assert_problem(403, "forbidden");
    assert_eq!(app.ledger().await.debits.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_edge_not_yet_upgraded_is_served_until_v1_is_turned_off() {
    let (key, body) = (new_key(), payment_body(5_000));
    let body_text = body.to_string();
    let request = ProvedRequest {
        method: "POST",
        path_and_query: "/v1/bills/elec-1/pay",
        authorization: None,
        idempotency_key: None,
        body: body_text.as_bytes(),
    };
    let mut options = Options::default();
    options.identity.edge_proof_secrets = vec![SecretString::from(PROOF_SECRET)];
    options.identity.edge_proof_versions = Accepted::V1AndV2;
    let app = TestApp::spawn_with(options.clone()).await;
    let by_old_edge = edge_proof::sign_v1(PROOF_SECRET.as_bytes(), request, now(), "old-edge-1");
    assert_eq!(pay(&app, &key, &body, Some(by_old_edge)).await.status, 201);

    options.identity.edge_proof_versions = Accepted::V2Only;
    let upgraded = app.spawn_replica(&options).await;
    let late = edge_proof::sign_v1(PROOF_SECRET.as_bytes(), request, now(), "old-edge-2");
    pay_as(&upgraded.url, owners_token(), &key, &body, Some(late))
        .await
        .assert_problem(403, "forbidden");
    assert_eq!(app.ledger().await.debits.len(), 1);
}
