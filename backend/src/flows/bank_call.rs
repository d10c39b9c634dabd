//! The claim winner's work, the same for payments and refunds: one bank call under the claim's
//! own reference, then the outcome and the key's state in one transaction, and the reply.
//!
//! From the bank call on, every failure leaves the key `started` or `unknown` for
//! reconciliation and replies "outcome pending": money may have moved, so no error is final.
//! The one exception is a call the bank port calls *not executed* (the bank said it did nothing
//! with it, or it never left): the claim is released on the spot, with no status check (the
//! rail allows none that soon, and none is needed), and the attempt told that nothing was
//! charged (SPEC §4, "Definite errors"). A gateway's 503 is not that: it may
//! have forwarded the call, which is left to reconciliation, within the rail's rules.

use std::time::Instant;

use time::OffsetDateTime;
use tracing::Instrument;

use shared::Operation;

use super::replies::{nothing_charged, outcome_pending, saved_reply};
use crate::bank::{Admitted, CallOutcome, MoneyCall};
use crate::domain::{Cause, Reply};
use crate::error::{Error, Result};
use crate::metrics::Metrics;
use crate::reconcile;
use crate::state::AppState;
use crate::store::{CLAIM_LEASE_RENEWAL, ClaimToken, FinalOutcome, KeyRef, SavedMovement};

/// Runs the claimed work in its own task, so that a client giving up (a phone's timeout closes
/// the connection, and the server drops the request's future) cannot cut it off between the
/// bank call and the save. The client's retry then finds the saved reply instead of a key
/// left `started` until reconciliation. The work stays in the request's span (and trace).
pub(super) async fn run_to_completion<T: Send + 'static>(
    work: impl Future<Output = Result<T>> + Send + 'static,
) -> Result<T> {
    tokio::spawn(work.in_current_span())
        .await
        .unwrap_or_else(|aborted| Err(Error::WorkAborted(aborted.to_string())))
}

/// Renews the lease of one claim on its key every [`CLAIM_LEASE_RENEWAL`] until dropped, which
/// is when the claim's bank call has ended and its outcome is saved: while the process lives,
/// no reconciler takes the key; if it dies, the lease lapses within [`CLAIM_LEASE`] and
/// reconciliation asks the bank at once.
///
/// [`CLAIM_LEASE`]: crate::store::CLAIM_LEASE
struct ClaimRenewal {
    task: tokio::task::JoinHandle<()>,
}

impl ClaimRenewal {
    fn start(state: &AppState, key: KeyRef, claim: ClaimToken) -> ClaimRenewal {
        let store = state.store.clone();
        let task = tokio::spawn(async move {
            loop {
                tokio::time::sleep(CLAIM_LEASE_RENEWAL).await;
                match store.renew_claim(key, claim).await {
                    Ok(true) => {}
                    // The key moved on, or a reconciler took it: nothing left to hold.
                    Ok(false) => return,
                    Err(error) => tracing::warn!(%error, "could not renew a claim's lease"),
                }
            }
        });
        ClaimRenewal { task }
    }
}

impl Drop for ClaimRenewal {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The claim this request holds on a key: the key, the claim's token and its pending movement.
pub(super) struct HeldClaim<'a> {
    /// The key claimed.
    pub key: KeyRef,
    /// This claim of it: every write on its behalf matches it.
    pub claim: ClaimToken,
    /// The pending payment or refund the claim calls the bank for.
    pub movement: &'a SavedMovement,
}

impl HeldClaim<'_> {
    /// The one money-moving call the claim makes.
    fn call(&self) -> MoneyCall<'_> {
        match self.movement {
            SavedMovement::Payment(payment) => MoneyCall::Debit {
                reference: &payment.bank_reference,
                amount_paise: payment.amount_paise,
                account: &payment.payer_vpa,
            },
            SavedMovement::Refund(refund) => MoneyCall::Refund {
                reference: &refund.bank_reference,
                debit_reference: &refund.debit_reference,
                amount_paise: refund.amount_paise,
            },
        }
    }
}

/// Calls the bank once for the claimed (or re-claimed) movement, `admitted` by the breaker,
/// and saves what it said, recorded against `cause`. If the bank already has all the calls it
/// may have (`MAX_BANK_CALLS`) and none ends within `BANK_QUEUE_WAIT_MS`, nothing is sent: the
/// claim is released at once and the request gets 503, and its retry claims the key again.
pub(super) async fn call_bank_and_save(
    state: &AppState,
    held: HeldClaim<'_>,
    admitted: Admitted,
    cause: &Cause,
) -> Result<Reply> {
    let _renewing = ClaimRenewal::start(state, held.key, held.claim);
    let call = held.call();
    let wait = state.limits.bank_queue_wait;
    let Some(permit) = state.bank.reserve_call(admitted, wait).await else {
        return bank_busy(state, &held, cause).await;
    };
    let calling = Instant::now();
    // The permit is given back when the call ends, before anything else: a look-up that
    // follows never holds a money call's place.
    let outcome = state.bank.move_money(permit, call).await;
    let took = calling.elapsed();
    let (operation, name) = (call.operation(), call.name());
    Metrics::count(&state.metrics.claims, operation.name());
    let result = match outcome {
        CallOutcome::Succeeded => FinalOutcome::Succeeded,
        CallOutcome::Declined { reason } => FinalOutcome::Declined { reason },
        CallOutcome::NotExecuted { reason } => {
            return not_executed(state, &held, reason, (name, took), cause).await;
        }
        CallOutcome::MayBeInFlight { reason } => {
            return no_final_reply(state, &held, reason, (name, took), cause).await;
        }
    };
    let label = match result {
        FinalOutcome::Succeeded => "succeeded",
        FinalOutcome::Declined { .. } => "declined",
    };
    state.metrics.bank_call_took(name, label, took);
    save(state, &held, (operation, label), &result, cause).await
}

