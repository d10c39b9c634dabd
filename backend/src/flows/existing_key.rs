//! What a request does when its (user, key) is already stored: the shared decision on the
//! stored record, turned into I/O. Replays render the saved answer (and remember it, so the
//! next repeat is answered from memory: [`answer_from_memory`]); a key stuck in `started`
//! is reconciled inline (SPEC §4) instead of answering 409 for ever; a released key is claimed
//! again under its claim's own reference; an expired key makes way for a new claim.

use std::time::Duration;

use shared::decision::Attempt;
use shared::{Decision, KeyState, Problem, ProblemKind, decide};
use time::OffsetDateTime;

use super::answer::Answer;
use super::bank_call::call_bank_and_save;
use super::waiting::Reached;
use crate::metrics::Metrics;
use crate::reconcile::{Resolution, resolve_leased};
use crate::state::AppState;
use crate::store::{KeyRef, SavedMovement, StoreError, StoredKey};
use crate::trail::EventKind;

/// The trail's word for a replay read from the database.
const REPLAYED: &str = "read from the database";
/// The trail's word for a replay from the replay cache.
const REPLAYED_FROM_MEMORY: &str = "from memory (the replay cache)";
/// The trail's word for a refused mismatch.
const MISMATCH: &str = "same key with another request body: refused (422)";

/// How many claim rounds a request makes. Reusing an expired key that was released with a
/// check still to come takes three (settle the old claim, delete the key, claim it); one more
/// spares a rare race a spurious error.
pub(super) const CLAIM_ROUNDS: usize = 4;

/// The next step for a request whose key exists.
pub(super) enum Step {
    /// Answer this.
    Answer(Answer),
    /// Another attempt (or a reconciler) is at work on the key: 409, unless the request waits.
    InProgress {
        /// The `Retry-After` of the 409.
        retry_after: Duration,
    },
    /// The key's released claim is this request's again: call the bank for its movement.
    CallBank(SavedMovement),
    /// The key was expired (or vanished): try to claim it again.
    ClaimAgain,
}

/// Decides on the stored key and carries the decision out.
#[tracing::instrument(skip_all, fields(user_id = %key.user, key = %key.key))]
pub(super) async fn answer_existing_key(
    state: &AppState,
    key: KeyRef,
    attempt: &Attempt,
    stored: &StoredKey,
) -> Result<Step, StoreError> {
    let operation = stored.operation.name();
    let decision = decide(&state.policy, attempt, Some(&stored.record), stored.read_at);
    tracing::debug!(?decision, "existing key");
    Ok(Step::Answer(match decision {
        Decision::Replay => {
            Metrics::count(&state.metrics.replays, operation);
            let resource = Some(stored.resource_id);
            state
                .trail
                .observe_key(key, resource, EventKind::Replayed, REPLAYED);
            replay(state, key, stored).await?
        }
        Decision::InProgress { retry_after } => return Ok(Step::InProgress { retry_after }),
        Decision::OutcomePending { retry_after } => outcome_pending(retry_after),
        Decision::RejectMismatch => {
            Metrics::count(&state.metrics.mismatches, operation);
            let resource = Some(stored.resource_id);
            state
                .trail
                .observe_key(key, resource, EventKind::MismatchRefused, MISMATCH);
            Answer::problem(Problem::idempotency_key_reused())
        }
        Decision::Reconcile => return reconcile_inline(state, key).await,
        Decision::ClaimReleased => {
            return match state
                .store
                .reclaim_released(key, &attempt.fingerprint)
                .await?
            {
                Some(movement) => Ok(Step::CallBank(movement)),
                // Another retry re-claimed it first, or a reconciler is checking it.
                None => Ok(busy()),
            };
        }
        Decision::ClaimExpired => return make_way_for_new_claim(state, key, stored).await,
        // The key vanished between the claim and the read; or decisions that only arise
        // before a key is looked up.
        Decision::Claim
        | Decision::ProceedWithoutKey
        | Decision::RejectMissingKey
        | Decision::RejectMalformedKey(_) => return Ok(Step::ClaimAgain),
    }))
}

/// Carries out a step on a key that expires at `expires_at` (its row's): where it ends the
/// request's round, or `None` for [`Step::ClaimAgain`].
pub(super) async fn carry_out(
    state: &AppState,
    key: KeyRef,
    step: Step,
    expires_at: OffsetDateTime,
) -> crate::error::Result<Option<Reached>> {
    Ok(Some(match step {
        Step::Answer(answer) => Reached::Answer(answer.expiring(expires_at)),
        Step::InProgress { retry_after } => Reached::InProgress {
            retry_after,
            expires_at,
        },
        Step::CallBank(movement) => {
            let answer = call_bank_and_save(state, key, &movement).await?;
            Reached::Answer(answer.expiring(expires_at))
        }
        Step::ClaimAgain => return Ok(None),
    }))
}

