//! The steps on a key that is stored already, once the path (`shared::server_path`) has
//! decided on it: replay its saved reply from the database, ask the bank about it now (a key
//! `started` past `stuck_after`, or `unknown` with a status check due), or delete it once
//! expired so the request claims it afresh.

use shared::server_path::{Asked, Event};

use super::memory::replied_from;
use super::replies::saved_reply;
use super::work::{Work, out_of_order};
use crate::domain::EventKind;
use crate::error::Result;
use crate::metrics::Metrics;
use crate::reconcile::{Resolution, resolve_leased};
use crate::store::StoreError;

/// The trail's word for a replay read from the database.
const REPLAYED: &str = "read from the database";

/// `Step::ReplayFromDatabase`: the finished key's saved reply, rendered from its movement,
/// remembered for the next repeat, and counted and recorded in the trail.
pub(super) async fn replay(work: &mut Work) -> Result<Event> {
    let (state, key) = (&work.state, work.key.clone());
    let Some(stored) = work.stored.as_ref() else {
        return Ok(out_of_order("the stored key"));
    };
    Metrics::count(&state.metrics.replays, stored.operation.name());
    let replayed = (EventKind::Replayed, REPLAYED);
    let movement = Some(stored.movement_id);
    state
        .trail
        .observe_key(key.clone(), movement, replayed, &work.cause);
    replied_from("database");
    let saved = state.claims().saved_movement(key.clone(), stored).await?;
    let reply = saved_reply(&saved)?;
    state.replay_cache.remember(key, stored, &reply);
    work.parts.rendered = Some(reply.replayed());
    Ok(Event::Rendered)
}

/// `Step::AskBank`: asks the bank about the key now, holding its lease as reconcilers do,
/// within the rail's rules; a final word found is rendered as a replay.
pub(super) async fn ask_bank(work: &mut Work) -> Result<Event> {
    let state = &work.state;
    let Some(leased) = state.leases().lease_key(work.key.clone(), None).await? else {
        // A reconciler holds it (or it just finished).
        return Ok(Event::Asked(Asked::Busy));
    };
    let asked = match resolve_leased(state, leased, &work.cause).await {
        Ok(Resolution::Finished(movement)) => {
            work.parts.rendered = Some(saved_reply(&movement)?.replayed());
            Asked::Finished
        }
        Ok(Resolution::Released) => Asked::Released,
        Ok(Resolution::Voided) => Asked::Voided,
        Ok(Resolution::NotYet { next_check_at }) => Asked::NotYet { next_check_at },
        Ok(Resolution::AwaitingSettlement { due_at }) => Asked::AwaitingSettlement { due_at },
        // The look-up outlasted the lease and another reconciler took the key over; nothing
        // was written, and the key is being resolved.
        Err(StoreError::LeaseLost) => Asked::Busy,
        Err(error) => return Err(error.into()),
    };
    Ok(Event::Asked(asked))
}

/// `Step::DeleteExpired`: deletes the expired key so the request claims it afresh; `false` if
/// it was not deleted (a released key whose last check for a late debit is still to come: the
/// path asks the bank first, so the old claim is settled before the key that points at it goes).
pub(super) async fn delete_expired(work: &mut Work) -> Result<Event> {
    let Some(stored) = work.stored.as_ref() else {
        return Ok(out_of_order("the stored key"));
    };
    let created_at = stored.record.created_at;
    let deleted = work
        .state
        .claims()
        .delete_expired(work.key.clone(), created_at)
        .await?;
    Ok(Event::Deleted(deleted))
}