/// The bank gave no final reply: the key goes `unknown`, due for its first status check when
/// the rail allows one.
async fn no_final_reply(
    state: &AppState,
    held: &HeldClaim<'_>,
    reason: String,
    (name, took): (&'static str, std::time::Duration),
    cause: &Cause,
) -> Result<Reply> {
    let operation = held.movement.operation();
    state.metrics.bank_call_took(name, "unknown", took);
    state.metrics.outcome(operation.name(), "unknown");
    tracing::warn!(%reason, "no final reply from the bank; the key goes to reconciliation");
    let this_claim = (held.movement.id(), held.claim);
    let first_check = reconcile::first_check_in(state, took);
    if let Err(error) = state
        .claims()
        .mark_unknown(held.key, this_claim, first_check, cause)
        .await
    {
        tracing::error!(%error, "could not mark the key unknown; it stays started");
        return Ok(outcome_pending(None));
    }
    let next_check_at = OffsetDateTime::now_utc() + first_check;
    Ok(outcome_pending(Some(next_check_at)))
}

/// The bank said it did not execute the call (or the call never left): nothing moved and
/// nothing of it is on its way, so the claim is released now, with no status check, and the
/// attempt hears that nothing was charged; its retry calls the bank again under the same
/// reference.
async fn not_executed(
    state: &AppState,
    held: &HeldClaim<'_>,
    reason: String,
    (name, took): (&'static str, std::time::Duration),
    cause: &Cause,
) -> Result<Reply> {
    state.metrics.bank_call_took(name, "not_executed", took);
    tracing::warn!(%reason, "the bank did not execute the call; the claim is released");
    let this_claim = (held.movement.id(), held.claim);
    let stuck_after = state.policy.stuck_after;
    if let Err(error) = state
        .claims()
        .release_unsent(held.key, this_claim, stuck_after, cause)
        .await
    {
        tracing::warn!(%error, "could not release the claim; reconciliation will");
        return Ok(outcome_pending(None));
    }
    Ok(nothing_charged(
        "The bank did not execute this request and has no record of it: no money moved. \
         Retry with the same Idempotency-Key and body.",
    ))
}

/// Writes the bank's final word and renders it as the first reply, remembered for replays.
async fn save(
    state: &AppState,
    held: &HeldClaim<'_>,
    (operation, label): (Operation, &'static str),
    result: &FinalOutcome,
    cause: &Cause,
) -> Result<Reply> {
    let (key, movement_id) = (held.key, held.movement.id());
    let writing = Instant::now();
    let finished = state
        .claims()
        .finish(key, operation, movement_id, result, cause)
        .await;
    state.metrics.write_took("finish", writing.elapsed());
    Ok(match finished {
        Ok(Some(finished)) => {
            state.metrics.outcome(operation.name(), label);
            let reply = saved_reply(&finished.movement)?;
            if let Some(stored) = &finished.key {
                state.replay_cache.remember(key, stored, &reply);
            }
            reply
        }
        Ok(None) => {
            tracing::error!("the movement vanished before its outcome was saved");
            outcome_pending(None)
        }
        Err(error) => {
            tracing::error!(%error, "could not save the bank's outcome; reconciliation will");
            // Best effort: an `unknown` key is looked up at once. If the database is away this
            // fails too, the key stays `started`, and the reconciler takes it when the claim's
            // lease lapses.
            let this_claim = (movement_id, held.claim);
            let first_check = reconcile::first_check_in(state, std::time::Duration::ZERO);
            let claims = state.claims();
            if let Err(error) = claims
                .mark_unknown(key, this_claim, first_check, cause)
                .await
            {
                tracing::warn!(%error, "could not mark the key unknown either");
            }
            outcome_pending(None)
        }
    })
}

/// No bank call could be had: the claim is released (nothing was sent, so nothing can be on its
/// way) and the request told to come back.
async fn bank_busy(state: &AppState, held: &HeldClaim<'_>, cause: &Cause) -> Result<Reply> {
    state.metrics.bank_call(held.call().name(), "busy");
    let this_claim = (held.movement.id(), held.claim);
    let stuck_after = state.policy.stuck_after;
    state
        .claims()
        .release_unsent(held.key, this_claim, stuck_after, cause)
        .await?;
    Ok(nothing_charged(
        "The bank is at capacity; nothing was sent to it. Retry with the same \
         Idempotency-Key and body.",
    ))
}
