//! Reconciliation: no key stays `started` or `unknown` for ever, and no money moves without a
//! matching record (SPEC §5, invariant 5).
//!
//! A key is due when it is `unknown` (a bank call got no readable outcome), `started` for
//! longer than `stuck_after` (its attempt crashed), or `released` with a check for a late debit
//! due. For each, the bank is asked by the claim's own reference, and its true result is
//! written:
//! - **moved the money** → the payment (or refund) and the finished key, in one transaction,
//!   so a retry replays the 201 the first attempt would have given. On a released key this is a
//!   *late* movement (the first call reached the bank after the release), counted in
//!   `payments_reconcile_late_movements_found`.
//! - **declined** → the saved decline.
//! - **never saw it** → the claim is *released*: the key and its pending movement are kept, and
//!   the client's next retry claims the key again and calls the bank under the same reference.
//!   Released rather than re-sent by the reconciler, because only the client knows whether the
//!   customer still wants the payment. A claim is released only once no call for it can still
//!   be on its way: its call ended with a definite error, or the claim is older than
//!   `stuck_after` (longer than any bank call may take; start-up enforces it). A younger one is
//!   asked again soon, backing off (1 s doubling), and at the latest when it turns
//!   `stuck_after` old: a slow bank may execute the call any moment. A released key is asked again `stuck_after`
//!   after its release and a last time when it expires; if the bank still has not seen it
//!   then, its movement becomes `void` and the key may expire (docs/design.md, "Late-debit
//!   checks").
//! - **no usable reply** → tried again after a back-off (1 s doubling to 5 minutes).
//!
//! Keys are taken under a lease written on the key row (`store::sql::keys`), chosen with
//! `FOR UPDATE SKIP LOCKED` on PostgreSQL, so every replica can run this loop and no two
//! reconcilers ever hold one key; the bank's reply is written only while the lease holds.
//! The loop ([`run_until_stopped`]) drains a backlog oldest first with several look-ups at
//! once, within [`ReconcileBounds`].

mod drain;
mod rail;

use std::time::{Duration, Instant};

use shared::{KeyState, Operation};

use crate::bank::{LookUp, LookUpError};
use crate::domain::Cause;
use crate::metrics::{Metrics, OutcomeLabels, ResolvedLabels};
use crate::state::AppState;
use crate::store::{CheckSlot, FinalOutcome, LeasedKey, SavedMovement, StoreError, StoredKey};

pub use rail::zone_of as status_check_zone;
use rail::{CheckAsked, Gate};

pub use drain::run_until_stopped;

/// How far ahead a check may queue for its slot of the deployment's pace; beyond that it is
/// put off rather than held.
const PACE_QUEUE: Duration = Duration::from_secs(2);

/// The shortest wait before a key is taken again, so a key is never spun on.
const MIN_CHECK_GAP: Duration = Duration::from_secs(1);

/// What became of one locked key.
#[derive(Debug)]
pub enum Resolution {
    /// The bank's true result was saved.
    Finished(SavedMovement),
    /// The bank never saw it: the claim was released for the client's retry.
    Released,
    /// A released claim's last check found nothing: its movement is void and the key may expire.
    Voided,
    /// No reply yet (look-up failed or pending, too early to release, or the rules put the
    /// check off): asked again later.
    NotYet {
        /// When the key is taken again (its next check, or the quiet hours' end).
        next_check_at: time::OffsetDateTime,
    },
    /// Every check the rail allows was made with no final reply: the key waits for the bank's
    /// settlement file, due at `due_at`.
    AwaitingSettlement {
        /// When the file is due.
        due_at: time::OffsetDateTime,
    },
}

/// What one reconciler step did.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// No key was due.
    NothingDue,
    /// One key was handled (resolved or postponed).
    Handled,
    /// One key was due but its row could not be read (corrupt): logged with the key, counted in
    /// `payments_reconcile_corrupt_keys_skipped`, and left leased, so it comes back once its lease
    /// runs out and never blocks the others.
    Skipped,
}

