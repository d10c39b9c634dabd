//! Tokens from an identity provider (SPEC §7), against a real JWKS endpoint of the test's own
//! with RSA and EC keys made per test (`test_harness::IdentityProvider`):
//! - RS256 and ES256 tokens pay; a key rotated in (published, then used) and the old one
//!   removed later: no token signed with a published key is refused;
//! - a token naming an unknown `kid` fetches the set once, and a thousand of them fetch it a
//!   bounded number of times; with the provider unreachable the cached keys keep working;
//! - refused, every time with the same 401 detail: `alg: none`, HS256 "signed" with the RSA
//!   public key, an RS256 token for an EC key, wrong `iss` or `aud`, expired, not yet valid, a
//!   non-canonical user claim, a key whose RSA modulus is too short, no `kid`;
//! - operators' tokens from the same JWKS, for the console's own audience: the role missing is
//!   403, a customer's token 401, a lifetime over the maximum 401.

use std::time::Duration;

use backend::config::{Identity, TokenKeys};
use backend::identity::KeySource;
use futures_util::StreamExt;
use serde_json::{Value, json};
use shared::auth::TokenRules;
use shared::problem::UNAUTHENTICATED_DETAIL;
use test_harness::{IdentityProvider, Received, SigningKey};

use crate::support::{Options, SECRET, TestApp, metric_in, metrics_text, new_key, payment_body};

const ISSUER: &str = "https://id.example/";
const AUDIENCE: &str = "payments-api";
const CONSOLE: &str = "payments-console";
/// The tests' least time between fetches of the key set.
const REFETCH: Duration = Duration::from_secs(1);
/// Requests of the forged-kid flood in flight at once: a quarter of the server's default
/// `MAX_CONCURRENT_REQUESTS` (256).
const FLOOD_AT_ONCE: usize = 64;

/// A backend whose customers' and operators' tokens come from `provider`.
async fn backend_of(provider: &IdentityProvider) -> TestApp {
    let keys = TokenKeys::Provider(KeySource::Url(provider.jwks_url()));
    let mut identity = Identity::with_secrets(SECRET, None);
    identity.customer_keys = keys.clone();
    identity.operator_keys = Some(keys);
    identity.token_rules = TokenRules::new(30, Some(ISSUER.into()), Some(AUDIENCE.into()))
        .expect("valid rules")
        .with_user_claim(Some("customer_id".into()));
    identity.operator_rules.tokens = identity
        .token_rules
        .clone()
        .for_issuer_and_audience(None, Some(CONSOLE.into()));
    identity.key_cache.refetch_every = REFETCH;
    TestApp::spawn_with(Options {
        identity,
        ..Options::default()
    })
    .await
}

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// A customer's claims, as a provider writes them: its own subject, the user id in a claim of
/// the deployment's choosing.
fn customer(user: u64) -> Value {
    json!({
        "iss": ISSUER, "aud": [AUDIENCE, "https://id.example/userinfo"],
        "sub": "auth0|65f0c2", "customer_id": user.to_string(),
        "iat": now(), "exp": now() + 600, "scope": "openid payments",
    })
}

/// Pays a new bill of `user` with `token`.
async fn pay_with(app: &TestApp, token: &str) -> Received {
    let reply = app
        .http
        .post(format!("{}/v1/bills/{}/pay", app.url, new_key()))
        .bearer_auth(token)
        .header("Idempotency-Key", new_key())
        .json(&payment_body(1_000))
        .send()
        .await
        .expect("the backend replies");
    Received::from(reply).await
}

#[track_caller]
fn assert_paid(reply: &Received, what: &str) {
    assert_eq!(
        reply.status,
        201,
        "{what}: {}",
        String::from_utf8_lossy(&reply.bytes)
    );
}

