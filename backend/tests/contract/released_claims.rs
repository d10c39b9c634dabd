//! A claim's life after the bank said it never saw it (SPEC §4, §7; docs/design.md, "Release",
//! "Late-debit checks"): the released claim is kept with its payment or refund and its own bank
//! reference; a first call that reaches the bank after the release is found by the later check
//! and recorded; a retry in between claims it again under the same reference, so a deduplicating
//! bank moves the money once; the last check, when the key expires, voids a claim the bank never
//! saw, which then stops counting against a payment's refundable rest; and only a look-up reply
//! that says "never seen" releases anything: a misrouted bank URL releases nothing. The bank
//! dedupes by reference (its default) unless a test says otherwise. Each test runs on both
//! stores.

use std::time::{Duration, Instant};

use crate::support::{Options, StoreKind, TestApp, new_key, payment_body, wait_for};
use backend::metrics::OperationLabels;
use backend::reconcile::{Step, try_reconcile_once};
use bank_simulator::{BankSimulator, Knobs};

/// The first call's latency in the late-arrival tests: long past the backend's 200 ms bank
/// timeout, and long enough that the test releases the claim before the bank executes it.
const LATE_CALL: Duration = Duration::from_secs(3);

/// A backend whose bank executes the next call `LATE_CALL` after it arrives, while the backend
/// gives up after 200 ms; later calls are instant.
async fn app_with_one_late_call(store: StoreKind) -> TestApp {
    TestApp::spawn_with(Options {
        store,
        knobs: Knobs {
            latency_ms: u64::try_from(LATE_CALL.as_millis()).expect("small"),
            executes_abandoned_calls: true,
            ..Knobs::default()
        },
        bank_timeout: Duration::from_millis(200),
        ..Options::default()
    })
    .await
}

/// Pays with `key`, lets the backend give up on the slow bank, and has the reconciler release
/// the claim once it is older than `stuck_after`, before the bank has executed the call.
/// Returns when the first call was sent.
async fn pay_and_release_before_the_bank_executes(app: &TestApp, key: &str) -> Instant {
    let sent = Instant::now();
    app.pay(61, Some(key), "elec-1", &payment_body(4_200))
        .await
        .assert_problem(503, "outcome-pending");
    // Calls from now on are instant; the first keeps the latency it drew on arrival, and is
    // executed when it ends although the backend hung up long before.
    app.bank.simulator.set_knobs(Knobs::default());
    app.age_keys(Some(key), Duration::from_secs(6 * 60)).await;
    assert_eq!(
        try_reconcile_once(&app.state).await.expect("a step"),
        Step::Handled
    );
    assert_eq!(
        app.key_state(61, key).await.as_deref(),
        Some("released"),
        "the bank had not seen the call when it was looked up"
    );
    assert!(app.ledger().await.debits.is_empty());
    assert_eq!(
        app.texts("SELECT CAST(status AS TEXT) FROM payments").await,
        ["pending"],
        "the released claim's payment is kept"
    );
    sent
}

fn late_movements(app: &TestApp, operation: &'static str) -> u64 {
    app.state
        .metrics
        .late_movements_found
        .get_or_create(&OperationLabels { operation })
        .get()
}

async fn a_first_call_that_reaches_the_bank_after_the_release_is_found_by_the_later_check(
    store: StoreKind,
) {
    let app = app_with_one_late_call(store).await;
    let key = new_key();
    pay_and_release_before_the_bank_executes(&app, &key).await;

    wait_for(
        "the bank to execute the late first call",
        LATE_CALL * 3,
        async || app.ledger().await.debits.len() == 1,
    )
    .await;
    // The released key's next check (due `stuck_after` after the release) finds the debit.
    app.make_lookup_due(&key).await;
    assert_eq!(
        try_reconcile_once(&app.state).await.expect("a step"),
        Step::Handled
    );
    assert_eq!(app.key_state(61, &key).await.as_deref(), Some("done"));
    assert_eq!(
        app.texts("SELECT CAST(status AS TEXT) FROM payments").await,
        ["succeeded"]
    );
    assert_eq!(
        late_movements(&app, "pay_bill"),
        1,
        "counted as a late debit"
    );
    // Operators see it: in the key's trail, and on the console's queue with its money.
    assert!(
        app.trail(61)
            .await
            .ends_with(&["released".to_owned(), "late_debit_found".to_owned()])
    );
    let queue: serde_json::Value = app
        .http
        .get(format!("{}/admin/api/queue", app.admin_url))
        .bearer_auth(TestApp::operator_token("asha"))
        .send()
        .await
        .expect("replies")
        .json()
        .await
        .expect("JSON");
    let late = &queue["late_debits"];
    assert_eq!(late.as_array().map(Vec::len), Some(1), "{queue}");
    assert_eq!(late[0]["user_id"], "61");
    assert_eq!(late[0]["amount_paise"], 4_200);
    assert_eq!(late[0]["found"]["event"], "late_debit_found");
    assert_eq!(
        late[0]["bank_reference"],
        app.texts("SELECT bank_reference FROM payments").await[0].as_str()
    );

    let retry = app
        .pay(61, Some(&key), "elec-1", &payment_body(4_200))
        .await;
    assert_eq!(retry.status, 201, "the customer sees the money that moved");
    assert!(retry.is_replay());
    let ledger = app.ledger().await;
    assert_eq!(ledger.debits.len(), 1, "exactly one debit");
    assert_eq!(retry.json()["bank_reference"], ledger.debits[0].reference);
}

