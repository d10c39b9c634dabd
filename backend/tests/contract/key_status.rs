//! `GET /v1/idempotency-keys/{key}` over HTTP: a finished key gets its saved outcome (201 or
//! the 402 decline) exactly as a replay would, a pending key its state with `Retry-After`, and a
//! key is only ever found for the user who sent it. Reading never moves money. On both stores,
//! directly and through the edge in each of its modes.

use std::time::Duration;

use crate::support::{Options, Received, Setup, TestApp, new_key, payment_body, wait_for};
use backend::reconcile::try_reconcile_once;
use bank_simulator::Knobs;
use serde_json::{Value, json};

/// `GET /v1/idempotency-keys/{key_in_path}` as `user`.
async fn key_status(app: &TestApp, user: u64, key_in_path: &str) -> Received {
    let response = app
        .http
        .get(format!(
            "{}/v1/idempotency-keys/{key_in_path}",
            app.entry_url
        ))
        .bearer_auth(TestApp::token(user))
        .send()
        .await
        .expect("a reply");
    Received::from(response).await
}

/// Asserts a 200 status reply in `state` with an RFC 3339 `expires_at`, and returns its body
/// without `expires_at`.
fn assert_state(reply: &Received, state: &str) -> Value {
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.bytes)
    );
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert_eq!(reply.header("cache-control"), Some("no-store"));
    let mut body = reply.json();
    assert_eq!(body["state"], state, "{body}");
    let expires_at = body
        .as_object_mut()
        .and_then(|fields| fields.remove("expires_at"))
        .expect("expires_at");
    let expires_at = expires_at.as_str().expect("expires_at is text");
    time::OffsetDateTime::parse(expires_at, &time::format_description::well_known::Rfc3339)
        .expect("expires_at is RFC 3339");
    body
}

async fn finished_payment_replies_with_the_saved_201_for_bare_and_quoted_keys(setup: Setup) {
    let app = TestApp::spawn_with(setup.options()).await;
    let key = new_key();
    let paid = app
        .pay(7, Some(&key), "elec-1", &payment_body(230_000))
        .await;
    assert_eq!(paid.status, 201);

    for key_in_path in [key.clone(), format!("%22{key}%22"), key.to_uppercase()] {
        let reply = key_status(&app, 7, &key_in_path).await;
        let body = assert_state(&reply, "done");
        assert_eq!(body["operation"], "pay_bill");
        assert_eq!(body["status"], 201);
        assert_eq!(body["reply"], paid.json(), "{key_in_path}");
        assert_eq!(
            body["answer"], body["reply"],
            "the deprecated alias, for older clients"
        );
        assert_eq!(reply.header("retry-after"), None);
    }
    assert_eq!(app.ledger().await.debits.len(), 1, "reading moved no money");
}

async fn declined_payment_replies_with_the_saved_402_problem(setup: Setup) {
    let app = TestApp::spawn_with(setup.options()).await;
    let key = new_key();
    let body = json!({"amount_paise": 230_000, "payer_vpa": "decline@okbank"});
    let declined = app.pay(7, Some(&key), "elec-1", &body).await;
    declined.assert_problem(402, "payment-declined");

    let status = assert_state(&key_status(&app, 7, &key).await, "done");
    assert_eq!(status["status"], 402);
    assert_eq!(status["reply"], declined.json());
    assert_eq!(status["answer"], status["reply"]);
}

async fn finished_refund_replies_with_the_saved_refund(setup: Setup) {
    let app = TestApp::spawn_with(setup.options()).await;
    let paid = app
        .pay(7, Some(&new_key()), "elec-1", &payment_body(10_000))
        .await;
    let payment_id = paid.json()["payment_id"]
        .as_str()
        .expect("payment id")
        .to_owned();
    let refund_key = new_key();
    let refunded = app.refund(7, &refund_key, &payment_id, 4_000).await;
    assert_eq!(refunded.status, 201);

    let status = assert_state(&key_status(&app, 7, &refund_key).await, "done");
    assert_eq!(status["operation"], "refund_payment");
    assert_eq!(status["status"], 201);
    assert_eq!(status["reply"], refunded.json());
}