#[track_caller]
fn assert_refused(reply: &Received, what: &str) {
    let problem = reply.assert_problem(401, "unauthenticated");
    assert_eq!(
        problem["detail"], UNAUTHENTICATED_DETAIL,
        "{what}: one fixed detail"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rs256_and_es256_tokens_pay_and_a_rotated_key_is_never_refused() {
    let provider = IdentityProvider::start().await;
    let (old, new) = (SigningKey::rsa("2026-11"), SigningKey::ec("2026-12"));
    provider.publish(&[&old]);
    let app = backend_of(&provider).await;
    assert_paid(&pay_with(&app, &old.sign(&customer(1))).await, "RS256");
    assert_eq!(provider.fetches(), 1);

    // The provider publishes the next key ahead of using it, as providers do; then signs with
    // it while the old one is still published; then removes the old one.
    provider.publish(&[&old, &new]);
    tokio::time::sleep(REFETCH).await;
    for round in 0..5 {
        assert_paid(
            &pay_with(&app, &new.sign(&customer(2))).await,
            "ES256, new kid",
        );
        assert_paid(
            &pay_with(&app, &old.sign(&customer(1))).await,
            "RS256, old kid",
        );
        assert!(
            round > 0 || provider.fetches() == 2,
            "the new kid fetched once"
        );
    }
    provider.publish(&[&new]);
    tokio::time::sleep(REFETCH).await;
    assert_paid(
        &pay_with(&app, &new.sign(&customer(2))).await,
        "after the old key left",
    );
    assert_paid(
        &pay_with(&app, &old.sign(&customer(1))).await,
        "the old key, while its set is cached (max-age)",
    );
    assert_eq!(
        provider.fetches(),
        2,
        "nothing refetched while every kid is known"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unknown_kids_fetch_a_bounded_number_of_times_and_a_provider_down_changes_nothing() {
    let provider = IdentityProvider::start().await;
    let key = SigningKey::ec("k1");
    provider.publish(&[&key]);
    let app = backend_of(&provider).await;
    assert_paid(
        &pay_with(&app, &key.sign(&customer(3))).await,
        "the first token",
    );
    tokio::time::sleep(REFETCH).await;

    let stranger = SigningKey::ec("not-published");
    assert_refused(
        &pay_with(&app, &stranger.sign(&customer(3))).await,
        "unknown kid",
    );
    assert_eq!(provider.fetches(), 2, "an unknown kid fetches once");

    // 1,000 forged kids, FLOOD_AT_ONCE at a time: under the server's concurrent-request limit,
    // so that every one meets the key cache rather than load shedding's 503.
    let started = std::time::Instant::now();
    let statuses: Vec<u16> = futures_util::stream::iter(0..1_000)
        .map(|i| {
            let token = SigningKey::sign_with_header(
                &key,
                &json!({ "alg": "ES256", "kid": format!("forged-{i}") }),
                &customer(3),
            );
            app.http
                .post(format!("{}/v1/bills/flood-{i}/pay", app.url))
                .bearer_auth(token)
                .header("Idempotency-Key", new_key())
                .json(&payment_body(1_000))
                .send()
        })
        .buffer_unordered(FLOOD_AT_ONCE)
        .map(|reply| reply.expect("replied").status().as_u16())
        .collect()
        .await;
    assert!(statuses.iter().all(|&status| status == 401), "{statuses:?}");
    let bound = 3.0 + started.elapsed().as_secs_f64() / REFETCH.as_secs_f64();
    let fetched = provider.fetches() - 2;
    assert!(
        (fetched as f64) <= bound,
        "{fetched} fetches for 1,000 unknown kids in {:?}",
        started.elapsed()
    );

    provider.set_reachable(false);
    tokio::time::sleep(REFETCH).await;
    assert_paid(
        &pay_with(&app, &key.sign(&customer(3))).await,
        "provider down, key cached",
    );
    assert_refused(
        &pay_with(&app, &stranger.sign(&customer(3))).await,
        "provider down",
    );
    assert_paid(&pay_with(&app, &key.sign(&customer(3))).await, "still");
}

/// A provider down past `AUTH_JWKS_MAX_STALE_SECONDS`: its last keys stop verifying (a key it
/// revoked meanwhile must not stay valid), every request gets a 503 naming the outage with
/// nothing stored, a metric counts them, and the first reply from the provider ends it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_provider_down_past_the_staleness_bound_stops_its_old_keys_until_it_replies() {
    let provider = IdentityProvider::start().await;
    let key = SigningKey::ec("e1");
    provider.publish(&[&key]);
    provider.set_max_age(Some(1));
    let keys = TokenKeys::Provider(KeySource::Url(provider.jwks_url()));
    let mut identity = Identity::with_secrets(SECRET, None);
    identity.customer_keys = keys;
    identity.token_rules = TokenRules::new(30, Some(ISSUER.into()), Some(AUDIENCE.into()))
        .expect("valid rules")
        .with_user_claim(Some("customer_id".into()));
    identity.key_cache.min_max_age = Duration::ZERO;
    identity.key_cache.refetch_every = Duration::from_millis(200);
    identity.key_cache.max_stale = Duration::from_secs(2);
    let app = TestApp::spawn_with(Options {
        identity,
        ..Options::default()
    })
    .await;
    let token = key.sign(&customer(9));
    assert_paid(&pay_with(&app, &token).await, "the provider up");

    provider.set_reachable(false);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_paid(&pay_with(&app, &token).await, "down, within the bound");
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    let refused = pay_with(&app, &token).await;
    let problem = refused.assert_problem(503, "service-unavailable");
    let detail = problem["detail"].as_str().expect("a detail");
    assert!(detail.contains("identity provider"), "{detail}");
    assert!(
        refused.header("retry-after").is_some(),
        "a wait to retry after"
    );
    assert_eq!(
        app.count("payments").await,
        2,
        "nothing claimed while refused"
    );
    let metrics = metrics_text(&app.http, &app.admin_url).await;
    assert!(
        metric_in(
            &metrics,
            "payments_identity_provider_keys_too_old_refusals_total"
        ) >= 1.0,
        "{metrics}"
    );

    provider.set_reachable(true);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_paid(&pay_with(&app, &token).await, "the provider back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn forged_confused_and_out_of_rule_tokens_get_the_one_401() {
    let provider = IdentityProvider::start().await;
    let (rsa, ec) = (SigningKey::rsa("r1"), SigningKey::ec("e1"));
    let b64 = |bytes: &[u8]| {
        use base64::Engine;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    };
    // A 1024-bit modulus (any such number: no key of it signs here, the key set refuses it).
    let mut weak = rsa.jwk();
    weak["kid"] = json!("weak");
    weak["n"] = json!(b64(&[0xc5; 128]));
    provider.publish_json(&json!({ "keys": [rsa.jwk(), ec.jwk(), weak] }));
    let app = backend_of(&provider).await;
    assert_paid(
        &pay_with(&app, &rsa.sign(&customer(5))).await,
        "the control",
    );

    let claims = customer(5);
    let alg_none = format!(
        "{}.{}.",
        b64(json!({ "alg": "none", "kid": "r1" }).to_string().as_bytes()),
        b64(claims.to_string().as_bytes())
    );
    // HS256 keyed with the RSA public key the JWKS publishes: the classic confusion.
    let hs256 = {
        use hmac::Mac;
        let public_key_as_secret = rsa.jwk().to_string();
        let signing_input = format!(
            "{}.{}",
            b64(json!({ "alg": "HS256", "kid": "r1" })
                .to_string()
                .as_bytes()),
            b64(claims.to_string().as_bytes())
        );
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(public_key_as_secret.as_bytes())
            .expect("any key length");
        mac.update(signing_input.as_bytes());
        format!("{signing_input}.{}", b64(&mac.finalize().into_bytes()))
    };
    let with = |change: Value| {
        let mut claims = customer(5);
        for (name, value) in change.as_object().expect("an object") {
            claims[name] = value.clone();
        }
        rsa.sign(&claims)
    };
    let refused = [
        ("alg: none", alg_none),
        ("HS256 with the RSA public key as secret", hs256),
        (
            "an RS256 token for the EC key",
            ec.sign_with_header(&json!({ "alg": "RS256", "kid": "e1" }), &claims),
        ),
        (
            "an ES256 header for the RSA key",
            rsa.sign_with_header(&json!({ "alg": "ES256", "kid": "r1" }), &claims),
        ),
        (
            "no kid",
            rsa.sign_with_header(&json!({ "alg": "RS256" }), &claims),
        ),
        (
            "a key of a 1024-bit modulus",
            rsa.sign_with_header(&json!({ "alg": "RS256", "kid": "weak" }), &claims),
        ),
        (
            "another issuer",
            with(json!({ "iss": "https://evil.example/" })),
        ),
        ("another audience", with(json!({ "aud": "another-api" }))),
        ("expired", with(json!({ "exp": now() - 60 }))),
        ("not yet valid", with(json!({ "nbf": now() + 600 }))),
        ("a user id as a number", with(json!({ "customer_id": 7 }))),
        (
            "signed by a key nobody published, under a published kid",
            SigningKey::rsa("r1").sign(&claims),
        ),
    ];
    for (what, token) in refused {
        assert_refused(&pay_with(&app, &token).await, what);
    }
    // A signed token whose user claim is no user id is told why (SPEC §3).
    let unusable = pay_with(&app, &with(json!({ "customer_id": "0 07" }))).await;
    let problem = unusable.assert_problem(401, "unauthenticated");
    let detail = problem["detail"].as_str().expect("a detail");
    assert!(detail.contains("printable ASCII"), "{detail}");
    assert_eq!(app.count("payments").await, 1, "only the control paid");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn operators_sign_in_with_the_providers_tokens_for_the_console() {
    let provider = IdentityProvider::start().await;
    let key = SigningKey::rsa("ops");
    provider.publish(&[&key]);
    let app = backend_of(&provider).await;
    let operator = |change: Value| {
        let mut claims = json!({
            "iss": ISSUER, "aud": CONSOLE, "sub": "asha@support",
            "roles": ["payments-operator"], "iat": now(), "exp": now() + 900,
        });
        for (name, value) in change.as_object().expect("an object") {
            claims[name] = value.clone();
        }
        key.sign(&claims)
    };
    let queue = |token: String| {
        let http = app.http.clone();
        let url = format!("{}/admin/api/queue", app.admin_url);
        async move {
            let reply = http
                .get(url)
                .bearer_auth(token)
                .send()
                .await
                .expect("replies");
            reply.status().as_u16()
        }
    };
    assert_eq!(queue(operator(json!({}))).await, 200, "an operator");
    assert_eq!(
        queue(operator(json!({ "roles": ["support"] }))).await,
        403,
        "no role"
    );
    assert_eq!(
        queue(key.sign(&customer(1))).await,
        401,
        "a customer's token"
    );
    let long = json!({ "iat": now(), "exp": now() + 3 * 3600 });
    assert_eq!(queue(operator(long)).await, 401, "lives three hours");
}
