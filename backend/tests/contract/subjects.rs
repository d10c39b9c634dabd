//! Opaque subjects (SPEC §3): a user is the identity provider's `sub` as written, so users of
//! Auth0 (`auth0|…`), Firebase (a 28-character uid) and Cognito or Keycloak (a UUID) pay, replay
//! and read as themselves, one key each, with no mapping service; and a token naming no usable
//! user is refused with a 401 that says why, before anything is stored. Counted at the bank
//! simulator's ledger and in the tables, on both stores, directly and through the edge in each
//! of its modes.

use serde_json::{Value, json};
use test_harness::PROVIDER_SUBJECTS;

use crate::support::{Received, Setup, TestApp, new_key, payment_body};

async fn pay_as(app: &TestApp, token: &str, key: &str, body: &Value) -> Received {
    let reply = app
        .http
        .post(format!("{}/v1/bills/elec-1/pay", app.entry_url))
        .bearer_auth(token)
        .header("Idempotency-Key", key)
        .json(body)
        .send()
        .await
        .expect("a reply");
    Received::from(reply).await
}

async fn read_as(app: &TestApp, token: &str, payment_id: &str) -> u16 {
    let reply = app
        .http
        .get(format!("{}/v1/payments/{payment_id}", app.entry_url))
        .bearer_auth(token)
        .send()
        .await
        .expect("a reply");
    reply.status().as_u16()
}

async fn each_subject_pays_once_under_the_same_key_and_reads_only_its_own(setup: Setup) {
    let app = TestApp::spawn_with(setup.options()).await;
    let (key, body) = (new_key(), payment_body(230_000));
    let tokens: Vec<String> = PROVIDER_SUBJECTS
        .iter()
        .map(|subject| TestApp::token_with_claims(&json!({ "sub": subject })))
        .collect();
    let mut payments = Vec::new();
    for (subject, token) in PROVIDER_SUBJECTS.iter().zip(&tokens) {
        let first = pay_as(&app, token, &key, &body).await;
        assert_eq!(first.status, 201, "{subject}: {:?}", first.json());
        let again = pay_as(&app, token, &key, &body).await;
        assert_eq!(again.status, 201, "{subject}");
        assert_eq!(
            again.header("idempotent-replayed"),
            Some("true"),
            "{subject}"
        );
        assert_eq!(again.bytes, first.bytes, "{subject}: the same reply");
        payments.push(first.json()["payment_id"].as_str().expect("id").to_owned());
    }
    for (reader, token) in tokens.iter().enumerate() {
        for (owner, payment_id) in payments.iter().enumerate() {
            let expected = if reader == owner { 200 } else { 404 };
            assert_eq!(read_as(&app, token, payment_id).await, expected);
        }
    }
    assert_eq!(
        app.ledger().await.debits.len(),
        PROVIDER_SUBJECTS.len(),
        "one debit per user"
    );
    let mut stored = app.texts("SELECT user_id FROM idempotency_keys").await;
    stored.sort_unstable();
    let mut expected: Vec<String> = PROVIDER_SUBJECTS.iter().map(|s| (*s).to_owned()).collect();
    expected.sort_unstable();
    assert_eq!(stored, expected, "each key under its subject as written");
}

async fn a_token_naming_no_usable_user_is_refused_saying_why(setup: Setup) {
    let app = TestApp::spawn_with(setup.options()).await;
    let (key, body) = (new_key(), payment_body(230_000));
    let too_long = "a".repeat(256);
    for (claims, why) in [
        (json!({}), "the token has no user claim"),
        (json!({ "sub": "" }), "the user claim is empty"),
        (json!({ "sub": too_long }), "longer than 255 characters"),
        (json!({ "sub": "asha bhat" }), "printable ASCII"),
        (json!({ "sub": "müller" }), "printable ASCII"),
        (json!({ "sub": 42 }), "valid bearer token"),
    ] {
        let token = TestApp::token_with_claims(&claims);
        let reply = pay_as(&app, &token, &key, &body).await;
        assert_eq!(reply.status, 401, "{claims}");
        let problem = reply.json();
        assert_eq!(problem["type"], "/problems/unauthenticated", "{claims}");
        let detail = problem["detail"].as_str().expect("a detail");
        assert!(detail.contains(why), "{claims}: {detail}");
    }
    assert_eq!(app.count("idempotency_keys").await, 0, "nothing stored");
    assert!(app.ledger().await.debits.is_empty(), "nothing charged");
}

for_each_store_and_entry!(
    each_subject_pays_once_under_the_same_key_and_reads_only_its_own,
    a_token_naming_no_usable_user_is_refused_saying_why,
);
