//! The replay cache (`backend::replay_cache`) keeps every promise a database read keeps, on
//! each store: a replay from memory is the saved reply byte for byte (and is counted as one
//! from memory, so these tests see the cache was used); a different body under the key is
//! still 422; another user's identical key is another payment; an entry is forgotten before
//! its key expires, and a key reused after expiry is a new payment, never the old reply; two
//! replicas on one database each remember the same reply; a repeat of bytes already replayed,
//! replied without being parsed again, keeps each of these promises. Money is counted at the bank's
//! ledger. Speed is measured by `bench/perf.sh`, never here.

use std::time::Duration;

use serde_json::json;
use shared::Policy;

use crate::support::{
    Options, Received, StoreKind, TestApp, metric_at, new_key, payment_body, send_pay,
};

const FROM_MEMORY: &str = "payments_idempotency_replays_from_memory_total{operation=\"pay_bill\"}";
const REPLAYS: &str = "payments_idempotency_replays_total{operation=\"pay_bill\"}";

/// User `user` pays bill `elec-1` 230 rupees under `key`.
async fn pay(app: &TestApp, user: u64, key: &str) -> Received {
    app.pay(user, Some(key), "elec-1", &payment_body(23_000))
        .await
}

/// The bank saw `debits` debits, and the backend holds as many payments.
async fn assert_money_moved(app: &TestApp, debits: usize) {
    assert_eq!(
        app.ledger().await.debits.len(),
        debits,
        "debits at the bank"
    );
    let payments = usize::try_from(app.count("payments").await).expect("a count");
    assert_eq!(payments, debits, "payment rows");
}

/// The parts of a reply a replay must repeat exactly.
fn wire(reply: &Received) -> (u16, Vec<u8>, Option<String>) {
    (
        reply.status,
        reply.bytes.clone(),
        reply.header("location").map(str::to_owned),
    )
}

async fn a_replay_from_memory_is_the_saved_reply_byte_for_byte(store: StoreKind) {
    let app = TestApp::spawn_on(store).await;
    let key = new_key();
    let first = pay(&app, 7, &key).await;
    assert_eq!(first.status, 201);
    for n in 1..=5 {
        let replay = pay(&app, 7, &key).await;
        assert!(replay.is_replay(), "repeat {n}");
        assert_eq!(wire(&replay), wire(&first), "repeat {n}");
    }
    // The save remembered the reply: every repeat came from memory.
    assert_eq!(app.metric(FROM_MEMORY).await, 5.0);
    assert_eq!(app.metric(REPLAYS).await, 5.0);
    assert_money_moved(&app, 1).await;
}

async fn a_replay_read_from_the_database_is_remembered_too(store: StoreKind) {
    let app = TestApp::spawn_on(store).await;
    let key = new_key();
    let first = pay(&app, 7, &key).await;
    assert_eq!(first.status, 201);
    // As after a restart, or on another replica: nothing in memory.
    app.state.replay_cache.forget_all();
    let from_database = pay(&app, 7, &key).await;
    assert_eq!(
        app.metric(FROM_MEMORY).await,
        0.0,
        "the first replay reads the row"
    );
    let from_memory = pay(&app, 7, &key).await;
    assert_eq!(
        app.metric(FROM_MEMORY).await,
        1.0,
        "the second is remembered"
    );
    assert!(from_database.is_replay() && from_memory.is_replay());
    assert_eq!(wire(&from_database), wire(&first));
    assert_eq!(wire(&from_memory), wire(&first));
    assert_money_moved(&app, 1).await;
}

async fn a_different_body_under_a_remembered_key_is_still_422(store: StoreKind) {
    let app = TestApp::spawn_on(store).await;
    let key = new_key();
    let first = pay(&app, 7, &key).await;
    assert_eq!(first.status, 201);
    // Tried: another amount, another payer, another bill, each under the remembered key.
    let changed = [
        ("elec-1", payment_body(23_001)),
        (
            "elec-1",
            json!({ "amount_paise": 23_000, "payer_vpa": "ravi@okbank" }),
        ),
        ("elec-2", payment_body(23_000)),
    ];
    for (bill, body) in &changed {
        let refused = app.pay(7, Some(&key), bill, body).await;
        refused.assert_problem(422, "idempotency-key-reused");
    }
    assert_eq!(
        app.metric("payments_idempotency_mismatches_total{operation=\"pay_bill\"}")
            .await,
        3.0
    );
    let replay = pay(&app, 7, &key).await;
    assert_eq!(
        wire(&replay),
        wire(&first),
        "the key still replays its own reply"
    );
    assert_money_moved(&app, 1).await;
}

