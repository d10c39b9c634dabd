//! Load runs with retrying clients, and the cross-check every load test ends with: the bank's
//! ledger and the tables agree exactly (SPEC §5, invariants 1, 4 and 5).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use backend::reconcile;
use shared::retry::{NextStep, RetrySchedule, random_unit};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::{Received, TestApp, payment_body};

/// The client's schedule, compressed to the tests' clock: the server's `Retry-After` (5 s for
/// "outcome pending") is not waited out here, but the deadline still bounds every payment
/// (generously: a payment may wait out a whole PostgreSQL restart, and the status checks of the
/// tests' policy, due 0, 2, 4, 6, 11, 19, 33, 59, 105 and 188 s after the call: a payment whose
/// first eight checks found it still pending, as happened under a loaded machine's full contract
/// run, is decided by the ninth).
pub const CLIENT_RETRIES: RetrySchedule = RetrySchedule {
    base: Duration::from_millis(50),
    cap: Duration::from_millis(400),
    deadline: Duration::from_secs(240),
};

/// One payment as its client saw it.
#[derive(Debug)]
pub struct ClientRun {
    /// The payer.
    pub user: u64,
    /// The key sent on every attempt.
    pub key: String,
    /// The final reply: 201 or 402.
    pub reply: Received,
    /// 503 "outcome pending" replies before it.
    pub outcome_pending: u32,
    /// 503 "service unavailable" replies (database away) before it.
    pub service_unavailable: u32,
    /// 503 "bank unavailable" replies (the bank breaker open; nothing claimed) before it.
    pub bank_unavailable: u32,
    /// 409 "request in progress" replies before it.
    pub in_progress: u32,
    /// From the first attempt to the final reply.
    pub took: Duration,
}

/// Sends `user`'s payment with `key` (and the same body every time) until the reply is final
/// (201 or 402), retrying the replies a client must retry: 409 in progress, 503 outcome
/// pending, 503 service unavailable, 503 bank unavailable. Any other reply (a 500 above all) fails the test.
pub async fn pay_until_final(app: &TestApp, user: u64, key: String) -> ClientRun {
    let body = payment_body(1_000 + user);
    let started = Instant::now();
    let mut run = ClientRun {
        user,
        key,
        reply: Received {
            status: 0,
            headers: Default::default(),
            bytes: Vec::new(),
        },
        outcome_pending: 0,
        service_unavailable: 0,
        bank_unavailable: 0,
        in_progress: 0,
        took: Duration::ZERO,
    };
    for failed_attempts in 1.. {
        let reply = app.pay(user, Some(&run.key), "elec-1", &body).await;
        match (reply.status, problem_slug(&reply).as_deref()) {
            (201 | 402, _) => {
                run.reply = reply;
                run.took = started.elapsed();
                return run;
            }
            (503, Some("outcome-pending")) => run.outcome_pending += 1,
            (503, Some("service-unavailable")) => run.service_unavailable += 1,
            (503, Some("bank-unavailable")) => run.bank_unavailable += 1,
            (409, Some("request-in-progress")) => run.in_progress += 1,
            (status, _) => panic!(
                "unexpected {status} for key {}: {}",
                run.key,
                String::from_utf8_lossy(&reply.bytes)
            ),
        }
        let retry_after = reply
            .header("retry-after")
            .expect("every retryable reply says when to retry");
        assert!(
            retry_after.parse::<u64>().is_ok(),
            "Retry-After {retry_after:?}"
        );
        match CLIENT_RETRIES.next_step(failed_attempts, started.elapsed(), None, random_unit()) {
            NextStep::RetryAfter(wait) => tokio::time::sleep(wait).await,
            NextStep::CheckStatus => panic!(
                "key {}: no final reply within the deadline; replies until then: {} outcome \
                 pending, {} in progress, {} service unavailable, {} bank unavailable",
                run.key,
                run.outcome_pending,
                run.in_progress,
                run.service_unavailable,
                run.bank_unavailable
            ),
        }
    }
    unreachable!("the loop returns or panics")
}

/// The problem type's slug of a problem+json reply.
fn problem_slug(reply: &Received) -> Option<String> {
    if reply.header("content-type") != Some("application/problem+json") {
        return None;
    }
    let body: serde_json::Value = serde_json::from_slice(&reply.bytes).ok()?;
    body["type"]
        .as_str()?
        .strip_prefix("/problems/")
        .map(str::to_owned)
}

