//! The bank's signed callbacks (SPEC §7, "Bank callbacks"; `POST /bank/callbacks` on the admin
//! listener): a valid one settles a waiting key at once, with no status check, and its retry
//! replays the payment; a duplicate changes nothing; a missing or forged signature, a stale
//! time, a malformed body, a reference we never issued and a status contradicting ours each get
//! their own reply, and nothing is applied twice; the previous secret is accepted while the
//! bank rotates; without a secret the route is closed; the public listener has no such route.

use std::time::Duration;

use backend::config::BankConfig;
use bank_api::callback::{MAX_CALLBACK_AGE_SECONDS, SIGNATURE_HEADER, sign};
use bank_simulator::Knobs;
use secret_settings::SecretString;
use serde_json::{Value, json};

use crate::support::{Options, StoreKind, TestApp, new_key, payment_body};

const CURRENT: &str = "the-bank's-callback-secret-of-32-bytes";
const PREVIOUS: &str = "the-bank's-previous-secret-of-32-bytes";

/// A time outside the accepted window by a clear minute. One second past the edge raced the
/// receiver's clock: `now() + 301`, checked a second later, is 300 s away and accepted, and the
/// callback is applied before the test means it to be.
const OUTSIDE_THE_WINDOW: i64 = MAX_CALLBACK_AGE_SECONDS + 60;

/// Lost replies past the timeout, and no status check for an hour: only a callback can settle
/// a key within the test.
fn waiting_for_the_bank(store: StoreKind, secrets: &[&str]) -> Options {
    let mut options = Options::replies_lost_past_the_timeout(store);
    options.policy.status_checks.first_after = Duration::from_secs(3_600);
    options.bank = BankConfig {
        callback_secrets: secrets
            .iter()
            .map(|secret| SecretString::from(*secret))
            .collect(),
        ..BankConfig::default()
    };
    options
}

/// Sends `body` to the admin listener's callback route, signed under `secret` at `at` (unix
/// seconds), or unsigned; the status and the JSON body.
async fn callback(
    app: &TestApp,
    body: &Value,
    signed: Option<(&str, i64)>,
    listener: &str,
) -> (u16, Value) {
    let bytes = serde_json::to_vec(body).expect("serialises");
    let mut request = app
        .http
        .post(format!("{listener}/bank/callbacks"))
        .header("content-type", "application/json")
        .body(bytes.clone());
    if let Some((secret, at)) = signed {
        request = request.header(SIGNATURE_HEADER, sign(secret.as_bytes(), at, &bytes));
    }
    let reply = request.send().await.expect("the backend replies");
    let status = reply.status().as_u16();
    (status, reply.json().await.unwrap_or(Value::Null))
}

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// Pays as `user`; the key is left `unknown` with its debit at the bank. The debit's reference.
async fn unknown_payment(app: &TestApp, user: u64, amount: u64) -> (String, String) {
    let key = new_key();
    app.pay(user, Some(&key), "elec-1", &payment_body(amount))
        .await
        .assert_problem(503, "outcome-pending");
    let reference = app
        .ledger()
        .await
        .debits
        .iter()
        .find(|debit| debit.amount_paise == amount)
        .expect("the bank debited")
        .reference
        .clone();
    (key, reference)
}