/// `POST /v1/bills/{bill}/pay` as user 7 with each of `keys` as an `Idempotency-Key` header,
/// and `body` sent as these very bytes.
async fn pay_bytes_keyed(app: &TestApp, keys: &[&str], bill: &str, body: &'static str) -> Received {
    let mut request = app
        .http
        .post(format!("{}/v1/bills/{bill}/pay", app.url))
        .bearer_auth(TestApp::token(7))
        .header("content-type", "application/json")
        .body(body);
    for key in keys {
        request = request.header("Idempotency-Key", *key);
    }
    Received::from(request.send().await.expect("backend replies")).await
}

/// `POST /v1/bills/{bill}/pay` as user 7 under `key`, with `body` sent as these very bytes.
async fn pay_bytes(app: &TestApp, key: &str, bill: &str, body: &'static str) -> Received {
    pay_bytes_keyed(app, &[key], bill, body).await
}

async fn the_very_bytes_of_a_replayed_repeat_keep_every_promise(store: StoreKind) {
    // A repeat of bytes already replayed from memory is judged without its body being parsed
    // again; every other request under the key is still checked in full.
    let app = TestApp::spawn_on(store).await;
    let key = new_key();
    let sent = r#"{"amount_paise":23000,"payer_vpa":"asha@okbank"}"#;
    let first = pay_bytes(&app, &key, "elec-1", sent).await;
    assert_eq!(first.status, 201);
    for n in 1..=3 {
        let replay = pay_bytes(&app, &key, "elec-1", sent).await;
        assert!(replay.is_replay(), "repeat {n}");
        assert_eq!(wire(&replay), wire(&first), "repeat {n}");
    }
    // Tried under the key, after those repeats: the same bytes to another bill, and the body
    // changed by one byte; both refused.
    let other_bill = pay_bytes(&app, &key, "elec-2", sent).await;
    other_bill.assert_problem(422, "idempotency-key-reused");
    let changed = r#"{"amount_paise":23001,"payer_vpa":"asha@okbank"}"#;
    let other_amount = pay_bytes(&app, &key, "elec-1", changed).await;
    other_amount.assert_problem(422, "idempotency-key-reused");
    // The same JSON spelt another way is other bytes, checked in full: the same payment.
    let spelt = r#"{ "payer_vpa": "asha@okbank", "amount_paise": 23000 }"#;
    let respelt = pay_bytes(&app, &key, "elec-1", spelt).await;
    assert!(respelt.is_replay());
    assert_eq!(wire(&respelt), wire(&first));
    // Malformed JSON is refused as such, even under a remembered key.
    let broken = pay_bytes(&app, &key, "elec-1", r#"{"amount_paise":23000,"#).await;
    assert_eq!(broken.status, 400);
    // The very bytes with the key header sent twice: the key is refused as the full checks
    // refuse it (SPEC's order), not replayed on the first value.
    let twice = pay_bytes_keyed(&app, &[&key, &key], "elec-1", sent).await;
    twice.assert_problem(400, "idempotency-key-malformed");
    assert_eq!(app.metric(FROM_MEMORY).await, 4.0);
    assert_eq!(
        app.metric("payments_idempotency_mismatches_total{operation=\"pay_bill\"}")
            .await,
        2.0
    );
    assert_money_moved(&app, 1).await;
}

async fn another_users_identical_key_is_another_payment(store: StoreKind) {
    let app = TestApp::spawn_on(store).await;
    let key = new_key();
    let asha = pay(&app, 7, &key).await;
    let ravi = pay(&app, 8, &key).await;
    assert_eq!((asha.status, ravi.status), (201, 201));
    assert!(!ravi.is_replay(), "user 8 never paid under this key");
    assert_ne!(asha.json()["payment_id"], ravi.json()["payment_id"]);
    assert_eq!(app.metric(FROM_MEMORY).await, 0.0);
    // Each user's repeat replays their own reply.
    let asha_again = pay(&app, 7, &key).await;
    let ravi_again = pay(&app, 8, &key).await;
    assert_eq!(wire(&asha_again), wire(&asha));
    assert_eq!(wire(&ravi_again), wire(&ravi));
    assert_eq!(app.metric(FROM_MEMORY).await, 2.0);
    assert_money_moved(&app, 2).await;
}

/// Keys kept three seconds: long enough to remember a reply, short enough to see it expire.
fn short_lived_keys(store: StoreKind) -> Options {
    Options {
        store,
        policy: Policy {
            keep_keys_for: Duration::from_secs(3),
            ..crate::support::test_policy()
        },
        ..Options::default()
    }
}

async fn a_key_reused_after_expiry_is_a_new_payment_not_the_remembered_reply(store: StoreKind) {
    let app = TestApp::spawn_with(short_lived_keys(store)).await;
    let key = new_key();
    let first = pay(&app, 7, &key).await;
    assert_eq!(first.status, 201);
    let replay = pay(&app, 7, &key).await;
    assert_eq!(wire(&replay), wire(&first));
    assert_eq!(app.metric(FROM_MEMORY).await, 1.0);

    tokio::time::sleep(Duration::from_millis(3_200)).await;
    let reused = pay(&app, 7, &key).await;
    assert_eq!(reused.status, 201);
    assert!(!reused.is_replay(), "an expired key starts afresh");
    assert_ne!(reused.json()["payment_id"], first.json()["payment_id"]);
    assert_eq!(
        app.metric(FROM_MEMORY).await,
        1.0,
        "the old reply was not used"
    );
    // The new reply is the one remembered now.
    let replay = pay(&app, 7, &key).await;
    assert_eq!(wire(&replay), wire(&reused));
    assert_eq!(app.metric(FROM_MEMORY).await, 2.0);
    assert_money_moved(&app, 2).await;
}

async fn a_reply_is_forgotten_before_its_key_expires(store: StoreKind) {
    let app = TestApp::spawn_with(short_lived_keys(store)).await;
    let key = new_key();
    let first = pay(&app, 7, &key).await;
    assert_eq!(first.status, 201);
    // Past the entry's life (three seconds less the one-second margin), within the key's.
    tokio::time::sleep(Duration::from_millis(2_200)).await;
    let replay = pay(&app, 7, &key).await;
    assert!(replay.is_replay(), "the key itself has not expired");
    assert_eq!(wire(&replay), wire(&first));
    assert_eq!(app.metric(FROM_MEMORY).await, 0.0, "read from the database");
    assert_money_moved(&app, 1).await;
}

for_each_store!(
    a_replay_from_memory_is_the_saved_reply_byte_for_byte,
    a_replay_read_from_the_database_is_remembered_too,
    a_different_body_under_a_remembered_key_is_still_422,
    the_very_bytes_of_a_replayed_repeat_keep_every_promise,
    another_users_identical_key_is_another_payment,
    a_key_reused_after_expiry_is_a_new_payment_not_the_remembered_reply,
    a_reply_is_forgotten_before_its_key_expires,
);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_remember_the_same_reply_and_refuse_the_same_mismatch() {
    let app = TestApp::spawn().await;
    let replica = app.spawn_replica(&Options::default()).await;
    let key = new_key();
    let pay_on = |url: &str, amount| {
        let (http, url, key) = (app.http.clone(), url.to_owned(), key.clone());
        async move {
            send_pay(&http, &url, 7, Some(&key), "elec-1", &payment_body(amount))
                .await
                .expect("a replica replies")
        }
    };
    let first = pay_on(&app.url, 23_000).await;
    assert_eq!(first.status, 201);
    for round in 1..=3 {
        for url in [&app.url, &replica.url] {
            let replay = pay_on(url, 23_000).await;
            assert!(replay.is_replay(), "round {round} on {url}");
            assert_eq!(wire(&replay), wire(&first), "round {round} on {url}");
            pay_on(url, 23_001)
                .await
                .assert_problem(422, "idempotency-key-reused");
        }
    }
    // The first replica remembered its save; the second read the row once, then remembered.
    assert_eq!(app.metric(FROM_MEMORY).await, 3.0);
    let on_replica = metric_at(&app.http, &replica.admin_url, FROM_MEMORY).await;
    assert_eq!(on_replica, 2.0);
    assert_money_moved(&app, 1).await;
}
