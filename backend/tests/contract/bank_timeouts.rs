//! A misbehaving bank under load (SPEC §4, §5 invariants 1, 4 and 5, §7): a few hundred
//! payments by clients that retry with the same key and body until they get a final reply,
//! with the reconciler running beside them, against a bank that loses replies (it debits, then
//! replies after the backend gave up), is too slow for the backend's timeout, replies to look-ups
//! `200` or `201`, or fails with a 503 before debiting. Afterwards the bank's ledger and the
//! tables agree exactly: no reference debited twice, no key left `started`, `unknown` or
//! `released`, and every debit has exactly one finished key and one succeeded payment row with
//! its amount, and the reverse. Each test runs on both stores.

use std::time::{Duration, Instant};

use crate::support::load::{
    BackgroundReconciler, ClientRun, Reconciled, assert_ledger_matches_tables, pay_until_final,
};
use crate::support::{Options, StoreKind, TestApp, new_key};
use backend::config::BankConfig;
use backend::metrics::OutcomeLabels;
use bank_simulator::{Knobs, LookupStatus};
use futures_util::{StreamExt, stream};
use shared::Policy;

const CONCURRENCY: usize = 16;

/// `payments` payments, `CONCURRENCY` at a time, each retried until final, with the reconciler
/// running; then the ledger cross-check.
async fn run_load(app: &TestApp, payments: u64) -> (Vec<ClientRun>, Reconciled, Duration) {
    let reconciler = BackgroundReconciler::start(app);
    let started = Instant::now();
    let runs: Vec<ClientRun> = stream::iter(0..payments)
        .map(|i| pay_until_final(app, i % 20 + 1, new_key()))
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let elapsed = started.elapsed();
    reconciler.stop().await;
    let reconciled = assert_ledger_matches_tables(app, &runs).await;
    (runs, reconciled, elapsed)
}

fn resolved(app: &TestApp, outcome: &'static str) -> u64 {
    app.state
        .metrics
        .keys_resolved
        .get_or_create(&OutcomeLabels {
            operation: "pay_bill",
            outcome,
        })
        .get()
}

fn total(runs: &[ClientRun], replies: impl Fn(&ClientRun) -> u32) -> u32 {
    runs.iter().map(replies).sum()
}

async fn lost_and_late_bank_replies_under_load_end_in_one_debit_per_succeeded_payment(
    store: StoreKind,
) {
    // `stuck_after` decides when a "never seen" reply may release a claim (the first call
    // may still be on its way to the bank until then); a second keeps the run short.
    let policy = Policy {
        stuck_after: Duration::from_secs(1),
        ..crate::support::test_policy()
    };
    let app = TestApp::spawn_with(Options {
        store,
        knobs: Knobs {
            // 20 to 270 ms: about a fifth of the calls outlast the backend's 200 ms.
            latency_ms: 20,
            jitter_ms: 250,
            decline_rate: 0.05,
            lost_reply_rate: 0.3,
            lost_reply_delay_ms: 400,
            seed: 4,
            // A deduplicating bank would hide a second debit under the same reference; with
            // dedupe off the ledger shows every call that moved money, so "one debit per
            // reference" is the backend's doing alone.
            dedupe: false,
            ..Knobs::default()
        },
        policy,
        bank_timeout: Duration::from_millis(200),
        // Half the calls get no final reply here, which opens the breaker: this test is about
        // resolving lost replies, so every payment goes to the bank (the breaker's own test is
        // `partner_bank`).
        bank: BankConfig {
            breaker: None,
            ..BankConfig::default()
        },
        ..Options::default()
    })
    .await;
    let (runs, reconciled, elapsed) = run_load(&app, 300).await;

    let metrics = &app.state.metrics;
    let outcome_pending = total(&runs, |run| run.outcome_pending);
    println!(
        "bank timeouts under load ({store:?}): 300 payments ({CONCURRENCY} at a time) in \
         {elapsed:?}; {} debits, {} declines; clients saw {outcome_pending} outcome-pending and \
         {} in-progress replies; the reconciler took up {} keys: {} succeeded, {} declined, {} \
         released (the rest postponed); {} look-up failures",
        reconciled.debits,
        reconciled.declined,
        total(&runs, |run| run.in_progress),
        metrics.stuck_keys_found.get(),
        resolved(&app, "succeeded"),
        resolved(&app, "declined"),
        resolved(&app, "released"),
        metrics.lookup_failures.get(),
    );
    assert_eq!(
        total(&runs, |run| run.service_unavailable),
        0,
        "the database never went away and the bank never replied 5xx"
    );
    assert!(outcome_pending > 0, "some replies were lost or late");
    assert!(
        resolved(&app, "succeeded") > 0,
        "lost replies were resolved from the bank's records"
    );
    assert!(
        resolved(&app, "released") > 0,
        "calls the bank dropped were released for the clients' retries"
    );
}

