//! The rail's rules on status checks (SPEC §3 `status_checks`, §5; docs/design.md, "Status
//! checks the rail allows"), proven against the bank simulator, which counts every look-up and
//! refuses one the rules forbid (`429 status_check_refused`, `GET /stats`):
//! - no check before `first_after` from the call, none beyond `at_most` per movement, the count
//!   kept on the key row (so a restart or another replica continues it), and a movement still
//!   `pending` after its last check waits for the settlement file: its retries hear
//!   `outcome-awaiting-settlement` and no bank call is made;
//! - kept in real time, the rules make the bank refuse nothing; broken (a policy without the
//!   first-check delay against a bank that enforces one), the refusal is counted and alerted on;
//! - in quiet hours the reconciler sends nothing, while a customer's retry may ask;
//! - two replicas together never ask faster than `per_second`, and the checks one process made
//!   count for the replicas that take a key over.
//!
//! Time is scaled: where a test needs minutes to pass, it moves the key's claim into the past
//! (`TestApp::age_keys`), as the crash tests do.

use std::time::{Duration, Instant};

use backend::reconcile::{Step, try_reconcile_once};
use bank_simulator::Knobs;
use shared::Policy;
use shared::status_checks::{QuietWindow, StatusCheckRules};

use crate::support::{Options, StoreKind, TestApp, TestDb, new_key, payment_body, test_policy};

/// The tests' policy with these status-check rules (no quiet hours unless given).
fn policy_with(
    (first_after_secs, at_most, within_minutes): (u64, u16, u64),
    per_second: u32,
    quiet_hours: Vec<QuietWindow>,
) -> Policy {
    Policy {
        status_checks: StatusCheckRules {
            first_after: Duration::from_secs(first_after_secs),
            at_most,
            within: Duration::from_secs(within_minutes * 60),
            per_second,
            quiet_hours,
            quiet_hours_zone: "Asia/Kolkata".to_owned(),
        },
        ..test_policy()
    }
}

/// Every minute of the day, in two windows.
fn quiet_all_day() -> Vec<QuietWindow> {
    vec![
        QuietWindow {
            starts: 0,
            ends: 720,
        },
        QuietWindow {
            starts: 720,
            ends: 0,
        },
    ]
}

/// A bank that debits but loses the reply past the backend's timeout, and replies `pending`
/// to look-ups for `pending_ms` after the call.
fn lost_replies_then_pending(store: StoreKind, pending_ms: u64, policy: Policy) -> Options {
    let lost = Options::replies_lost_past_the_timeout(store);
    Options {
        knobs: Knobs {
            pending_ms,
            ..lost.knobs.clone()
        },
        policy,
        ..lost
    }
}

async fn status_checks_of(app: &TestApp, user: u64) -> i64 {
    app.scalar(&format!(
        "SELECT CAST(status_checks AS BIGINT) FROM idempotency_keys WHERE user_id = '{user}'"
    ))
    .await
}