async fn a_signed_callback_settles_a_waiting_key_at_once_and_a_duplicate_changes_nothing(
    store: StoreKind,
) {
    let app = TestApp::spawn_with(waiting_for_the_bank(store, &[CURRENT])).await;
    let (key, reference) = unknown_payment(&app, 61, 6_100).await;
    let debited = json!({"reference": reference, "amount_paise": 6_100, "status": "debited"});

    let (status, reply) = callback(&app, &debited, Some((CURRENT, now())), &app.admin_url).await;
    assert_eq!(
        (status, reply["result"].as_str()),
        (200, Some("applied")),
        "{reply}"
    );
    assert_eq!(app.key_state(61, &key).await.as_deref(), Some("done"));
    let retry = app
        .pay(61, Some(&key), "elec-1", &payment_body(6_100))
        .await;
    assert_eq!((retry.status, retry.is_replay()), (201, true));
    assert_eq!(
        app.bank.simulator.check_stats().status_checks,
        0,
        "no status check"
    );

    let (status, reply) = callback(&app, &debited, Some((CURRENT, now())), &app.admin_url).await;
    assert_eq!(
        (status, reply["result"].as_str()),
        (200, Some("already_final"))
    );
    assert_eq!(app.ledger().await.debits.len(), 1);
    assert_eq!(
        app.metric(r#"payments_bank_callbacks_total{result="applied"}"#)
            .await,
        1.0
    );
}

async fn each_bad_callback_gets_its_reply_and_nothing_is_applied_twice(store: StoreKind) {
    let app = TestApp::spawn_with(waiting_for_the_bank(store, &[CURRENT, PREVIOUS])).await;
    let (key, reference) = unknown_payment(&app, 62, 6_200).await;
    let debited = json!({"reference": reference, "amount_paise": 6_200, "status": "debited"});
    let admin = app.admin_url.clone();

    for (signed, what) in [
        (None, "unsigned"),
        (
            Some(("a-secret-the-bank-never-had-32-bytes!!", now())),
            "forged",
        ),
        (Some((CURRENT, now() - OUTSIDE_THE_WINDOW)), "stale"),
        (
            Some((CURRENT, now() + OUTSIDE_THE_WINDOW)),
            "from the future",
        ),
    ] {
        let (status, reply) = callback(&app, &debited, signed, &admin).await;
        assert_eq!(status, 401, "{what}: {reply}");
        assert_eq!(reply["type"], "/problems/unauthenticated", "{what}");
    }
    let (status, _) = callback(
        &app,
        &json!({"reference": reference}),
        Some((CURRENT, now())),
        &admin,
    )
    .await;
    assert_eq!(status, 400, "a body without amount and status");
    let pending = json!({"reference": reference, "amount_paise": 6_200, "status": "pending"});
    let (status, reply) = callback(&app, &pending, Some((CURRENT, now())), &admin).await;
    assert_eq!(
        (status, reply["field"].as_str()),
        (422, Some("status")),
        "{reply}"
    );
    let unknown = json!({"reference": "pay-00000000-0000-4000-8000-000000000000",
                         "amount_paise": 1, "status": "debited"});
    let (status, reply) = callback(&app, &unknown, Some((CURRENT, now())), &admin).await;
    assert_eq!(
        (status, reply["result"].as_str()),
        (404, Some("unknown_reference"))
    );
    let wrong_amount = json!({"reference": reference, "amount_paise": 6_201, "status": "debited"});
    let (status, reply) = callback(&app, &wrong_amount, Some((CURRENT, now())), &admin).await;
    assert_eq!(
        (status, reply["result"].as_str()),
        (409, Some("mismatch")),
        "{reply}"
    );
    assert_eq!(
        app.key_state(62, &key).await.as_deref(),
        Some("unknown"),
        "nothing applied"
    );

    // Signed under the previous secret while the bank rotates: accepted.
    let (status, reply) = callback(&app, &debited, Some((PREVIOUS, now())), &admin).await;
    assert_eq!(
        (status, reply["result"].as_str()),
        (200, Some("applied")),
        "{reply}"
    );
    // A contradiction of that final word: recorded, never applied.
    let declined = json!({"reference": reference, "amount_paise": 6_200, "status": "declined"});
    let (status, reply) = callback(&app, &declined, Some((CURRENT, now())), &admin).await;
    assert_eq!((status, reply["result"].as_str()), (409, Some("mismatch")));
    assert_eq!(
        app.texts("SELECT CAST(status AS TEXT) FROM payments").await,
        ["succeeded"]
    );
    let findings = app
        .scalar("SELECT count(*) FROM key_events WHERE user_id = '62' AND event = 'ledger_checked'")
        .await;
    assert_eq!(
        findings, 2,
        "the wrong amount and the contradiction, on the key's trail"
    );
    assert_eq!(app.ledger().await.debits.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_a_secret_the_route_is_closed_and_the_public_listener_has_none() {
    let open = TestApp::spawn_with(waiting_for_the_bank(StoreKind::Postgres, &[CURRENT])).await;
    let any = json!({"reference": "pay-1", "amount_paise": 1, "status": "debited"});
    let (status, _) = callback(&open, &any, Some((CURRENT, now())), &open.url).await;
    assert_eq!(status, 404, "never on the public listener");

    let closed = TestApp::spawn_with(Options {
        knobs: Knobs::default(),
        ..Options::default()
    })
    .await;
    let (status, reply) = callback(&closed, &any, Some((CURRENT, now())), &closed.admin_url).await;
    assert_eq!(status, 404, "{reply}");
    assert!(
        reply["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains("BANK_CALLBACK_SECRET")),
        "{reply}"
    );
}

/// The bank simulator's own callbacks, delayed and duplicated, settle a lost reply's key with
/// no status check; the duplicate changes nothing.
async fn the_simulators_callbacks_settle_lost_replies_without_a_check(store: StoreKind) {
    let mut options = waiting_for_the_bank(store, &[CURRENT]);
    options.knobs = Knobs {
        callback_delay_ms: 200,
        callback_duplicates: 1,
        ..options.knobs
    };
    let app = TestApp::spawn_with(options).await;
    let url = format!("{}/bank/callbacks", app.admin_url);
    app.bank
        .simulator
        .send_callbacks_to(&url, CURRENT.as_bytes());
    let key = new_key();
    app.pay(63, Some(&key), "elec-1", &payment_body(6_300))
        .await
        .assert_problem(503, "outcome-pending");
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while app.key_state(63, &key).await.as_deref() != Some("done") {
        assert!(
            std::time::Instant::now() < deadline,
            "no callback settled it"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let replay = app
        .pay(63, Some(&key), "elec-1", &payment_body(6_300))
        .await;
    assert_eq!((replay.status, replay.is_replay()), (201, true));
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while app
        .metric(r#"payments_bank_callbacks_total{result="already_final"}"#)
        .await
        < 1.0
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the duplicate never came"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        app.metric(r#"payments_bank_callbacks_total{result="applied"}"#)
            .await,
        1.0
    );
    assert_eq!(app.bank.simulator.check_stats().status_checks, 0);
    assert_eq!(app.ledger().await.debits.len(), 1);
}

for_each_store!(
    a_signed_callback_settles_a_waiting_key_at_once_and_a_duplicate_changes_nothing,
    each_bad_callback_gets_its_reply_and_nothing_is_applied_twice,
    the_simulators_callbacks_settle_lost_replies_without_a_check,
);
