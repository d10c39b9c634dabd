//! Every row of SPEC §4 over HTTP against a real backend and bank simulator, asserting status,
//! body, headers, the rows in the tables and the debits in the bank's ledger; each test runs
//! against both stores (`on_postgres::…`, `on_sqlite::…`), and again through the built edge
//! Worker in each of its modes (`through_the_edge_on_…`, `through_the_residency_edge_on_…`), as
//! a phone meets the system: the rows hold whichever part replies.

use std::time::Duration;

use crate::support::{Options, Setup, TestApp, new_key, payment_body};
use bank_simulator::Knobs;
use serde_json::json;

async fn operation_without_key_is_refused_and_nothing_is_saved(setup: Setup) {
    let app = TestApp::spawn_with(setup.options()).await;
    let reply = app.pay(1, None, "elec-1", &payment_body(230_000)).await;
    reply.assert_problem(400, "idempotency-key-missing");
    app.assert_nothing_written("no key").await;
}

async fn new_key_debits_once_saves_and_replies_201(setup: Setup) {
    let app = TestApp::spawn_with(setup.options()).await;
    let key = new_key();
    let reply = app
        .pay(7, Some(&key), "elec-1", &payment_body(230_000))
        .await;

    assert_eq!(reply.status, 201);
    assert!(!reply.is_replay());
    assert_eq!(reply.header("content-type"), Some("application/json"));
    let body = reply.json();
    assert_eq!(body["bill_id"], "elec-1");
    assert_eq!(body["amount_paise"], 230_000);
    assert_eq!(body["status"], "succeeded");
    let payment_id = body["payment_id"].as_str().expect("payment id");
    let reference = format!("pay-{payment_id}");
    assert_eq!(
        body["bank_reference"],
        reference.as_str(),
        "the claim's own"
    );
    assert_eq!(
        reply.header("location"),
        Some(format!("/v1/payments/{payment_id}").as_str())
    );

    assert_eq!(app.key_state(7, &key).await.as_deref(), Some("done"));
    assert_eq!(app.count("payments").await, 1);
    let ledger = app.ledger().await;
    assert_eq!(ledger.debits.len(), 1);
    assert_eq!(ledger.debits[0].reference, reference);
    assert_eq!(ledger.debits[0].amount_paise, 230_000);
    assert_eq!(ledger.debits[0].account, "asha@okbank");
}

async fn retry_with_same_key_replays_the_first_reply_without_a_second_debit(setup: Setup) {
    let app = TestApp::spawn_with(setup.options()).await;
    let key = new_key();
    let first = app
        .pay(7, Some(&key), "elec-1", &payment_body(230_000))
        .await;
    // The same body with other key order and spacing is the same request.
    let reordered = json!({ "payer_vpa": "asha@okbank", "amount_paise": 230_000 });
    let quoted_key = format!("\"{key}\"");
    let second = app.pay(7, Some(&quoted_key), "elec-1", &reordered).await;

    assert_eq!(second.status, 201);
    assert!(second.is_replay());
    assert_eq!(
        second.bytes, first.bytes,
        "the replay is the first body, byte for byte"
    );
    assert_eq!(second.header("location"), first.header("location"));
    assert_eq!(second.header("content-type"), Some("application/json"));
    assert_eq!(app.ledger().await.debits.len(), 1);
    assert_eq!(app.count("payments").await, 1);
    assert_eq!(app.count("idempotency_keys").await, 1);
}

async fn same_key_with_a_different_body_is_422_and_changes_nothing(setup: Setup) {
    let app = TestApp::spawn_with(setup.options()).await;
    let key = new_key();
    let first = app
        .pay(7, Some(&key), "elec-1", &payment_body(230_000))
        .await;
    assert_eq!(first.status, 201);

    let changed_amount = app
        .pay(7, Some(&key), "elec-1", &payment_body(230_001))
        .await;
    changed_amount.assert_problem(422, "idempotency-key-reused");
    let other_bill = app
        .pay(7, Some(&key), "elec-2", &payment_body(230_000))
        .await;
    other_bill.assert_problem(422, "idempotency-key-reused");

    assert_eq!(app.ledger().await.debits.len(), 1);
    assert_eq!(app.count("payments").await, 1);
    let replay = app
        .pay(7, Some(&key), "elec-1", &payment_body(230_000))
        .await;
    assert_eq!(replay.bytes, first.bytes);
}

