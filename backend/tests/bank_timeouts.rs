//! Bank timeouts under load (SPEC §5, invariants 1, 4 and 5): a few hundred payments against a
//! bank that loses 30% of its replies (it debits, then answers after the backend gave up) and
//! is too slow for the backend's timeout on a share of the rest (the backend gives up, and the
//! bank drops the request with the connection), with clients that retry with the same key and
//! body until they get a final answer, and the reconciler running beside them. Afterwards the
//! bank's ledger and the tables agree exactly: no reference debited twice (with the bank's own
//! dedupe off, so that is the backend's doing alone), no key left `started` or `unknown`, and
//! every debit has exactly one finished key and one succeeded payment row, and the reverse.

mod support;

use std::time::{Duration, Instant};

use backend::bank_simulator::Knobs;
use backend::metrics::OutcomeLabels;
use futures_util::{StreamExt, stream};
use shared::Policy;
use support::load::{
    BackgroundReconciler, ClientRun, assert_ledger_matches_tables, pay_until_final,
};
use support::{Options, TestApp, new_key};

const PAYMENTS: u64 = 300;
const CONCURRENCY: usize = 16;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_and_late_bank_replies_under_load_end_in_one_debit_per_succeeded_payment() {
    // `stuck_after` decides when a "never seen" answer may release a claim (the first call
    // may still be on its way to the bank until then); a second keeps the run short.
    let policy = Policy {
        stuck_after: Duration::from_secs(1),
        ..Policy::default_policy()
    };
    let app = TestApp::spawn_with(Options {
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
        ..Options::default()
    })
    .await;
    let reconciler = BackgroundReconciler::start(&app);

    let started = Instant::now();
    let runs: Vec<ClientRun> = stream::iter(0..PAYMENTS)
        .map(|i| pay_until_final(&app, i % 20 + 1, new_key()))
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let elapsed = started.elapsed();
    reconciler.stop().await;

    let reconciled = assert_ledger_matches_tables(&app, &runs).await;

    let metrics = &app.state.metrics;
    let resolved = |outcome| {
        metrics
            .keys_resolved
            .get_or_create(&OutcomeLabels {
                operation: "pay_bill",
                outcome,
            })
            .get()
    };
    let outcome_pending: u32 = runs.iter().map(|run| run.outcome_pending).sum();
    let in_progress: u32 = runs.iter().map(|run| run.in_progress).sum();
    let unavailable: u32 = runs.iter().map(|run| run.service_unavailable).sum();
    println!(
        "bank timeouts under load: {PAYMENTS} payments ({CONCURRENCY} at a time) in {elapsed:?}; \
         {} debits, {} declines; clients saw {outcome_pending} outcome-pending and \
         {in_progress} in-progress answers; the reconciler took up {} keys: {} succeeded, {} \
         declined, {} released (the rest postponed); {} look-up failures",
        reconciled.debits,
        reconciled.declined,
        metrics.stuck_keys_found.get(),
        resolved("succeeded"),
        resolved("declined"),
        resolved("released"),
        metrics.lookup_failures.get(),
    );
    assert_eq!(unavailable, 0, "the database never went away");
    assert!(outcome_pending > 0, "some replies were lost or late");
    assert!(
        resolved("succeeded") > 0,
        "lost replies were resolved from the bank's records"
    );
    assert!(
        resolved("released") > 0,
        "calls the bank dropped were released for the clients' retries"
    );
}
