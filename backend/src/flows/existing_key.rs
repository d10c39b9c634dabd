//! What a request does when its (user, key) is already stored: the shared decision on the
//! stored record, turned into I/O. Replays render the saved reply (and remember it, so the next
//! repeat is replied to from memory: [`reply_from_memory`]); a key stuck in `started` is
//! reconciled inline (SPEC §4) instead of replying 409 for ever; a released key is claimed
//! again under its claim's own reference; an expired key makes way for a new claim.

use shared::decision::Attempt;
use shared::fingerprint::SentBytes;
use shared::{Decision, KeyState, Operation, Problem, decide};
use time::OffsetDateTime;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use uuid::Uuid;

use super::Caller;
use super::admit::Submitted;
use super::bank_call::{HeldClaim, call_bank_and_save};
use super::replies::{awaiting_settlement, bank_unavailable, outcome_pending, saved_reply};
use super::rounds::RoundEnd;
use crate::domain::{Cause, EventKind, Reply};
use crate::error::Result;
use crate::metrics::Metrics;
use crate::reconcile::{self, Resolution, resolve_leased};
use crate::replay_cache::Remembered;
use crate::state::AppState;
use crate::store::{ClaimToken, KeyRef, StoreError, StoredKey};
use crate::telemetry::traces;

/// The trail's word for a replay read from the database.
const REPLAYED: &str = "read from the database";
/// The trail's word for a replay from the replay cache.
const REPLAYED_FROM_MEMORY: &str = "from memory (the replay cache)";
/// The trail's word for a refused mismatch.
const MISMATCH: &str = "same key with another request body: refused (422)";

/// Marks the operation's span, in the trace, with where its replay came from: `memory` (the
/// replay cache) or `database`.
fn replied_from(place: &'static str) {
    if traces::exporting() {
        tracing::Span::current().set_attribute("replay.replied_from", place);
    }
}

/// The 422 for a key used with another request, counted and recorded in the trail.
fn refuse_mismatch(
    state: &AppState,
    (key, movement): (KeyRef, Uuid),
    operation: &'static str,
    cause: &Cause,
) -> Reply {
    Metrics::count(&state.metrics.mismatches, operation);
    let refused = (EventKind::MismatchRefused, MISMATCH);
    state.trail.observe_key(key, Some(movement), refused, cause);
    Reply::problem(Problem::idempotency_key_reused())
}

/// Decides on the stored key and carries the decision out: where the round ends, or `None` if
/// the key is to be claimed again (it expired, or vanished).
#[tracing::instrument(skip_all, fields(user_id = %key.user, key = %key.key))]
pub(super) async fn reply_existing_key(
    state: &AppState,
    key: KeyRef,
    attempt: &Attempt,
    stored: &StoredKey,
    cause: &Cause,
) -> Result<Option<RoundEnd>> {
    let operation = stored.operation.name();
    let expires_at = stored.record.expires_at;
    let busy = Some(RoundEnd::InProgress { expires_at });
    let decision = decide(&state.policy, attempt, Some(&stored.record), stored.read_at);
    tracing::debug!(?decision, "existing key");
    let reply = match decision {
        Decision::Replay => {
            Metrics::count(&state.metrics.replays, operation);
            let replayed = (EventKind::Replayed, REPLAYED);
            let movement = Some(stored.movement_id);
            state.trail.observe_key(key, movement, replayed, cause);
            replied_from("database");
            replay(state, key, stored).await?
        }
        Decision::InProgress { .. } => return Ok(busy),
        Decision::OutcomePending { .. } => match stored.settlement_due_at {
            Some(due_at) => awaiting_settlement(due_at),
            // The customer's own retry asks the bank when the rail allows the movement's next
            // check (even in quiet hours, which hold only the reconciler's own checks).
            None if status_check_due(state, stored) => {
                match reconcile_inline(state, key, expires_at, cause).await? {
                    // Someone else is asking the bank right now: still pending, as before.
                    Some(RoundEnd::InProgress { .. }) => {
                        outcome_pending(reconcile::next_check_at(state, stored))
                    }
                    asked => return Ok(asked),
                }
            }
            None => outcome_pending(reconcile::next_check_at(state, stored)),
        },
        Decision::RejectMismatch => {
            refuse_mismatch(state, (key, stored.movement_id), operation, cause)
        }
        Decision::Reconcile => return reconcile_inline(state, key, expires_at, cause).await,
        Decision::ClaimReleased => {
            // A re-claim calls the bank again: the breaker admits it first, or the key stays
            // released for a later retry.
            let admitted = match state.bank.admit() {
                Ok(admitted) => admitted,
                Err(refused) => return Ok(Some(RoundEnd::Reply(bank_unavailable(refused)))),
            };
            let (claims, claim) = (state.claims(), ClaimToken::mint());
            match claims
                .reclaim_released(key, &attempt.fingerprint, claim, cause)
                .await?
            {
                Some(movement) => {
                    let held = HeldClaim {
                        key,
                        claim,
                        movement: &movement,
                    };
                    call_bank_and_save(state, held, admitted, cause).await?
                }
                // Another retry re-claimed it first, a reconciler is checking it, or its last
                // check voided it (the next round finds it expired).
                None => return Ok(busy),
            }
        }
        Decision::ClaimExpired => return make_way_for_new_claim(state, key, stored, cause).await,
        // The key vanished between the claim and the read; or decisions that only arise
        // before a key is looked up.
        Decision::Claim
        | Decision::ProceedWithoutKey
        | Decision::RejectMissingKey
        | Decision::RejectMalformedKey(_) => return Ok(None),
    };
    Ok(Some(RoundEnd::Reply(reply.expiring(expires_at))))
}