async fn same_key_while_the_first_attempt_runs_is_409_with_retry_after(setup: Setup) {
    let app = TestApp::spawn_with(Options {
        knobs: Knobs {
            latency_ms: 800,
            ..Knobs::default()
        },
        ..setup.options()
    })
    .await;
    let key = new_key();
    let body = payment_body(5_000);
    let (first, second) = tokio::join!(app.pay(3, Some(&key), "water-9", &body), async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        app.pay(3, Some(&key), "water-9", &body).await
    });
    // The 200 ms head start is not a guarantee on a loaded machine: whichever attempt claimed
    // the key does the work, and the other is refused while it runs.
    let (winner, loser) = if first.status == 201 {
        (first, second)
    } else {
        (second, first)
    };
    assert_eq!(winner.status, 201);
    assert!(!winner.is_replay());
    loser.assert_problem(409, "request-in-progress");
    assert_eq!(loser.header("retry-after"), Some("1"));
    assert_eq!(app.ledger().await.debits.len(), 1);
}

async fn bank_decline_is_saved_and_replayed_as_402(setup: Setup) {
    let app = TestApp::spawn_with(setup.options()).await;
    let key = new_key();
    let body = json!({ "amount_paise": 10_000, "payer_vpa": "declined.asha@okbank" });
    let first = app.pay(4, Some(&key), "gas-1", &body).await;
    let problem = first.assert_problem(402, "payment-declined");
    assert!(
        problem["detail"]
            .as_str()
            .expect("detail")
            .contains("insufficient_funds")
    );
    assert_eq!(app.key_state(4, &key).await.as_deref(), Some("done"));

    let replay = app.pay(4, Some(&key), "gas-1", &body).await;
    assert_eq!(replay.status, 402);
    assert!(replay.is_replay());
    assert_eq!(replay.bytes, first.bytes);
    assert!(
        app.ledger().await.debits.is_empty(),
        "a decline moves no money"
    );
}

async fn bank_timeout_leaves_the_key_unknown_until_reconciliation_saves_the_truth(setup: Setup) {
    // The rail's first status check 2 s after the call (scaled from NPCI's 90 s).
    let mut options = Options::replies_lost_past_the_timeout(setup.store).entering(setup);
    options.policy.status_checks.first_after = Duration::from_secs(2);
    let app = TestApp::spawn_with(options).await;
    let key = new_key();
    let body = payment_body(230_000);
    let first = app.pay(9, Some(&key), "elec-1", &body).await;
    first.assert_problem(503, "outcome-pending");
    assert_eq!(first.header("retry-after"), Some("5"));
    assert_eq!(app.key_state(9, &key).await.as_deref(), Some("unknown"));

    // Before the first check's time, a retry asks nothing and hears "pending".
    let retry = app.pay(9, Some(&key), "elec-1", &body).await;
    retry.assert_problem(503, "outcome-pending");
    assert_eq!(
        app.ledger().await.debits.len(),
        1,
        "the first call did debit"
    );
    assert_eq!(app.bank.simulator.check_stats().status_checks, 0);

    app.reconcile_until((9, &key), "done", Duration::from_secs(15))
        .await;
    assert_eq!(app.bank.simulator.check_stats().status_checks, 1);

    let after = app.pay(9, Some(&key), "elec-1", &body).await;
    assert_eq!(after.status, 201);
    assert!(after.is_replay());
    let ledger = app.ledger().await;
    assert_eq!(ledger.debits.len(), 1, "still one debit");
    assert_eq!(after.json()["bank_reference"], ledger.debits[0].reference);
}

async fn a_client_that_gives_up_does_not_cut_the_work_off_between_debit_and_save(setup: Setup) {
    let app = TestApp::spawn_with(Options {
        knobs: Knobs {
            latency_ms: 700,
            ..Knobs::default()
        },
        ..setup.options()
    })
    .await;
    let key = new_key();
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(150))
        .build()
        .expect("client");
    let gave_up = impatient
        .post(format!("{}/v1/bills/elec-1/pay", app.entry_url))
        .bearer_auth(TestApp::token(3))
        .header("Idempotency-Key", &key)
        .json(&payment_body(2_300))
        .send()
        .await;
    assert!(
        gave_up.is_err(),
        "the phone timed out and closed the connection"
    );

    let mut state = app.key_state(3, &key).await;
    for _ in 0..50 {
        if state.as_deref() == Some("done") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        state = app.key_state(3, &key).await;
    }
    assert_eq!(
        state.as_deref(),
        Some("done"),
        "the server finished the work anyway"
    );
    let retry = app.pay(3, Some(&key), "elec-1", &payment_body(2_300)).await;
    assert_eq!(retry.status, 201);
    assert!(retry.is_replay());
    assert_eq!(app.ledger().await.debits.len(), 1);
}