async fn no_check_before_first_after_none_beyond_at_most_then_settlement(store: StoreKind) {
    // 90 s, then two more spread to 2 hours: NPCI's rules. The bank holds the debit `pending`
    // for an hour, past every check.
    let policy = policy_with((90, 3, 120), 20, vec![]);
    let app = TestApp::spawn_with(lost_replies_then_pending(store, 3_600_000, policy)).await;
    let key = new_key();
    let body = payment_body(2_500);
    let paid_at = time::OffsetDateTime::now_utc();
    let first = app.pay(81, Some(&key), "elec-1", &body).await;
    first.assert_problem(503, "outcome-pending");
    assert_eq!(app.key_state(81, &key).await.as_deref(), Some("unknown"));
    // The phone learns when the bank is asked first: 90 s after the call reached the bank
    // (within the bank timeout of now, 300 ms here).
    let first_check = next_check_at(&first.json());
    let after_paying = (first_check - paid_at).whole_milliseconds();
    assert!(
        (90_000..=92_000).contains(&after_paying),
        "first check {after_paying} ms after paying"
    );

    // Not due before 90 s: the reconciler has nothing to do, and a retry asks nothing either,
    // and names the same time as the first reply.
    assert_eq!(
        try_reconcile_once(&app.state).await.expect("step"),
        Step::NothingDue
    );
    let retry = app.pay(81, Some(&key), "elec-1", &body).await;
    retry.assert_problem(503, "outcome-pending");
    let named_again = (next_check_at(&retry.json()) - first_check).whole_milliseconds();
    assert!(named_again.abs() <= 1_000, "{named_again} ms apart");
    // Even when its row says due (a clock skew, an operator), the rules hold the check back.
    app.make_lookup_due(&key).await;
    assert_eq!(
        try_reconcile_once(&app.state).await.expect("step"),
        Step::Handled
    );
    assert_eq!(app.bank.simulator.check_stats().status_checks, 0);
    assert_eq!(status_checks_of(&app, 81).await, 0);

    // Each check at its time: 90 s, 805 s, 2 h after the call reached the bank (its claim plus
    // the bank timeout; a second's margin here). Each replies `pending`.
    for (checks, age_to) in [(1, 91), (2, 806), (3, 7_201)] {
        app.age_keys(
            Some(&key),
            Duration::from_secs(age_to - app_age(&app, 81).await),
        )
        .await;
        app.make_lookup_due(&key).await;
        assert_eq!(
            try_reconcile_once(&app.state).await.expect("step"),
            Step::Handled
        );
        assert_eq!(status_checks_of(&app, 81).await, checks);
        assert_eq!(
            app.bank.simulator.check_stats().status_checks,
            checks as u64
        );
        // A retry between checks names the next one: 805 s, then 2 h after the call landed.
        if let Some(next_after) = [805, 7_200].get(checks as usize - 1) {
            let retry = app.pay(81, Some(&key), "elec-1", &body).await;
            retry.assert_problem(503, "outcome-pending");
            let until =
                (next_check_at(&retry.json()) - time::OffsetDateTime::now_utc()).whole_seconds();
            let expected = next_after - age_to as i64;
            assert!(
                (expected - 2..=expected + 2).contains(&until),
                "next check in {until} s, not {expected}"
            );
        }
    }
    // The third was the last: the key waits for the settlement file, and no reconciler takes
    // it again, however due its row looks.
    let waiting = app
        .scalar(
            "SELECT count(*) FROM idempotency_keys \
             WHERE user_id = '81' AND state = 'unknown' AND settlement_due_at IS NOT NULL",
        )
        .await;
    assert_eq!(waiting, 1);
    app.make_lookup_due(&key).await;
    assert_eq!(
        try_reconcile_once(&app.state).await.expect("step"),
        Step::NothingDue
    );

    // A retry hears that settlement is awaited, with when, and sends nothing to the bank.
    let retry = app.pay(81, Some(&key), "elec-1", &body).await;
    retry.assert_problem(503, "outcome-awaiting-settlement");
    assert!(
        retry.json()["settlement_due_at"].as_str().is_some(),
        "{}",
        retry.json()
    );
    assert!(retry.header("retry-after").is_some());
    let stats = app.bank.simulator.check_stats();
    assert_eq!(stats.status_checks, 3, "no fourth check");
    assert_eq!(stats.most_checks_of_one_reference, 3);
    assert_eq!(stats.refused_too_early + stats.refused_over_limit, 0);
    assert_eq!(
        app.ledger().await.debits.len(),
        1,
        "one debit, never a second call"
    );
    assert_eq!(
        app.metric("payments_reconcile_sent_to_settlement_total")
            .await,
        1.0
    );
}

/// The `next_check_at` an `outcome-pending` problem names.
fn next_check_at(problem: &serde_json::Value) -> time::OffsetDateTime {
    let named = problem["next_check_at"].as_str();
    let named = named.unwrap_or_else(|| panic!("no next_check_at in {problem}"));
    time::OffsetDateTime::parse(named, &time::format_description::well_known::Rfc3339)
        .expect("next_check_at is RFC 3339")
}

