//! The Worker under `workerd` with tokens from an identity provider (a JWKS endpoint of the
//! test's own, RSA and EC keys made per test), in front of a real backend that checks them
//! too, and with the backend replying only to what the edge forwards (the edge's proof):
//! - RS256 and ES256 tokens pay through the edge, their signatures checked by WebCrypto;
//!   `alg: none`, a key confusion and an unknown `kid` are refused at the edge, never reaching
//!   the backend; a key rotated in passes once published; a flood of unknown `kid`s fetches the
//!   set a bounded number of times; with the provider down, the cached keys keep working;
//! - the backend refuses a request that did not come through the edge (403), and the same
//!   request through the edge pays, a read through the edge (a `GET`, its proof over an empty
//!   body) replies too.
#![cfg(not(target_arch = "wasm32"))]

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::{Call, JWKS_REFETCH_SECONDS, PAY_ROUTE, Stack, StackOptions, Via};
use test_harness::{IdentityProvider, SigningKey};

const ISSUER: &str = "https://id.example/";
const AUDIENCE: &str = "payments-api";

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

fn customer(user: u64) -> Value {
    json!({
        "iss": ISSUER, "aud": AUDIENCE, "sub": format!("auth0|{user}"),
        "customer_id": user.to_string(), "iat": now(), "exp": now() + 600,
    })
}

fn pay_with(token: &str, bill: &str) -> Call {
    let body = r#"{"amount_paise": 1000, "payer_vpa": "asha@okbank"}"#;
    Call::pay(1, &uuid::Uuid::new_v4().to_string(), bill, body)
        .with_header("authorization", &format!("Bearer {token}"))
}

