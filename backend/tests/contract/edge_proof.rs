//! The `/v1` API replies only to what the edge forwards (SPEC §7, "The edge is the only way
//! in"): with `EDGE_PROOF_SECRET` set, a payment without the edge's proof, with a forged one
//! (another secret), a stale one (a minute old), one for another body, or one already used (the
//! same request replayed) is refused 403 `forbidden` before its token is read (so also without a
//! token), and nothing is claimed or debited; a request with a fresh proof pays. Health and the
//! policy stay open to load balancers. (Through the real edge: `edge/tests/identity.rs`.)

use secret_settings::SecretString;
use serde_json::Value;
use shared::edge_proof::{self, PROOF_HEADER, ProvedRequest};
use test_harness::Received;

use crate::support::{Options, SECRET, TestApp, new_key, payment_body};

const PROOF_SECRET: &str = "the-edge-proof-secret-of-these-tests-0123";

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// Pays `body` with `key`, sending `proof` (none if `None`) as the edge would.
async fn pay(app: &TestApp, key: &str, body: &Value, proof: Option<String>) -> Received {
    let mut request = app
        .http
        .post(format!("{}/v1/bills/elec-1/pay", app.url))
        .bearer_auth(TestApp::token(21))
        .header("Idempotency-Key", key)
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some(proof) = proof {
        request = request.header(PROOF_HEADER, proof);
    }
    Received::from(request.send().await.expect("the backend replies")).await
}

fn proof(secret: &str, body: &Value, at: i64, nonce: &str) -> String {
    let body = body.to_string();
    let request = ProvedRequest {
        method: "POST",
        path_and_query: "/v1/bills/elec-1/pay",
        body: body.as_bytes(),
    };
    edge_proof::sign(secret.as_bytes(), request, at, nonce)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn only_requests_with_a_fresh_proof_of_the_edge_reach_the_api() {
    let mut options = Options::default();
    options.identity.edge_proof_secret = Some(SecretString::from(PROOF_SECRET));
    let app = TestApp::spawn_with(options).await;
    let (key, body) = (new_key(), payment_body(5_000));
    let other_body = payment_body(5_001);

    let refusals = [
        ("no proof", None),
        ("another secret", Some(proof(SECRET, &body, now(), "a"))),
        (
            "a minute old",
            Some(proof(PROOF_SECRET, &body, now() - 60, "b")),
        ),
        (
            "for another body",
            Some(proof(PROOF_SECRET, &other_body, now(), "c")),
        ),
        ("garbled", Some("v1 t=now".to_owned())),
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
    let proved_only = proof(PROOF_SECRET, &body, now(), "no-token");
    assert_eq!(unauthenticated(Some(proved_only)).await.status, 401);
    app.assert_nothing_written("refused proofs").await;

    let good = proof(PROOF_SECRET, &body, now(), "fresh-1");
    assert_eq!(pay(&app, &key, &body, Some(good.clone())).await.status, 201);
    pay(&app, &key, &body, Some(good))
        .await
        .assert_problem(403, "forbidden");
    let retry = proof(PROOF_SECRET, &body, now(), "fresh-2");
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