async fn replay(state: &AppState, key: KeyRef, stored: &StoredKey) -> Result<Reply, StoreError> {
    let movement = state.claims().saved_movement(key, stored).await?;
    let reply = saved_reply(&movement)?;
    state.replay_cache.remember(key, stored, &reply);
    Ok(reply.replayed())
}

/// The reply to a repeat of a finished key remembered in memory, judged by the same decision
/// as a database read (fingerprint, expiry); `None` when the key is not remembered, or the
/// decision is anything but a replay or a mismatch (then the database decides). A repeat
/// replayed here has its bytes (`sent`) kept with the entry, for [`replay_of_the_same_bytes`].
pub(super) fn reply_from_memory(
    state: &AppState,
    key: KeyRef,
    (attempt, sent): (&Attempt, SentBytes),
    cause: &Cause,
) -> Option<Reply> {
    let remembered = state.replay_cache.recall(key)?;
    judge_remembered(state, key, attempt, (&remembered, Some(sent)), cause)
}

/// A repeat of a finished key that sends the very bytes of a repeat already replayed from
/// memory, to the same operation and path: judged on the remembered fingerprint before its
/// body is parsed again, since the same bytes pass the same checks and fingerprint the same
/// (`replay_cache`, "The same bytes again"). `None` for any other request: it is checked in
/// full, as before. The key header is parsed as [`super::admit`] parses it.
pub(super) fn replay_of_the_same_bytes(
    state: &AppState,
    caller: &Caller,
    operation: Operation,
    submitted: &Submitted<'_>,
) -> Option<Reply> {
    if submitted.body.len() > state.body_limits.max_bytes {
        return None;
    }
    let header_values = submitted.key_header_values.iter().copied();
    let key = state
        .policy
        .parse_key_header(operation, header_values)
        .ok()??;
    let key_ref = KeyRef::new(caller.user, &key);
    let remembered = state.replay_cache.recall(key_ref)?;
    let sent = SentBytes::of(operation, submitted.path_parameter, submitted.body);
    if !remembered.replayed_bytes_are(sent) {
        return None;
    }
    tracing::Span::current().record("key", tracing::field::display(&key));
    let attempt = Attempt {
        key: Ok(Some(key)),
        fingerprint: remembered.record.fingerprint,
    };
    judge_remembered(
        state,
        key_ref,
        &attempt,
        (&remembered, None),
        &caller.cause(),
    )
}