async fn bank_5xx_before_the_debit_releases_the_claim_at_once_and_the_retry_runs(setup: Setup) {
    let app =
        TestApp::spawn_with(Options::bank_errors_before_debiting(setup.store).entering(setup))
            .await;
    let key = new_key();
    let body = payment_body(100);
    let reply = app.pay(2, Some(&key), "elec-1", &body).await;
    // A 500 is a definite reply: looked up at once, never seen, released on the spot. Never
    // a saved error: the key is released, not done, and its payment kept, pending.
    let problem = reply.assert_problem(503, "service-unavailable");
    assert!(
        problem["detail"]
            .as_str()
            .expect("detail")
            .contains("no money moved"),
        "{problem}"
    );
    assert_eq!(reply.header("retry-after"), Some("1"));
    assert_eq!(app.key_state(2, &key).await.as_deref(), Some("released"));
    assert_eq!(
        app.texts("SELECT CAST(status AS TEXT) FROM payments").await,
        ["pending"]
    );
    let reference = app.texts("SELECT bank_reference FROM payments").await;
    assert!(app.ledger().await.debits.is_empty());

    app.bank.simulator.set_knobs(Knobs::default());
    let retry = app.pay(2, Some(&key), "elec-1", &body).await;
    assert_eq!(
        retry.status, 201,
        "the retry runs at once, not after stuck_after"
    );
    assert!(!retry.is_replay(), "this attempt did the work");
    assert_eq!(
        retry.json()["bank_reference"],
        reference[0].as_str(),
        "under the released claim's own reference"
    );
    assert_eq!(
        app.count("payments").await,
        1,
        "the same payment, claimed again"
    );
    let ledger = app.ledger().await;
    assert_eq!(ledger.debits.len(), 1);
    assert_eq!(ledger.debits[0].reference, reference[0]);
}

async fn key_stuck_in_started_is_resolved_inline_to_the_banks_true_result(setup: Setup) {
    let app = TestApp::spawn_with(setup.options()).await;
    let key = new_key();
    let body = payment_body(230_000);
    // A crash after the debit: the claim and the bank's debit happened, the save did not.
    simulate_crash_after_claim(&app, 5, &key, &body, true).await;
    assert_eq!(app.key_state(5, &key).await.as_deref(), Some("started"));

    let reply = app.pay(5, Some(&key), "elec-1", &body).await;
    assert_eq!(
        reply.status,
        201,
        "{}",
        String::from_utf8_lossy(&reply.bytes)
    );
    assert!(reply.is_replay(), "the first attempt's result, replayed");
    assert_eq!(app.key_state(5, &key).await.as_deref(), Some("done"));
    assert_eq!(app.ledger().await.debits.len(), 1, "no second debit");
}

async fn key_stuck_before_the_bank_call_is_released_and_the_retry_runs(setup: Setup) {
    let app = TestApp::spawn_with(setup.options()).await;
    let key = new_key();
    let body = payment_body(1_000);
    simulate_crash_after_claim(&app, 5, &key, &body, false).await;

    let reply = app.pay(5, Some(&key), "elec-1", &body).await;
    assert_eq!(reply.status, 201);
    assert!(
        !reply.is_replay(),
        "the bank never saw it: this attempt did the work"
    );
    let ledger = app.ledger().await;
    assert_eq!(ledger.debits.len(), 1);
    assert_eq!(
        app.count("payments").await,
        1,
        "the released claim's payment, claimed again, not a second one"
    );
    assert_eq!(reply.json()["bank_reference"], ledger.debits[0].reference);
}