async fn a_retry_after_the_release_claims_again_and_the_late_first_call_moves_no_more_money(
    store: StoreKind,
) {
    let app = app_with_one_late_call(store).await;
    let key = new_key();
    let first_sent = pay_and_release_before_the_bank_executes(&app, &key).await;

    let retry = app
        .pay(61, Some(&key), "elec-1", &payment_body(4_200))
        .await;
    assert_eq!(retry.status, 201);
    assert!(!retry.is_replay(), "the retry did the work");
    let reference = app.texts("SELECT bank_reference FROM payments").await;
    assert_eq!(
        retry.json()["bank_reference"],
        reference[0].as_str(),
        "under the released claim's own reference"
    );

    // Nothing tells from outside when the bank has executed the late call: wait until it must
    // have (its latency was drawn on arrival), with a margin.
    let executed = first_sent + LATE_CALL + Duration::from_millis(500);
    tokio::time::sleep(executed.saturating_duration_since(Instant::now())).await;
    let ledger = app.ledger().await;
    assert_eq!(
        ledger.debits.len(),
        1,
        "the late first call was deduplicated by its reference"
    );
    assert_eq!(ledger.debits[0].reference, reference[0]);
    assert_eq!(app.key_state(61, &key).await.as_deref(), Some("done"));
    assert_eq!(app.count("payments").await, 1);
    assert_eq!(
        try_reconcile_once(&app.state).await.expect("a step"),
        Step::NothingDue
    );
}

/// A backend whose bank replies to every call with its own 503 (naming the reference) before doing anything, until told
/// otherwise: claims are released at once.
async fn app_with_a_failing_bank(store: StoreKind) -> TestApp {
    TestApp::spawn_with(Options {
        store,
        knobs: Knobs {
            error_rate: 1.0,
            ..Knobs::default()
        },
        ..Options::default()
    })
    .await
}

async fn a_released_claim_its_last_check_never_finds_is_void_and_its_key_expires(store: StoreKind) {
    let app = app_with_a_failing_bank(store).await;
    let key = new_key();
    app.pay(62, Some(&key), "elec-1", &payment_body(900))
        .await
        .assert_problem(503, "service-unavailable");
    assert_eq!(app.key_state(62, &key).await.as_deref(), Some("released"));

    // The janitor leaves a released key alone until its last check is done.
    app.age_keys(Some(&key), Duration::from_secs(49 * 3600))
        .await;
    backend::janitor::expire_all(&app.state, 100)
        .await
        .expect("expiry");
    assert_eq!(app.key_state(62, &key).await.as_deref(), Some("released"));

    // The last check, at expiry: still never seen.
    app.make_lookup_due(&key).await;
    assert_eq!(
        try_reconcile_once(&app.state).await.expect("a step"),
        Step::Handled
    );
    assert_eq!(
        app.texts("SELECT CAST(status AS TEXT) FROM payments").await,
        ["void"]
    );
    assert_eq!(
        try_reconcile_once(&app.state).await.expect("a step"),
        Step::NothingDue,
        "no further checks"
    );
    let expired = backend::janitor::expire_all(&app.state, 100)
        .await
        .expect("expiry");
    assert_eq!(expired, 1, "now the key expires");
    assert_eq!(app.key_state(62, &key).await, None);
    assert_eq!(
        app.trail(62).await,
        ["claimed", "released", "voided", "expired"],
        "the audit trail tells it"
    );
    assert_eq!(
        app.count("payments").await,
        1,
        "money rows are never deleted"
    );
    assert!(app.ledger().await.debits.is_empty());
}