/// The decision on `remembered` carried out: a replay (of a repeat whose bytes, if `sent`, the
/// entry keeps), a refused mismatch, or `None` (the entry is forgotten and the database
/// decides).
fn judge_remembered(
    state: &AppState,
    key: KeyRef,
    attempt: &Attempt,
    (remembered, sent): (&Remembered, Option<SentBytes>),
    cause: &Cause,
) -> Option<Reply> {
    let operation = remembered.operation.name();
    let movement = Some(remembered.movement_id);
    let reply = match decide(
        &state.policy,
        attempt,
        Some(&remembered.record),
        remembered.estimated_now(),
    ) {
        Decision::Replay => {
            if let Some(sent) = sent {
                remembered.note_replayed_bytes(sent);
            }
            Metrics::count(&state.metrics.replays, operation);
            Metrics::count(&state.metrics.replays_from_memory, operation);
            let replayed = (EventKind::Replayed, REPLAYED_FROM_MEMORY);
            state.trail.observe_key(key, movement, replayed, cause);
            replied_from("memory");
            remembered.reply.clone().replayed()
        }
        Decision::RejectMismatch => {
            refuse_mismatch(state, (key, remembered.movement_id), operation, cause)
        }
        _ => {
            state.replay_cache.forget(key);
            return None;
        }
    };
    Some(reply.expiring(remembered.record.expires_at))
}

/// Whether the rail's rules allow the `unknown` key's next status check now (by its row: the
/// checks made and its claim's age), or its checks ran out and it is yet to be marked awaiting
/// settlement.
fn status_check_due(state: &AppState, stored: &StoredKey) -> bool {
    reconcile::next_check_at(state, stored).is_none_or(|due| stored.read_at >= due)
}

/// The key has been `started` past `stuck_after` (its attempt crashed or hangs), or it is
/// `unknown` and its next status check is due. Ask the bank now, holding the key as reconcilers
/// do, within the rail's rules, and reply with the true result.
async fn reconcile_inline(
    state: &AppState,
    key: KeyRef,
    expires_at: OffsetDateTime,
    cause: &Cause,
) -> Result<Option<RoundEnd>> {
    let busy = Some(RoundEnd::InProgress { expires_at });
    let Some(leased) = state.leases().lease_key(key, None).await? else {
        // A reconciler holds it (or it just finished): the client retries shortly.
        return Ok(busy);
    };
    let reply = match resolve_leased(state, leased, cause).await {
        Ok(Resolution::Finished(movement)) => saved_reply(&movement)?.replayed(),
        // Released: the next round finds it released and claims it again for this request.
        Ok(Resolution::Released | Resolution::Voided) => return Ok(None),
        Ok(Resolution::NotYet { next_check_at }) => outcome_pending(Some(next_check_at)),
        Ok(Resolution::AwaitingSettlement { due_at }) => awaiting_settlement(due_at),
        // The look-up outlasted the lease and another reconciler took the key over; nothing
        // was written, and the key is being resolved. The client retries shortly.
        Err(StoreError::LeaseLost) => return Ok(busy),
        Err(error) => return Err(error.into()),
    };
    Ok(Some(RoundEnd::Reply(reply.expiring(expires_at))))
}

/// The key expired: delete it so the request claims it afresh. A released key whose last check
/// for a late debit is still to come gets that check first, here, so the old claim is settled
/// (succeeded, declined or void) before the key that points at it goes.
async fn make_way_for_new_claim(
    state: &AppState,
    key: KeyRef,
    stored: &StoredKey,
    cause: &Cause,
) -> Result<Option<RoundEnd>> {
    let deleted = state
        .claims()
        .delete_expired(key, stored.record.created_at)
        .await?;
    if deleted || stored.record.state != KeyState::Released {
        return Ok(None);
    }
    let busy = Some(RoundEnd::InProgress {
        expires_at: stored.record.expires_at,
    });
    let Some(leased) = state.leases().lease_key(key, None).await? else {
        return Ok(busy);
    };
    match resolve_leased(state, leased, cause).await {
        Ok(Resolution::Finished(_) | Resolution::Voided | Resolution::Released) => Ok(None),
        Ok(Resolution::NotYet { next_check_at }) => {
            let pending = outcome_pending(Some(next_check_at)).expiring(stored.record.expires_at);
            Ok(Some(RoundEnd::Reply(pending)))
        }
        Ok(Resolution::AwaitingSettlement { due_at }) => {
            let awaiting = awaiting_settlement(due_at).expiring(stored.record.expires_at);
            Ok(Some(RoundEnd::Reply(awaiting)))
        }
        Err(StoreError::LeaseLost) => Ok(busy),
        Err(error) => Err(error.into()),
    }
}