/// The reconciler's loop (`reconcile::run_until_stopped`) beside a load run.
pub struct BackgroundReconciler {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl BackgroundReconciler {
    /// Starts the loop on the app's state, pausing 20 ms when nothing is due.
    pub fn start(app: &TestApp) -> BackgroundReconciler {
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(reconcile::run_until_stopped(
            app.state.clone(),
            Duration::from_millis(20),
            async move {
                stopped.await.ok();
            },
        ));
        BackgroundReconciler { stop, task }
    }

    /// Stops the loop after its current step.
    pub async fn stop(self) {
        self.stop.send(()).expect("the reconciler still runs");
        self.task.await.expect("the reconciler stops cleanly");
    }
}

/// What the cross-check counted.
#[derive(Debug)]
pub struct Reconciled {
    /// Debits in the bank's ledger (each reference once).
    pub debits: usize,
    /// Payments the bank declined.
    pub declined: usize,
}

/// Asserts that the bank's ledger and the tables agree after `runs` ended: every key `done`
/// (none `started`, `unknown` or `released`); one payment per key, under its own reference (a
/// released claim's retry reuses its payment and reference); no reference debited twice; the
/// debited references are exactly the succeeded payments' (each with its finished key), with
/// the same amount; and every client's final reply is what the tables hold for its key. Runs
/// on either store.
pub async fn assert_ledger_matches_tables(app: &TestApp, runs: &[ClientRun]) -> Reconciled {
    let unfinished = app
        .scalar("SELECT count(*) FROM idempotency_keys WHERE state <> 'done'")
        .await;
    assert_eq!(unfinished, 0, "no key left started, unknown or released");
    let expected = i64::try_from(runs.len()).expect("small");
    assert_eq!(app.count("idempotency_keys").await, expected, "key rows");
    assert_eq!(app.count("payments").await, expected, "one payment per key");
    let rows: Vec<(String, uuid::Uuid, uuid::Uuid, String, String, i64)> = app
        .rows(
            "SELECT k.user_id, k.key, p.payment_id, CAST(p.status AS TEXT), p.bank_reference, \
                    p.amount_paise \
             FROM idempotency_keys k \
             JOIN payments p ON p.user_id = k.user_id AND p.payment_id = k.resource_id",
        )
        .await;
    assert_eq!(rows.len(), runs.len(), "every key points at its payment");
    let mut amounts: HashMap<String, i64> = HashMap::new();
    let by_key: HashMap<(String, String), (String, String, String)> = rows
        .into_iter()
        .map(|(user, key, payment_id, status, reference, amount)| {
            assert_eq!(
                reference,
                format!("pay-{payment_id}"),
                "the claim's own reference"
            );
            amounts.insert(reference.clone(), amount);
            (
                (user, key.to_string()),
                (payment_id.to_string(), status, reference),
            )
        })
        .collect();

    let ledger = app.ledger().await;
    let mut debits_per_reference: HashMap<&str, usize> = HashMap::new();
    for debit in &ledger.debits {
        *debits_per_reference.entry(&debit.reference).or_default() += 1;
    }
    let doubles: Vec<_> = debits_per_reference
        .iter()
        .filter(|(_, count)| **count > 1)
        .collect();
    assert!(doubles.is_empty(), "double debits: {doubles:?}");
    let debited: HashSet<&str> = debits_per_reference.keys().copied().collect();
    let succeeded: HashSet<&str> = by_key
        .values()
        .filter(|(_, status, _)| status == "succeeded")
        .map(|(_, _, reference)| reference.as_str())
        .collect();
    assert_eq!(
        debited, succeeded,
        "every debit has one succeeded payment with a finished key, and the reverse"
    );
    for debit in &ledger.debits {
        assert_eq!(
            Some(i64::try_from(debit.amount_paise).expect("small")),
            amounts.get(&debit.reference).copied(),
            "debit {} moved its payment's amount",
            debit.reference
        );
    }

    let mut declined = 0;
    for run in runs {
        let (payment_id, status, _) = by_key
            .get(&(run.user.to_string(), run.key.clone()))
            .unwrap_or_else(|| panic!("key {} has no row", run.key));
        if run.reply.status == 201 {
            assert_eq!(status, "succeeded", "key {}", run.key);
            assert_eq!(run.reply.json()["payment_id"], payment_id.as_str());
        } else {
            run.reply.assert_problem(402, "payment-declined");
            assert_eq!(status, "declined", "key {}", run.key);
            declined += 1;
        }
    }
    Reconciled {
        debits: ledger.debits.len(),
        declined,
    }
}
