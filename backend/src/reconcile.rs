//! Reconciliation: no key stays `started` or `unknown` for ever (SPEC §5, invariant 5).
//!
//! A key is due when it is `unknown` (a bank call timed out, failed with a 5xx or lost its
//! connection) or `started` for longer than `stuck_after` (its attempt crashed). For each, the
//! bank is asked by reference, and its true result is written:
//! - **moved the money** → the payment (or refund) and the finished key, in one transaction,
//!   so a retry replays the 201 the first attempt would have given;
//! - **declined** → the saved decline;
//! - **never saw it** → the key and its pending movement are *released* (deleted), so the
//!   client's next retry claims the key afresh and calls the bank with the same reference.
//!   Released rather than re-sent by the reconciler, because only the client knows whether
//!   the customer still wants the payment; the bank reference stays (user, key), so even a
//!   late arrival of the first call cannot debit twice at a bank that dedupes. A key whose
//!   claim is younger than `stuck_after` is not released on "never seen" (the first call may
//!   still be on its way to the bank); it is asked again later.
//! - **no usable answer** → tried again after a back-off (1 s doubling to 5 minutes).
//!
//! Keys are taken so that no two reconcilers ever hold one at once: with `FOR UPDATE SKIP LOCKED`
//! on PostgreSQL, so every replica can run this loop; with a lease on the key row on the
//! embedded SQLite store (see `store::sqlite`).

use std::future::Future;
use std::time::Duration;

use shared::Operation;

use crate::bank_client::LookUp;
use crate::metrics::OutcomeLabels;
use crate::state::AppState;
use crate::store::{LockedKey, MovementResult, SavedMovement, StoreError};

/// The longest pause between two look-ups of one key.
const MAX_LOOKUP_BACKOFF: Duration = Duration::from_secs(300);

/// What became of one locked key.
#[derive(Debug)]
pub enum Resolution {
    /// The bank's true result was saved.
    Finished(SavedMovement),
    /// The bank never saw it: the key was released for the client's retry.
    Released,
    /// No answer yet (look-up failed, or too early to release): try again later.
    NotYet,
}

/// The outcome of one reconciler step.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// No key was due.
    NothingDue,
    /// One key was handled (resolved or postponed).
    Handled,
}

/// Asks the bank about a locked key and writes what it says.
#[tracing::instrument(skip_all, fields(user_id = %locked.unfinished().key.user, key = %locked.unfinished().key.key))]
pub async fn resolve_locked(state: &AppState, locked: LockedKey) -> Result<Resolution, StoreError> {
    state.metrics.stuck_keys_found.inc();
    let operation = locked.unfinished().stored.operation;
    let reference = bank_reference(&locked.unfinished().movement);
    match state.bank.look_up(operation, reference).await {
        Ok(LookUp::Succeeded) => {
            finish(state, locked, MovementResult::Succeeded, "succeeded").await
        }
        Ok(LookUp::Declined { reason }) => {
            finish(
                state,
                locked,
                MovementResult::Declined { reason },
                "declined",
            )
            .await
        }
        Ok(LookUp::NeverSeen) => {
            state.metrics.bank_call("look_up", "never_seen");
            let stored = &locked.unfinished().stored;
            let claim_age = stored.read_at - stored.record.claimed_at;
            if claim_age < state.policy.stuck_after {
                let wait = backoff(locked.unfinished().failed_lookups);
                locked.postpone(wait).await?;
                return Ok(Resolution::NotYet);
            }
            locked.release().await?;
            resolved(state, operation, "released");
            Ok(Resolution::Released)
        }
        Err(error) => {
            state.metrics.bank_call("look_up", "failed");
            state.metrics.lookup_failures.inc();
            tracing::warn!(%error, "bank look-up failed; will retry");
            let wait = backoff(locked.unfinished().failed_lookups);
            locked.postpone(wait).await?;
            Ok(Resolution::NotYet)
        }
    }
}

/// One reconciler step: takes the oldest due key, if any, and resolves it.
pub async fn try_reconcile_once(state: &AppState) -> Result<Outcome, StoreError> {
    let Some(locked) = state.store.lock_next_due(state.policy.stuck_after).await? else {
        return Ok(Outcome::NothingDue);
    };
    resolve_locked(state, locked).await?;
    Ok(Outcome::Handled)
}

/// Runs reconciler steps until `shutdown` resolves, pausing `idle_pause` whenever nothing is
/// due or the database is away. Also refreshes the oldest-key-age gauges.
pub async fn run_until_stopped(
    state: AppState,
    idle_pause: Duration,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let mut gauges_refreshed = tokio::time::Instant::now();
    loop {
        let outcome = try_reconcile_once(&state).await;
        // The age gauges matter most during a backlog, so they are refreshed then too, at most
        // once per idle pause, not only when the reconciler runs out of work.
        if !matches!(outcome, Ok(Outcome::Handled)) || gauges_refreshed.elapsed() >= idle_pause {
            refresh_age_gauges(&state).await;
            gauges_refreshed = tokio::time::Instant::now();
        }
        let pause = match outcome {
            Ok(Outcome::Handled) => Duration::ZERO,
            Ok(Outcome::NothingDue) => idle_pause,
            Err(error) => {
                tracing::warn!(%error, "reconciler step failed");
                idle_pause
            }
        };
        tokio::select! {
            () = &mut shutdown => return,
            () = tokio::time::sleep(pause) => {}
        }
    }
}

async fn refresh_age_gauges(state: &AppState) {
    if let Ok((started, unknown)) = state.store.oldest_unfinished_ages().await {
        state
            .metrics
            .oldest_started_seconds
            .set(started.as_secs_f64());
        state
            .metrics
            .oldest_unknown_seconds
            .set(unknown.as_secs_f64());
    }
}

async fn finish(
    state: &AppState,
    locked: LockedKey,
    result: MovementResult,
    label: &'static str,
) -> Result<Resolution, StoreError> {
    state.metrics.bank_call("look_up", label);
    let operation = locked.unfinished().stored.operation;
    let was = locked.unfinished().stored.record.state;
    match locked.finish(&result).await? {
        Some(movement) => {
            resolved(state, operation, label);
            tracing::info!(was = was.as_str(), outcome = label, "key reconciled");
            Ok(Resolution::Finished(movement))
        }
        None => Err(StoreError::Corrupt(
            "a locked key's movement vanished".to_owned(),
        )),
    }
}

fn resolved(state: &AppState, operation: Operation, outcome: &'static str) {
    state
        .metrics
        .keys_resolved
        .get_or_create(&OutcomeLabels {
            operation: operation.name(),
            outcome,
        })
        .inc();
    if outcome != "released" {
        state.metrics.outcome(operation.name(), outcome);
    }
}

fn bank_reference(movement: &SavedMovement) -> &str {
    match movement {
        SavedMovement::Payment(payment) => &payment.bank_reference,
        SavedMovement::Refund(refund) => &refund.bank_reference,
    }
}

/// 1 s, 2 s, 4 s, … up to five minutes.
fn backoff(failed_lookups: i16) -> Duration {
    let doublings = u32::try_from(failed_lookups).unwrap_or(0).min(16);
    Duration::from_secs(1u64 << doublings).min(MAX_LOOKUP_BACKOFF)
}