/// How old the user's claim is, in whole seconds, by the database's clock.
async fn app_age(app: &TestApp, user: u64) -> u64 {
    let sql = match app.db {
        TestDb::Postgres(_) => format!(
            "SELECT CAST(EXTRACT(EPOCH FROM now() - claimed_at) AS BIGINT) \
             FROM idempotency_keys WHERE user_id = '{user}'"
        ),
        TestDb::Sqlite(_) => format!(
            "SELECT (CAST(unixepoch('subsec') * 1000000 AS INTEGER) - claimed_at) / 1000000 \
             FROM idempotency_keys WHERE user_id = '{user}'"
        ),
    };
    u64::try_from(app.scalar(&sql).await).unwrap_or(0)
}

async fn a_pending_reply_is_asked_again_and_its_final_word_saved(store: StoreKind) {
    // The bank holds the debit `pending` for 1.5 s; checks may go at once and then from 1 s.
    let policy = policy_with((0, 5, 1), 1_000, vec![]);
    let app = TestApp::spawn_with(lost_replies_then_pending(store, 1_500, policy)).await;
    let key = new_key();
    let body = payment_body(700);
    app.pay(82, Some(&key), "elec-1", &body)
        .await
        .assert_problem(503, "outcome-pending");
    let patience = Duration::from_secs(20);
    app.reconcile_until((82, &key), "done", patience).await;
    let stats = app.bank.simulator.check_stats();
    assert!(stats.replied_pending >= 1, "{stats:?}");
    assert!(status_checks_of(&app, 82).await >= 2, "pending, then final");
    assert_eq!(app.pay(82, Some(&key), "elec-1", &body).await.status, 201);
    assert_eq!(app.ledger().await.debits.len(), 1);
}

async fn rules_kept_in_real_time_are_never_refused_and_a_broken_rule_is_counted(store: StoreKind) {
    // The bank enforces a 2 s first-check delay and 3 checks per reference.
    let enforcing = |policy: Policy| Options {
        knobs: Knobs {
            status_check_first_after_ms: 2_000,
            status_checks_at_most: 3,
            ..Options::replies_lost_past_the_timeout(store).knobs
        },
        policy,
        ..Options::replies_lost_past_the_timeout(store)
    };
    let kept = TestApp::spawn_with(enforcing(policy_with((2, 3, 1), 20, vec![]))).await;
    let key = new_key();
    kept.pay(83, Some(&key), "elec-1", &payment_body(300))
        .await
        .assert_problem(503, "outcome-pending");
    let patience = Duration::from_secs(20);
    kept.reconcile_until((83, &key), "done", patience).await;
    let stats = kept.bank.simulator.check_stats();
    assert_eq!(
        (stats.status_checks, stats.refused_too_early),
        (1, 0),
        "{stats:?}"
    );
    assert_eq!(
        kept.metric("payments_bank_status_checks_refused_total")
            .await,
        0.0
    );

    // The negative control: a policy that asks at once breaks the bank's rule, which refuses
    // the check; the backend counts the refusal and keeps the key unknown.
    let broken = TestApp::spawn_with(enforcing(policy_with((0, 3, 1), 20, vec![]))).await;
    let key = new_key();
    broken
        .pay(84, Some(&key), "elec-1", &payment_body(300))
        .await
        .assert_problem(503, "outcome-pending");
    try_reconcile_once(&broken.state).await.expect("step");
    let stats = broken.bank.simulator.check_stats();
    assert_eq!(stats.refused_too_early, 1, "{stats:?}");
    assert_eq!(
        broken
            .metric("payments_bank_status_checks_refused_total")
            .await,
        1.0
    );
    assert_eq!(broken.key_state(84, &key).await.as_deref(), Some("unknown"));
}

async fn quiet_hours_hold_the_reconciler_but_a_customer_may_ask(store: StoreKind) {
    let policy = policy_with((0, 5, 1), 1_000, quiet_all_day());
    let app = TestApp::spawn_with(lost_replies_then_pending(store, 0, policy)).await;
    let key = new_key();
    let body = payment_body(450);
    app.pay(85, Some(&key), "elec-1", &body)
        .await
        .assert_problem(503, "outcome-pending");
    // The reconciler takes the due key and puts it off to the window's end: no check.
    assert_eq!(
        try_reconcile_once(&app.state).await.expect("step"),
        Step::Handled
    );
    assert_eq!(app.bank.simulator.check_stats().status_checks, 0);
    assert_eq!(
        try_reconcile_once(&app.state).await.expect("step"),
        Step::NothingDue
    );
    // The customer's retry asks the bank itself, and gets the payment.
    let retry = app.pay(85, Some(&key), "elec-1", &body).await;
    assert_eq!(retry.status, 201, "{}", retry.json());
    assert_eq!(app.bank.simulator.check_stats().status_checks, 1);
    assert_eq!(app.ledger().await.debits.len(), 1);
}