/// The reproduction: user 77 pays `phone-nov` Rs 1 with key K; K ages past its 48
/// hours; user 77 pays `big-bill` Rs 10,00,000 with K. Against a bank that dedupes by
/// reference (the default), the second payment must move its own money under its own
/// reference, never be "found" from the first.
async fn key_past_its_retention_is_a_new_payment_under_a_new_reference(setup: Setup) {
    let app = TestApp::spawn_with(setup.options()).await;
    let key = new_key();
    let first = app
        .pay(77, Some(&key), "phone-nov", &payment_body(100))
        .await;
    assert_eq!(first.status, 201);
    app.age_keys(None, Duration::from_secs(49 * 3600)).await;

    let again = app
        .pay(77, Some(&key), "big-bill", &payment_body(100_000_000))
        .await;
    assert_eq!(again.status, 201);
    assert!(!again.is_replay());
    let (first, again) = (first.json(), again.json());
    assert_ne!(again["payment_id"], first["payment_id"]);
    assert_ne!(again["bank_reference"], first["bank_reference"]);
    assert_eq!(again["amount_paise"], 100_000_000);

    let ledger = app.ledger().await;
    assert_eq!(ledger.debits.len(), 2, "money moved again");
    for payment in [&first, &again] {
        let debit = ledger
            .debits
            .iter()
            .find(|debit| payment["bank_reference"] == debit.reference.as_str())
            .unwrap_or_else(|| panic!("no debit under {}", payment["bank_reference"]));
        assert_eq!(payment["amount_paise"], debit.amount_paise, "{payment}");
    }
    assert_eq!(
        app.count("idempotency_keys").await,
        1,
        "the key row was replaced"
    );
    assert_eq!(
        app.texts("SELECT CAST(status AS TEXT) FROM payments").await,
        ["succeeded", "succeeded"],
        "payments are kept, each matching its own ledger entry"
    );
}

/// The same for a refund key reused after it expired: a second refund under a new reference.
async fn refund_key_past_its_retention_is_a_new_refund_under_a_new_reference(setup: Setup) {
    let app = TestApp::spawn_with(setup.options()).await;
    let paid = app
        .pay(77, Some(&new_key()), "elec-1", &payment_body(10_000))
        .await;
    let payment_id = paid.json()["payment_id"].as_str().expect("id").to_owned();
    let key = new_key();
    let first = app.refund(77, &key, &payment_id, 1_000).await;
    assert_eq!(first.status, 201);
    app.age_keys(Some(&key), Duration::from_secs(49 * 3600))
        .await;

    let again = app.refund(77, &key, &payment_id, 2_500).await;
    assert_eq!(
        again.status,
        201,
        "{}",
        String::from_utf8_lossy(&again.bytes)
    );
    assert!(!again.is_replay());
    let (first, again) = (first.json(), again.json());
    assert_ne!(again["bank_reference"], first["bank_reference"]);
    let ledger = app.ledger().await;
    assert_eq!(ledger.refunds.len(), 2, "money moved back again");
    for refund in [&first, &again] {
        let entry = ledger
            .refunds
            .iter()
            .find(|entry| refund["bank_reference"] == entry.reference.as_str())
            .unwrap_or_else(|| panic!("no refund under {}", refund["bank_reference"]));
        assert_eq!(refund["amount_paise"], entry.amount_paise, "{refund}");
    }
}

async fn refund_runs_once_per_key_and_an_excessive_refund_saves_nothing(setup: Setup) {
    let app = TestApp::spawn_with(setup.options()).await;
    let paid = app
        .pay(6, Some(&new_key()), "elec-1", &payment_body(10_000))
        .await;
    let payment_id = paid.json()["payment_id"].as_str().expect("id").to_owned();

    let key = new_key();
    let too_much = app.refund(6, &key, &payment_id, 10_001).await;
    too_much.assert_problem(422, "refund-exceeds-payment");
    assert_eq!(app.count("refunds").await, 0);
    assert_eq!(
        app.key_state(6, &key).await,
        None,
        "a refused refund saves no key"
    );

    // The key was not saved, so a corrected request with it goes through.
    let refund = app.refund(6, &key, &payment_id, 4_000).await;
    assert_eq!(refund.status, 201);
    let body = refund.json();
    let refund_id = body["refund_id"].as_str().expect("refund id");
    assert_eq!(body["bank_reference"], format!("refund-{refund_id}"));
    assert_eq!(body["amount_paise"], 4_000);
    let replay = app.refund(6, &key, &payment_id, 4_000).await;
    assert!(replay.is_replay());
    assert_eq!(replay.bytes, refund.bytes);

    let second = app.refund(6, &new_key(), &payment_id, 6_001).await;
    second.assert_problem(422, "refund-exceeds-payment");
    let rest = app.refund(6, &new_key(), &payment_id, 6_000).await;
    assert_eq!(rest.status, 201);

    let ledger = app.ledger().await;
    assert_eq!(ledger.refunds.len(), 2);
    assert_eq!(
        ledger.refunds.iter().map(|r| r.amount_paise).sum::<u64>(),
        10_000
    );

    let read = app.read_payment(6, &payment_id).await;
    assert_eq!(read.status, 200);
    assert_eq!(read.json()["refunds"].as_array().expect("refunds").len(), 2);
    app.read_payment(99, &payment_id)
        .await
        .assert_problem(404, "not-found");
    app.refund(99, &new_key(), &payment_id, 1)
        .await
        .assert_problem(404, "not-found");
}