/// Asks the bank about a leased key, if the rail's rules allow a check now, and writes what
/// it says, recorded against `cause` (the request or operator that asked at once, or
/// [`Cause::background`] for the reconciler's own).
#[tracing::instrument(skip_all, fields(user_id = %leased.key.user, key = %leased.key.key))]
pub async fn resolve_leased(
    state: &AppState,
    leased: LeasedKey,
    cause: &Cause,
) -> Result<Resolution, StoreError> {
    state.metrics.stuck_keys_found.inc();
    let (rules, zone) = (&state.policy.status_checks, &state.status_check_zone);
    let stored = &leased.stored;
    let asked = CheckAsked {
        checks_made: leased.stored.status_checks,
        since_call: since_the_call_landed(state, stored),
        local_minute: rail::local_minute(zone, stored.read_at),
        asked_by_someone: cause.request_id.is_some(),
    };
    match rail::gate(rules, asked) {
        Gate::CheckNow => {}
        Gate::WaitFor(wait) => return not_yet(state, leased, wait, cause).await,
        Gate::NoChecksLeft => return out_of_checks(state, leased, cause).await,
    }
    let pace = (rules.pace(), PACE_QUEUE);
    match state
        .leases()
        .take_status_check(&leased, rules.at_most, pace)
        .await?
    {
        Some(CheckSlot::SendAfter(wait)) => tokio::time::sleep(wait).await,
        Some(CheckSlot::PaceFull(wait)) => {
            state.metrics.status_checks_paced.inc();
            return not_yet(state, leased, wait, cause).await;
        }
        None => return Err(StoreError::LeaseLost),
    }
    ask_the_bank(state, leased, cause).await
}

/// When the rail allows the `unknown` key's next status check, by its row (its claim and the
/// checks made); `None` once its checks ran out or it awaits the settlement file.
pub fn next_check_at(state: &AppState, stored: &StoredKey) -> Option<time::OffsetDateTime> {
    if stored.settlement_due_at.is_some() {
        return None;
    }
    let rules = &state.policy.status_checks;
    let land_within = state.bank.calls_land_within();
    let after_claim = rail::next_check_after_claim(rules, land_within, stored.status_checks)?;
    Some(stored.record.claimed_at + after_claim)
}

/// How long from now until the rail allows the first status check of a call that took `took`
/// (counted from when the call reached the bank at the latest, [`since_the_call_landed`]).
pub fn first_check_in(state: &AppState, took: Duration) -> Duration {
    let rules = &state.policy.status_checks;
    let land_within = state.bank.calls_land_within();
    rail::next_check_after_claim(rules, land_within, 0)
        .unwrap_or_default()
        .saturating_sub(took)
}

/// How long ago the key's latest bank call reached the bank at the latest (its claim plus the
/// bank timeout, [`crate::bank::Bank::calls_land_within`]): the rail's schedule counts from
/// then, so no check is early by the call's own time on the way.
pub fn since_the_call_landed(state: &AppState, stored: &StoredKey) -> Duration {
    let since_claim: Duration = (stored.read_at - stored.record.claimed_at)
        .try_into()
        .unwrap_or(Duration::ZERO);
    since_claim.saturating_sub(state.bank.calls_land_within())
}