async fn key_whose_bank_reply_was_lost_is_unknown_until_reconciled(setup: Setup) {
    let app = TestApp::spawn_with(Options {
        knobs: Knobs {
            lost_reply_rate: 1.0,
            ..Knobs::default()
        },
        bank_timeout: Duration::from_millis(300),
        ..setup.options()
    })
    .await;
    let key = new_key();
    let pending = app
        .pay(7, Some(&key), "elec-1", &payment_body(230_000))
        .await;
    pending.assert_problem(503, "outcome-pending");

    let unknown = key_status(&app, 7, &key).await;
    let mut body = assert_state(&unknown, "unknown");
    // When the rail's rules let the bank be asked next: under the tests' policy, at once.
    let next_check = body
        .as_object_mut()
        .and_then(|fields| fields.remove("next_check_at"))
        .expect("next_check_at");
    time::OffsetDateTime::parse(
        next_check.as_str().expect("text"),
        &time::format_description::well_known::Rfc3339,
    )
    .expect("next_check_at is RFC 3339");
    assert_eq!(body, json!({"state": "unknown", "operation": "pay_bill"}));
    assert_eq!(unknown.header("retry-after"), Some("5"));

    try_reconcile_once(&app.state)
        .await
        .expect("reconciler step");
    let done = assert_state(&key_status(&app, 7, &key).await, "done");
    assert_eq!(done["status"], 201);
    assert_eq!(app.ledger().await.debits.len(), 1);
}

async fn key_still_running_is_started_with_retry_after(setup: Setup) {
    let app = TestApp::spawn_with(Options {
        knobs: Knobs {
            latency_ms: 1_500,
            ..Knobs::default()
        },
        ..setup.options()
    })
    .await;
    let key = new_key();
    let paying = tokio::spawn({
        let (http, url, key) = (app.http.clone(), app.entry_url.clone(), key.clone());
        async move {
            crate::support::send_pay(&http, &url, 7, Some(&key), "elec-1", &payment_body(500)).await
        }
    });
    wait_for(
        "the key to be claimed",
        Duration::from_secs(5),
        async || app.key_state(7, &key).await.is_some(),
    )
    .await;

    let started = key_status(&app, 7, &key).await;
    assert_eq!(
        assert_state(&started, "started"),
        json!({"state": "started", "operation": "pay_bill"})
    );
    assert_eq!(started.header("retry-after"), Some("1"));

    let paid = paying.await.expect("task").expect("a reply");
    assert_eq!(paid.status, 201);
    let done = assert_state(&key_status(&app, 7, &key).await, "done");
    assert_eq!(done["reply"], paid.json());
}

async fn another_users_key_is_the_same_404_as_a_key_never_sent(setup: Setup) {
    let app = TestApp::spawn_with(setup.options()).await;
    let key = new_key();
    let paid = app
        .pay(7, Some(&key), "elec-1", &payment_body(230_000))
        .await;
    assert_eq!(paid.status, 201);

    let foreign = key_status(&app, 8, &key).await;
    let never_sent = key_status(&app, 7, &new_key()).await;
    assert_eq!(
        foreign.assert_problem(404, "not-found"),
        never_sent.assert_problem(404, "not-found")
    );
}

async fn malformed_key_is_400_and_a_missing_token_is_401(setup: Setup) {
    let app = TestApp::spawn_with(setup.options()).await;
    for malformed in [
        "order-1234",
        "c232ab00-9414-11ec-b3c8-9f6bdeced846",
        "%22unterminated",
    ] {
        key_status(&app, 7, malformed)
            .await
            .assert_problem(400, "idempotency-key-malformed");
    }
    let anonymous = app
        .http
        .get(format!(
            "{}/v1/idempotency-keys/{}",
            app.entry_url,
            new_key()
        ))
        .send()
        .await
        .expect("a reply");
    Received::from(anonymous)
        .await
        .assert_problem(401, "unauthenticated");
}

for_each_store_and_entry!(
    finished_payment_replies_with_the_saved_201_for_bare_and_quoted_keys,
    declined_payment_replies_with_the_saved_402_problem,
    finished_refund_replies_with_the_saved_refund,
    key_whose_bank_reply_was_lost_is_unknown_until_reconciled,
    key_still_running_is_started_with_retry_after,
    another_users_key_is_the_same_404_as_a_key_never_sent,
    malformed_key_is_400_and_a_missing_token_is_401,
);