async fn reusing_an_expired_released_key_settles_the_old_claim_before_the_new_one(
    store: StoreKind,
) {
    let app = app_with_a_failing_bank(store).await;
    let key = new_key();
    app.pay(63, Some(&key), "phone-nov", &payment_body(100))
        .await
        .assert_problem(503, "service-unavailable");
    let old_reference = app.texts("SELECT bank_reference FROM payments").await;
    app.bank.simulator.set_knobs(Knobs::default());
    app.age_keys(Some(&key), Duration::from_secs(49 * 3600))
        .await;

    let again = app
        .pay(63, Some(&key), "big-bill", &payment_body(700_000))
        .await;
    assert_eq!(
        again.status,
        201,
        "{}",
        String::from_utf8_lossy(&again.bytes)
    );
    assert!(!again.is_replay());
    assert_ne!(again.json()["bank_reference"], old_reference[0].as_str());
    let statuses = app
        .texts("SELECT CAST(status AS TEXT) FROM payments ORDER BY amount_paise")
        .await;
    assert_eq!(
        statuses,
        ["void", "succeeded"],
        "the old claim was settled as void by its last check first"
    );
    let ledger = app.ledger().await;
    assert_eq!(ledger.debits.len(), 1);
    assert_eq!(ledger.debits[0].amount_paise, 700_000);
    assert_eq!(ledger.debits[0].reference, again.json()["bank_reference"]);
}

async fn a_released_refund_still_counts_against_the_rest_and_a_void_one_does_not(store: StoreKind) {
    let app = TestApp::spawn_on(store).await;
    let paid = app
        .pay(64, Some(&new_key()), "elec-1", &payment_body(10_000))
        .await;
    let payment_id = paid.json()["payment_id"].as_str().expect("id").to_owned();

    app.bank.simulator.set_knobs(Knobs {
        error_rate: 1.0,
        ..Knobs::default()
    });
    let released = new_key();
    app.refund(64, &released, &payment_id, 4_000)
        .await
        .assert_problem(503, "service-unavailable");
    assert_eq!(
        app.key_state(64, &released).await.as_deref(),
        Some("released")
    );
    app.bank.simulator.set_knobs(Knobs::default());

    // The released refund may still happen (its first call late, or its retry): it counts.
    app.refund(64, &new_key(), &payment_id, 6_001)
        .await
        .assert_problem(422, "refund-exceeds-payment");

    // Its last check at expiry finds nothing: void, and it stops counting.
    app.age_keys(Some(&released), Duration::from_secs(49 * 3600))
        .await;
    app.make_lookup_due(&released).await;
    try_reconcile_once(&app.state).await.expect("a step");
    assert_eq!(
        app.texts("SELECT CAST(status AS TEXT) FROM refunds").await,
        ["void"],
        "the last check voided it"
    );
    let whole = app.refund(64, &new_key(), &payment_id, 10_000).await;
    assert_eq!(
        whole.status,
        201,
        "{}",
        String::from_utf8_lossy(&whole.bytes)
    );
    let ledger = app.ledger().await;
    assert_eq!(ledger.refunds.len(), 1);
    assert_eq!(ledger.refunds[0].amount_paise, 10_000);
}