/// Lost replies at 30% against a deduplicating bank whose look-ups reply `lookup_status`:
/// every key ends resolved, whichever success status the bank's look-ups use.
async fn lost_replies_resolve_with_look_ups_replying(store: StoreKind, lookup: LookupStatus) {
    // On a loaded machine a call can outlast the 150 ms timeout before the bank has executed
    // it; the backend's dropped connection then cancels it, and the bank never sees it. Such a
    // key is released only once its claim is `stuck_after` old (SPEC §4): at the shipped 5
    // minutes, longer than the clients' deadline (a CI run's key waited 240 s and failed).
    let policy = Policy {
        stuck_after: Duration::from_secs(1),
        ..crate::support::test_policy()
    };
    let app = TestApp::spawn_with(Options {
        store,
        policy,
        knobs: Knobs {
            latency_ms: 5,
            jitter_ms: 20,
            decline_rate: 0.05,
            lost_reply_rate: 0.3,
            lost_reply_delay_ms: 400,
            seed: 11,
            lookup_status: lookup,
            ..Knobs::default()
        },
        bank_timeout: Duration::from_millis(150),
        ..Options::default()
    })
    .await;
    let (runs, reconciled, elapsed) = run_load(&app, 200).await;
    let metrics = &app.state.metrics;
    println!(
        "lost replies, look-ups replying {lookup:?} ({store:?}): 200 payments in {elapsed:?}; \
         {} debits, {} declines; {} keys resolved from the bank's records; {} look-up failures",
        reconciled.debits,
        reconciled.declined,
        resolved(&app, "succeeded") + resolved(&app, "declined"),
        metrics.lookup_failures.get(),
    );
    assert!(
        total(&runs, |run| run.outcome_pending) > 0,
        "some replies were lost"
    );
    assert!(
        resolved(&app, "succeeded") > 0,
        "lost replies were resolved from the bank's look-ups"
    );
    assert_eq!(
        metrics.lookup_failures.get(),
        0,
        "every look-up reply was understood"
    );
}

async fn lost_replies_resolve_when_look_ups_reply_200(store: StoreKind) {
    lost_replies_resolve_with_look_ups_replying(store, LookupStatus::Ok).await;
}

async fn lost_replies_resolve_when_look_ups_reply_with_the_original_201(store: StoreKind) {
    lost_replies_resolve_with_look_ups_replying(store, LookupStatus::Original).await;
}

/// A bank that sends its own 503 before debiting on 5% of calls: each such claim is looked up at
/// once and released on the spot, so the client's next retry runs. With `stuck_after` at the
/// shipped 5 minutes and the clients' deadline at 2 minutes, a key that waited for `stuck_after`
/// would fail its client; the slowest time to a final reply is printed.
async fn bank_5xx_before_debiting_leaves_no_key_waiting_for_stuck_after(store: StoreKind) {
    let app = TestApp::spawn_with(Options {
        store,
        knobs: Knobs {
            latency_ms: 5,
            jitter_ms: 20,
            error_rate: 0.05,
            seed: 5,
            ..Knobs::default()
        },
        bank_timeout: Duration::from_secs(2),
        ..Options::default()
    })
    .await;
    assert_eq!(app.state.policy.stuck_after, Duration::from_secs(300));
    let (runs, reconciled, elapsed) = run_load(&app, 200).await;
    let slowest = runs.iter().map(|run| run.took).max().expect("some runs");
    let errors_seen = total(&runs, |run| run.service_unavailable);
    println!(
        "bank 5xx at 5% ({store:?}): 200 payments in {elapsed:?}; {} debits; clients saw \
         {errors_seen} service-unavailable replies, {} claims released after the attempt's own look-up; \
         slowest time to a final reply {slowest:?}",
        reconciled.debits,
        resolved(&app, "released"),
    );
    assert!(errors_seen > 0, "some calls failed with the bank's own 503");
    assert_eq!(
        total(&runs, |run| run.outcome_pending),
        0,
        "the bank's own 503 is \"not executed\": no claim was left waiting for the reconciler"
    );
}

for_each_store!(
    lost_and_late_bank_replies_under_load_end_in_one_debit_per_succeeded_payment,
    lost_replies_resolve_when_look_ups_reply_200,
    lost_replies_resolve_when_look_ups_reply_with_the_original_201,
    bank_5xx_before_debiting_leaves_no_key_waiting_for_stuck_after,
);