for_each_store!(
    no_check_before_first_after_none_beyond_at_most_then_settlement,
    a_pending_reply_is_asked_again_and_its_final_word_saved,
    rules_kept_in_real_time_are_never_refused_and_a_broken_rule_is_counted,
    quiet_hours_hold_the_reconciler_but_a_customer_may_ask,
);

/// A movement's checks are counted on its key's row: a check made by one process counts for
/// every other, so two replicas that take the key over after a first check give it only the
/// checks left, never `at_most` afresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_checks_one_process_made_count_for_the_replicas_that_take_over() {
    // Two checks: at once, then a minute on; the bank replies `pending` for an hour.
    let policy = policy_with((0, 2, 1), 20, vec![]);
    let options = lost_replies_then_pending(StoreKind::Postgres, 3_600_000, policy);
    let app = TestApp::spawn_with(options.clone()).await;
    let key = new_key();
    app.pay(85, Some(&key), "elec-1", &payment_body(800))
        .await
        .assert_problem(503, "outcome-pending");
    app.make_lookup_due(&key).await;
    assert_eq!(
        try_reconcile_once(&app.state).await.expect("step"),
        Step::Handled
    );
    assert_eq!(status_checks_of(&app, 85).await, 1);

    // This process stops; its second check is due; two replicas take over.
    app.age_keys(Some(&key), Duration::from_secs(61)).await;
    app.make_lookup_due(&key).await;
    let replica = Options {
        run_workers: true,
        ..options
    };
    let _first = app.spawn_replica(&replica).await;
    let _second = app.spawn_replica(&replica).await;
    let awaiting = "SELECT count(*) FROM idempotency_keys \
                    WHERE user_id = '85' AND settlement_due_at IS NOT NULL";
    let deadline = Instant::now() + Duration::from_secs(30);
    while app.scalar(awaiting).await == 0 {
        assert!(
            Instant::now() < deadline,
            "the key never came to await settlement"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let stats = app.bank.simulator.check_stats();
    assert_eq!(
        (stats.status_checks, stats.most_checks_of_one_reference),
        (2, 2),
        "at_most across the processes, not per process: {stats:?}"
    );
    assert_eq!(status_checks_of(&app, 85).await, 2);
    assert_eq!(app.ledger().await.debits.len(), 1);
}

/// Two replicas, each with its own reconciler, and twelve keys due at once: together they ask
/// no faster than `per_second` (the pace is one row in the database), and each movement is
/// checked once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_together_keep_the_deployments_pace() {
    let per_second = 4;
    let policy = policy_with((0, 3, 1), per_second, vec![]);
    let options = lost_replies_then_pending(StoreKind::Postgres, 0, policy);
    let app = TestApp::spawn_with(options.clone()).await;
    let payments = 12_u64;
    for user in 0..payments {
        app.pay(90 + user, Some(&new_key()), "elec-1", &payment_body(100))
            .await
            .assert_problem(503, "outcome-pending");
    }
    let replica = Options {
        run_workers: true,
        ..options
    };
    let _first = app.spawn_replica(&replica).await;
    let _second = app.spawn_replica(&replica).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while app
        .scalar("SELECT count(*) FROM idempotency_keys WHERE state = 'done'")
        .await
        < i64::try_from(payments).expect("small")
    {
        assert!(
            Instant::now() < deadline,
            "the replicas never settled every key"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let stats = app.bank.simulator.check_stats();
    assert_eq!(stats.status_checks, payments, "one check each: {stats:?}");
    // Slots are 1/per_second apart; one more may fall in a second's window at its edge.
    assert!(
        stats.busiest_second <= per_second + 1,
        "{} checks within one second, pace {per_second}/s",
        stats.busiest_second
    );
    assert_eq!(app.ledger().await.debits.len(), 12);
}