/// Sends the counted check and writes what the bank says.
async fn ask_the_bank(
    state: &AppState,
    leased: LeasedKey,
    cause: &Cause,
) -> Result<Resolution, StoreError> {
    let operation = leased.stored.operation;
    let reference = leased.movement.bank_reference();
    let asked = Instant::now();
    let reply = state.bank.look_up(operation, reference).await;
    let took = asked.elapsed();
    let checks_made = f64::from(leased.stored.status_checks + 1);
    let resolution = match reply {
        Ok(LookUp::Succeeded) => {
            state.metrics.bank_call_took("look_up", "succeeded", took);
            let succeeded = (FinalOutcome::Succeeded, "succeeded");
            finish(state, leased, succeeded, cause).await
        }
        Ok(LookUp::Declined { reason }) => {
            state.metrics.bank_call_took("look_up", "declined", took);
            let declined = (FinalOutcome::Declined { reason }, "declined");
            finish(state, leased, declined, cause).await
        }
        Ok(LookUp::NeverSeen) => {
            state.metrics.bank_call_took("look_up", "never_seen", took);
            never_seen(state, leased, cause).await
        }
        Ok(LookUp::Pending) => {
            state.metrics.bank_call_took("look_up", "pending", took);
            check_again(state, leased, false, cause).await
        }
        Err(error) => {
            state.metrics.bank_call_took("look_up", "failed", took);
            state.metrics.lookup_failures.inc();
            if matches!(error, LookUpError::RefusedByRules(_)) {
                state.metrics.status_checks_refused.inc();
                tracing::error!(%error, "the bank refused a status check under the rail's rules");
            } else {
                tracing::warn!(%error, "bank look-up failed; will ask again within the rules");
            }
            check_again(state, leased, true, cause).await
        }
    }?;
    if !matches!(resolution, Resolution::NotYet { .. }) {
        let per_movement = &state.metrics.status_checks_per_movement;
        per_movement.observe(checks_made);
    }
    Ok(resolution)
}

/// No final reply from this check: the key is asked again at its next check's time, or waits
/// for the settlement file when that was its last.
async fn check_again(
    state: &AppState,
    leased: LeasedKey,
    failed: bool,
    cause: &Cause,
) -> Result<Resolution, StoreError> {
    let rules = &state.policy.status_checks;
    let checks_made = leased.stored.status_checks + 1;
    let Some(due) = rules.earliest_check(checks_made) else {
        let mut leased = leased;
        leased.stored.status_checks = checks_made;
        return out_of_checks(state, leased, cause).await;
    };
    let since_call = since_the_call_landed(state, &leased.stored);
    let wait = due.saturating_sub(since_call).max(MIN_CHECK_GAP);
    let next_check_at = leased.stored.read_at + wait;
    state
        .leases()
        .look_again(leased, wait, failed, cause)
        .await?;
    Ok(Resolution::NotYet { next_check_at })
}

/// Gives the key back, to be taken again after `wait`; no check was sent.
async fn not_yet(
    state: &AppState,
    leased: LeasedKey,
    wait: Duration,
    cause: &Cause,
) -> Result<Resolution, StoreError> {
    let wait = wait.max(MIN_CHECK_GAP);
    let next_check_at = leased.stored.read_at + wait;
    state
        .leases()
        .look_again(leased, wait, false, cause)
        .await?;
    Ok(Resolution::NotYet { next_check_at })
}

/// The movement has had every check the rail allows. A released key (the bank said "never
/// seen" after its call's landing time) is void once it expires; an undecided one waits for
/// the bank's settlement file, and is never checked again.
async fn out_of_checks(
    state: &AppState,
    leased: LeasedKey,
    cause: &Cause,
) -> Result<Resolution, StoreError> {
    let stored = &leased.stored;
    let operation = stored.operation;
    if stored.record.state == KeyState::Released {
        let expires_at = stored.record.expires_at;
        if stored.read_at >= expires_at {
            state.leases().void_leased(leased, cause).await?;
            resolved(state, operation, "void");
            return Ok(Resolution::Voided);
        }
        let until_expiry = (expires_at - stored.read_at).unsigned_abs();
        return not_yet(state, leased, until_expiry, cause).await;
    }
    let already_waiting = leased.stored.settlement_due_at.is_some();
    let due_in = rail::until_settlement(&state.status_check_zone, stored.read_at);
    let due_at = state
        .leases()
        .await_settlement(leased, due_in, cause)
        .await?;
    if !already_waiting {
        state.metrics.awaiting_settlement.inc();
        tracing::warn!(
            %due_at,
            "status checks ran out with no final reply; the key waits for the settlement file"
        );
    }
    Ok(Resolution::AwaitingSettlement { due_at })
}