async fn replay(state: &AppState, key: KeyRef, stored: &StoredKey) -> Result<Answer, StoreError> {
    let movement = state.store.saved_movement(key, stored).await?;
    let answer = Answer::saved(&movement)?;
    state.replay_cache.remember(key, stored, &answer);
    Ok(answer.replayed())
}

/// The answer to a repeat of a finished key remembered in memory, judged by the same decision
/// as a database read (fingerprint, expiry); `None` when the key is not remembered, or the
/// decision is anything but a replay or a mismatch (then the database decides).
pub(super) fn answer_from_memory(
    state: &AppState,
    key: KeyRef,
    attempt: &Attempt,
) -> Option<Answer> {
    let remembered = state.replay_cache.recall(key)?;
    let operation = remembered.operation.name();
    match decide(
        &state.policy,
        attempt,
        Some(&remembered.record),
        remembered.estimated_now(),
    ) {
        Decision::Replay => {
            Metrics::count(&state.metrics.replays, operation);
            Metrics::count(&state.metrics.replays_from_memory, operation);
            let resource = Some(remembered.resource_id);
            let replayed = EventKind::Replayed;
            state
                .trail
                .observe_key(key, resource, replayed, REPLAYED_FROM_MEMORY);
            let answer = remembered.answer.clone().replayed();
            Some(answer.expiring(remembered.record.expires_at))
        }
        Decision::RejectMismatch => {
            Metrics::count(&state.metrics.mismatches, operation);
            let resource = Some(remembered.resource_id);
            state
                .trail
                .observe_key(key, resource, EventKind::MismatchRefused, MISMATCH);
            let refused = Answer::problem(Problem::idempotency_key_reused());
            Some(refused.expiring(remembered.record.expires_at))
        }
        _ => {
            state.replay_cache.forget(key);
            None
        }
    }
}

/// The key has been `started` past `stuck_after`: its attempt crashed or hangs. Ask the bank
/// now, holding the key as reconcilers do, and answer the true result.
async fn reconcile_inline(state: &AppState, key: KeyRef) -> Result<Step, StoreError> {
    let Some(leased) = state.store.lease_key(key, None).await? else {
        // A reconciler holds it (or it just finished): the client retries shortly.
        return Ok(busy());
    };
    Ok(match resolve_leased(state, leased).await {
        Ok(Resolution::Finished(movement)) => Step::Answer(Answer::saved(&movement)?.replayed()),
        // Released: the next round finds it released and claims it again for this request.
        Ok(Resolution::Released | Resolution::Voided) => Step::ClaimAgain,
        Ok(Resolution::NotYet) => Step::Answer(outcome_pending(
            shared::decision::OUTCOME_PENDING_RETRY_AFTER,
        )),
        // The look-up outlasted the lease and another reconciler took the key over; nothing
        // was written, and the key is being resolved. The client retries shortly.
        Err(StoreError::LeaseLost) => busy(),
        Err(error) => return Err(error),
    })
}

/// The key expired: delete it so the request claims it afresh. A released key whose last check
/// for a late debit is still to come gets that check first, here, so the old claim is settled
/// (succeeded, declined or void) before the key that points at it goes.
async fn make_way_for_new_claim(
    state: &AppState,
    key: KeyRef,
    stored: &StoredKey,
) -> Result<Step, StoreError> {
    let deleted = state
        .store
        .release_expired(key, stored.record.created_at)
        .await?;
    if deleted || stored.record.state != KeyState::Released {
        return Ok(Step::ClaimAgain);
    }
    let Some(leased) = state.store.lease_key(key, None).await? else {
        return Ok(busy());
    };
    Ok(match resolve_leased(state, leased).await {
        Ok(Resolution::Finished(_) | Resolution::Voided | Resolution::Released) => Step::ClaimAgain,
        Ok(Resolution::NotYet) => Step::Answer(outcome_pending(
            shared::decision::OUTCOME_PENDING_RETRY_AFTER,
        )),
        Err(StoreError::LeaseLost) => busy(),
        Err(error) => return Err(error),
    })
}

/// Someone else holds the key for a moment: the client retries shortly, or waits.
fn busy() -> Step {
    Step::InProgress {
        retry_after: shared::decision::IN_PROGRESS_RETRY_AFTER,
    }
}

/// The "still in progress" answer.
pub(super) fn in_progress(retry_after: Duration) -> Answer {
    Answer::problem(Problem::request_in_progress(retry_after))
}

/// The "outcome pending" answer: the bank's answer is unknown and is being looked up.
pub(super) fn outcome_pending(retry_after: Duration) -> Answer {
    Answer::problem(
        Problem::new(
            ProblemKind::OutcomePending,
            "The bank has not confirmed the outcome of this request yet; it is being checked. \
             Retry with the same Idempotency-Key and body; you will not be charged twice.",
        )
        .with_retry_after(retry_after),
    )
}