async fn another_users_same_key_gets_its_own_fresh_result(setup: Setup) {
    let app = TestApp::spawn_with(setup.options()).await;
    let key = new_key();
    let body = payment_body(230_000);
    let asha = app.pay(1, Some(&key), "elec-1", &body).await;
    let ravi = app.pay(2, Some(&key), "elec-1", &body).await;

    assert_eq!(ravi.status, 201);
    assert!(!ravi.is_replay(), "never another user's saved reply");
    assert_ne!(ravi.json()["payment_id"], asha.json()["payment_id"]);
    assert_ne!(ravi.json()["bank_reference"], asha.json()["bank_reference"]);
    let ledger = app.ledger().await;
    assert_eq!(ledger.debits.len(), 2);
    assert_eq!(app.count("idempotency_keys").await, 2);
}

async fn published_policy_and_problem_pages_resolve(setup: Setup) {
    let app = TestApp::spawn_with(setup.options()).await;
    let policy: serde_json::Value = app
        .http
        .get(format!("{}/idempotency-policy", app.entry_url))
        .send()
        .await
        .expect("replies")
        .json()
        .await
        .expect("json");
    assert_eq!(policy["header"], "Idempotency-Key");
    assert_eq!(policy["key_format"], "uuid_v4");
    assert_eq!(policy["keep_keys_for_hours"], 48);
    for kind in shared::ProblemKind::ALL {
        let page = app
            .http
            .get(format!("{}{}", app.entry_url, kind.type_uri()))
            .send()
            .await
            .expect("replies");
        assert_eq!(page.status(), 200, "{}", kind.slug());
    }
}

/// Claims `key` as the backend would, optionally has the bank debit it, and leaves the key
/// `started` and older than `stuck_after`: what a crash between the bank call and the save
/// leaves behind.
pub async fn simulate_crash_after_claim(
    app: &TestApp,
    user: u64,
    key: &str,
    body: &serde_json::Value,
    bank_debited: bool,
) {
    let reference = app.claim_without_paying(user, key, body).await;
    if bank_debited {
        let debited = app
            .http
            .post(format!("{}/debits", app.bank.url))
            .json(&json!({ "reference": reference, "amount_paise": body["amount_paise"], "account": body["payer_vpa"] }))
            .send()
            .await
            .expect("bank replies");
        assert_eq!(debited.status(), 201);
    }
    app.age_keys(Some(key), Duration::from_secs(6 * 60)).await;
}

for_each_store_and_entry!(
    operation_without_key_is_refused_and_nothing_is_saved,
    new_key_debits_once_saves_and_replies_201,
    retry_with_same_key_replays_the_first_reply_without_a_second_debit,
    same_key_with_a_different_body_is_422_and_changes_nothing,
    same_key_while_the_first_attempt_runs_is_409_with_retry_after,
    bank_decline_is_saved_and_replayed_as_402,
    bank_timeout_leaves_the_key_unknown_until_reconciliation_saves_the_truth,
    a_client_that_gives_up_does_not_cut_the_work_off_between_debit_and_save,
    bank_5xx_before_the_debit_releases_the_claim_at_once_and_the_retry_runs,
    key_stuck_in_started_is_resolved_inline_to_the_banks_true_result,
    key_stuck_before_the_bank_call_is_released_and_the_retry_runs,
    refund_runs_once_per_key_and_an_excessive_refund_saves_nothing,
    another_users_same_key_gets_its_own_fresh_result,
    published_policy_and_problem_pages_resolve;
    // The edge keeps a key's fingerprint (and, by default, its reply) until the
    // `Idempotency-Expires` the backend stated, which a test cannot age as it ages rows:
    // edge/tests/end_to_end.rs checks that bound.
    only_directly:
    key_past_its_retention_is_a_new_payment_under_a_new_reference,
    refund_key_past_its_retention_is_a_new_refund_under_a_new_reference,
);
