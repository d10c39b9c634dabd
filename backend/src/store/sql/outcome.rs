//! The bank's final word written as SPEC §5 invariant 4 requires: the movement's outcome and
//! the key's `done` state together, in the caller's transaction. Written once for both
//! databases; the request path's common case is one statement on PostgreSQL and one statement
//! string on SQLite instead (`store::claims`), and this is their fallback.

use shared::Operation;
use shared::api::MovementStatus;
use uuid::Uuid;

use super::{events, keys, movements};
use crate::domain::{Cause, EventKind, NewEvent};
use crate::store::db::Db;
use crate::store::error::StoreError;
use crate::store::types::{FinalOutcome, Finished, KeyRef};

/// The movement's final word and the key's `done` state, in the caller's transaction; its
/// change is announced on commit and recorded in the trail as `event` (against
/// `cause`). Only a `pending` movement is written. One that a racing writer already
/// finished keeps that writer's reply, which the key then finishes with (if it had not). A
/// `void` one (a released claim's last check found nothing at the bank) changes nothing, the
/// key least of all: a key is never `done` without a reply to replay. `None` if the movement
/// does not exist.
pub async fn finish_in<D: Db>(
    conn: &mut D::Connection,
    key: KeyRef,
    (operation, movement_id): (Operation, Uuid),
    result: &FinalOutcome,
    event: EventKind,
    cause: &Cause,
) -> Result<Option<Finished>, StoreError> {
    let user_id = key.user.clone();
    let movement = match movements::finish::<D>(
        conn,
        operation,
        user_id.clone(),
        movement_id,
        result,
    )
    .await?
    {
        Some(moved) => moved,
        None => {
            match movements::select::<D>(conn, operation, user_id.clone(), movement_id).await? {
                // A racing writer saved the bank's word first: that reply stands, and the key
                // finishes with it if it has not yet.
                Some(replied)
                    if matches!(
                        replied.status(),
                        MovementStatus::Succeeded | MovementStatus::Declined
                    ) =>
                {
                    replied
                }
                // Void (a released claim's last check found nothing at the bank): no reply to
                // give, so no key may finish on it.
                Some(void) => {
                    return Ok(Some(Finished {
                        movement: void,
                        key: None,
                    }));
                }
                None => return Ok(None),
            }
        }
    };
    let key_now = keys::set_done::<D>(conn, key.clone(), movement_id).await?;
    if key_now.is_some() {
        let event = NewEvent::of_claim(
            (user_id, key.key, movement_id),
            event,
            Some(result.describe()),
            cause,
        );
        events::append::<D>(conn, &event).await?;
    }
    D::announce_change(conn, key).await?;
    Ok(Some(Finished {
        movement,
        key: key_now,
    }))
}