/// The bank has no record of the claim's reference: release the claim if no call for it can
/// still arrive, end a released claim's checks when its key expires, or ask again at the next
/// check's time.
async fn never_seen(
    state: &AppState,
    leased: LeasedKey,
    cause: &Cause,
) -> Result<Resolution, StoreError> {
    let (stored, operation) = (&leased.stored, leased.stored.operation);
    let policy = &state.policy;
    if stored.record.state == KeyState::Released {
        // The row's expiry, decided at the claim: every replica voids at the same instant,
        // whatever its own policy says, and the re-claim statement refuses from then on.
        if stored.read_at >= stored.record.expires_at {
            state.leases().void_leased(leased, cause).await?;
            resolved(state, operation, "void");
            return Ok(Resolution::Voided);
        }
        return check_again(state, leased, false, cause).await;
    }
    let claim_age = stored.read_at - stored.record.claimed_at;
    if claim_age < policy.stuck_after {
        // A call that timed out may still be on its way to the bank, so nothing is released
        // before the claim is `stuck_after` old (bank calls give up sooner): asked again at
        // the next check's time.
        return check_again(state, leased, false, cause).await;
    }
    state
        .leases()
        .release_leased(leased, policy.stuck_after, cause)
        .await?;
    resolved(state, operation, "released");
    Ok(Resolution::Released)
}

/// One reconciler step: takes the oldest due key, if any, and resolves it.
pub async fn try_reconcile_once(state: &AppState) -> Result<Step, StoreError> {
    let Some(due) = state
        .leases()
        .lease_due(state.policy.stuck_after, 1)
        .await?
        .pop()
    else {
        return Ok(Step::NothingDue);
    };
    let Some(leased) = readable(state, due) else {
        return Ok(Step::Skipped);
    };
    resolve_leased(state, leased, &Cause::background()).await?;
    Ok(Step::Handled)
}

/// The due key, or `None` for a row that could not be read: logged (naming the key) and
/// counted, so one corrupt row never stops the keys behind it.
fn readable(state: &AppState, due: Result<LeasedKey, StoreError>) -> Option<LeasedKey> {
    match due {
        Ok(leased) => Some(leased),
        Err(error) => {
            state.metrics.corrupt_keys_skipped.inc();
            tracing::error!(%error, "a due key's row cannot be read; skipped until its lease ends");
            None
        }
    }
}

/// Refreshes the gauges of the oldest `started` and `unknown` keys' ages and of the keys
/// awaiting settlement.
async fn refresh_age_gauges(state: &AppState) {
    if let Ok(unfinished) = state.leases().unfinished_keys().await {
        let metrics = &state.metrics;
        let started = unfinished.oldest_started.as_secs_f64();
        metrics.oldest_started_seconds.set(started);
        let unknown = unfinished.oldest_unknown.as_secs_f64();
        metrics.oldest_unknown_seconds.set(unknown);
        let awaiting = i64::try_from(unfinished.awaiting_settlement).unwrap_or(i64::MAX);
        metrics.keys_awaiting_settlement.set(awaiting);
    }
}

async fn finish(
    state: &AppState,
    leased: LeasedKey,
    (result, label): (FinalOutcome, &'static str),
    cause: &Cause,
) -> Result<Resolution, StoreError> {
    let operation = leased.stored.operation;
    let was = leased.stored.record.state;
    let claim_to_final = leased.stored.read_at - leased.stored.record.claimed_at;
    match state.leases().finish_leased(leased, &result, cause).await? {
        Some(movement) => {
            resolved(state, operation, label);
            state
                .metrics
                .reconcile_claim_to_final
                .get_or_create(&ResolvedLabels {
                    operation: operation.name(),
                    was: was.as_str(),
                })
                .observe(claim_to_final.as_seconds_f64().max(0.0));
            if was == KeyState::Released && result == FinalOutcome::Succeeded {
                Metrics::count(&state.metrics.late_movements_found, operation.name());
                tracing::warn!(
                    reference = movement.bank_reference(),
                    "late movement: the bank executed a released claim's first call"
                );
            }
            tracing::info!(was = was.as_str(), outcome = label, "key reconciled");
            Ok(Resolution::Finished(movement))
        }
        None => Err(StoreError::Corrupt(
            "a leased key's movement vanished".to_owned(),
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
    if !matches!(outcome, "released" | "void") {
        state.metrics.outcome(operation.name(), outcome);
    }
}