fn options(provider: &IdentityProvider, edge_proof: bool) -> StackOptions {
    StackOptions {
        jwks_url: Some(provider.jwks_url()),
        shared_settings: vec![
            ("AUTH_JWT_ISSUER", ISSUER.to_owned()),
            ("AUTH_JWT_AUDIENCE", AUDIENCE.to_owned()),
            ("AUTH_USER_CLAIM", "customer_id".to_owned()),
        ],
        edge_proof,
        ..StackOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn provider_tokens_are_checked_by_webcrypto_at_the_edge_and_by_the_backend() {
    let provider = IdentityProvider::start().await;
    let (rsa, ec) = (SigningKey::rsa("rsa-1"), SigningKey::ec("ec-1"));
    provider.publish(&[&rsa, &ec]);
    let stack = Stack::start(options(&provider, true)).await;

    for (what, token) in [
        ("RS256", rsa.sign(&customer(7))),
        ("ES256", ec.sign(&customer(8))),
    ] {
        let paid = stack
            .send(Via::Edge, &pay_with(&token, &format!("bill-{what}")))
            .await;
        assert_eq!(
            paid.status,
            201,
            "{what}: {}",
            String::from_utf8_lossy(&paid.bytes)
        );
    }
    assert_eq!(stack.debits().await.len(), 2);

    let reached_backend = stack.backend_requests(PAY_ROUTE).await;
    let alg_none = {
        use base64::Engine;
        let b64 = |value: &Value| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(value.to_string())
        };
        format!(
            "{}.{}.",
            b64(&json!({"alg": "none", "kid": "rsa-1"})),
            b64(&customer(7))
        )
    };
    let refused = [
        ("alg: none", alg_none),
        (
            "an ES256 header on the RSA key",
            rsa.sign_with_header(&json!({"alg": "ES256", "kid": "rsa-1"}), &customer(7)),
        ),
        (
            "an RS256 token for the EC key",
            ec.sign_with_header(&json!({"alg": "RS256", "kid": "ec-1"}), &customer(7)),
        ),
        (
            "a key nobody published",
            SigningKey::ec("stranger").sign(&customer(7)),
        ),
        (
            "a published kid, another key's signature",
            SigningKey::rsa("rsa-1").sign(&customer(7)),
        ),
        (
            "another audience",
            rsa.sign(&{
                let mut claims = customer(7);
                claims["aud"] = json!("another-api");
                claims
            }),
        ),
    ];
    for (what, token) in refused {
        let reply = stack.send(Via::Edge, &pay_with(&token, "refused")).await;
        reply.assert_problem(401, "unauthenticated");
        assert_eq!(
            reply.json()["detail"],
            shared::problem::UNAUTHENTICATED_DETAIL,
            "{what}"
        );
    }
    assert_eq!(
        stack.backend_requests(PAY_ROUTE).await,
        reached_backend,
        "every refusal made at the edge"
    );

    // A key rotated in: published, then used.
    let next = SigningKey::ec("ec-2");
    provider.publish(&[&rsa, &ec, &next]);
    tokio::time::sleep(Duration::from_secs(JWKS_REFETCH_SECONDS)).await;
    let rotated = stack
        .send(Via::Edge, &pay_with(&next.sign(&customer(9)), "rotated"))
        .await;
    assert_eq!(
        rotated.status,
        201,
        "{}",
        String::from_utf8_lossy(&rotated.bytes)
    );

    // A flood of unknown kids: a bounded number of fetches, at the edge and the backend.
    tokio::time::sleep(Duration::from_secs(JWKS_REFETCH_SECONDS)).await;
    let before = provider.fetches();
    let started = std::time::Instant::now();
    for round in 0..200 {
        let forged = ec.sign_with_header(
            &json!({"alg": "ES256", "kid": format!("f-{round}")}),
            &customer(7),
        );
        let reply = stack.send(Via::Edge, &pay_with(&forged, "flood")).await;
        assert_eq!(reply.status, 401);
    }
    let fetches = provider.fetches() - before;
    let bound = 2 + started.elapsed().as_secs() / JWKS_REFETCH_SECONDS;
    assert!(
        fetches as u64 <= bound,
        "{fetches} fetches in {:?}",
        started.elapsed()
    );

    // The provider down: the cached keys keep working.
    provider.set_reachable(false);
    tokio::time::sleep(Duration::from_secs(JWKS_REFETCH_SECONDS)).await;
    let cached = stack
        .send(Via::Edge, &pay_with(&rsa.sign(&customer(7)), "cached"))
        .await;
    assert_eq!(
        cached.status,
        201,
        "{}",
        String::from_utf8_lossy(&cached.bytes)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_backend_replies_only_what_the_edge_forwarded() {
    let provider = IdentityProvider::start().await;
    let key = SigningKey::ec("ec-1");
    provider.publish(&[&key]);
    let stack = Stack::start(options(&provider, true)).await;
    let call = pay_with(&key.sign(&customer(4)), "direct");

    let direct = stack.send(Via::Backend, &call).await;
    direct.assert_problem(403, "forbidden");
    let forged = call
        .clone()
        .with_header("edge-proof", "v2 t=1 n=x sig=AAAA");
    stack
        .send(Via::Backend, &forged)
        .await
        .assert_problem(403, "forbidden");
    assert!(stack.debits().await.is_empty(), "nothing reached the bank");

    // A client's own proof header is dropped at the edge, which makes its own.
    let through = stack.send(Via::Edge, &forged).await;
    assert_eq!(
        through.status,
        201,
        "{}",
        String::from_utf8_lossy(&through.bytes)
    );
    let payment_id = through.json()["payment_id"]
        .as_str()
        .expect("an id")
        .to_owned();
    let read = Call::get(&format!("/v1/payments/{payment_id}"), None).with_header(
        "authorization",
        &format!("Bearer {}", key.sign(&customer(4))),
    );
    let read = stack.send(Via::Edge, &read).await;
    assert_eq!(read.status, 200, "{}", String::from_utf8_lossy(&read.bytes));
    assert_eq!(stack.debits().await.len(), 1);
}