async fn a_misrouted_bank_url_releases_nothing_and_counts_failed_look_ups(store: StoreKind) {
    // Every call and look-up hits the simulator's unknown-route 404, not "never seen".
    let app = TestApp::spawn_with(Options {
        store,
        bank_path: "/wrong",
        ..Options::default()
    })
    .await;
    let key = new_key();
    app.pay(65, Some(&key), "elec-1", &payment_body(1_000))
        .await
        .assert_problem(503, "outcome-pending");
    assert_eq!(app.key_state(65, &key).await.as_deref(), Some("unknown"));

    app.age_keys(Some(&key), Duration::from_secs(6 * 60)).await;
    for _ in 0..3 {
        app.make_lookup_due(&key).await;
        try_reconcile_once(&app.state).await.expect("a step");
    }
    assert_eq!(
        app.key_state(65, &key).await.as_deref(),
        Some("unknown"),
        "a 404 that does not say \"unknown\" never releases"
    );
    assert_eq!(
        app.texts("SELECT CAST(status AS TEXT) FROM payments").await,
        ["pending"]
    );
    assert_eq!(
        app.metric("payments_reconcile_lookup_failures_total").await,
        3.0,
        "three reconciler steps, all failed (a 404 to the call is not the bank's \"not \
         executed\": no look-up at once)"
    );
    let failed_look_ups = app
        .texts("SELECT detail FROM key_events WHERE user_id = '65' AND event = 'looked_up'")
        .await;
    assert_eq!(
        failed_look_ups.len(),
        3,
        "each failed look-up is in the trail"
    );
    assert!(
        failed_look_ups
            .iter()
            .all(|detail| detail.starts_with("the bank could not be asked")),
        "{failed_look_ups:?}"
    );
    assert_eq!(
        app.metric(r#"payments_bank_calls_total{call="look_up",outcome="failed"}"#)
            .await,
        3.0
    );
}

/// A port on 127.0.0.1 held by a socket that does not listen yet: connections to it are
/// refused until [`tokio::net::TcpSocket::listen`] is called, and no other test can take it.
fn a_port_that_refuses() -> (tokio::net::TcpSocket, std::net::SocketAddr) {
    let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
    socket
        .bind("127.0.0.1:0".parse().expect("an address"))
        .expect("a free port");
    let addr = socket.local_addr().expect("bound");
    (socket, addr)
}

async fn a_call_that_could_not_connect_to_the_bank_ended_and_its_claim_is_released_at_once(
    store: StoreKind,
) {
    // The backend calls a port where nothing listens; the test's simulator serves there later.
    let (socket, unreachable) = a_port_that_refuses();
    let app = TestApp::spawn_with(Options {
        store,
        bank_url: Some(format!("http://{unreachable}")),
        ..Options::default()
    })
    .await;
    let key = new_key();
    // A refused connection sent nothing: released on the spot, with no status check (the rail
    // allows none that soon, and none is needed), and the phone told nothing was charged.
    app.pay(66, Some(&key), "elec-1", &payment_body(1_000))
        .await
        .assert_problem(503, "service-unavailable");
    assert_eq!(app.key_state(66, &key).await.as_deref(), Some("released"));

    // The bank comes back on that port; the retry claims the key again and pays once.
    let listener = socket.listen(64).expect("the port listens now");
    let simulator = app.bank.simulator.clone();
    tokio::spawn(bank_simulator::serve(
        listener,
        simulator,
        std::future::pending(),
    ));
    let retry = app
        .pay(66, Some(&key), "elec-1", &payment_body(1_000))
        .await;
    assert_eq!(retry.status, 201);
    assert_eq!(app.ledger().await.debits.len(), 1, "one debit");
    let stats = app.bank.simulator.check_stats();
    assert_eq!(stats.status_checks, 0, "no status check was needed");
}

async fn a_failed_tls_handshake_with_the_bank_ended_the_call_too(store: StoreKind) {
    // https to a bank that speaks plain HTTP: the handshake fails before anything is sent.
    let plain = BankSimulator::spawn(Knobs::default()).await.expect("bank");
    let app = TestApp::spawn_with(Options {
        store,
        bank_url: Some(plain.url.replace("http://", "https://")),
        ..Options::default()
    })
    .await;
    let key = new_key();
    app.pay(67, Some(&key), "elec-1", &payment_body(1_000))
        .await
        .assert_problem(503, "service-unavailable");
    assert_eq!(app.key_state(67, &key).await.as_deref(), Some("released"));
    assert!(plain.simulator.ledger().debits.is_empty());
    assert_eq!(plain.simulator.check_stats().status_checks, 0);
}

for_each_store!(
    a_first_call_that_reaches_the_bank_after_the_release_is_found_by_the_later_check,
    a_retry_after_the_release_claims_again_and_the_late_first_call_moves_no_more_money,
    a_released_claim_its_last_check_never_finds_is_void_and_its_key_expires,
    reusing_an_expired_released_key_settles_the_old_claim_before_the_new_one,
    a_released_refund_still_counts_against_the_rest_and_a_void_one_does_not,
    a_misrouted_bank_url_releases_nothing_and_counts_failed_look_ups,
    a_call_that_could_not_connect_to_the_bank_ended_and_its_claim_is_released_at_once,
    a_failed_tls_handshake_with_the_bank_ended_the_call_too,
);
