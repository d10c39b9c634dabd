//! The bank's final word written as SPEC §5 invariant 4 requires: the movement's outcome and
//! the key's `done` state together, in the caller's transaction. Written once for both
//! databases; on PostgreSQL the request path's common case is one statement instead
//! ([`crate::store::postgres`]), and this is its fallback.

use shared::Operation;
use uuid::Uuid;

use super::{keys, movements};
use crate::store::db::Db;
use crate::store::error::StoreError;
use crate::store::types::{Finished, KeyRef, MovementResult};

/// The movement's final word and the key's `done` state, in the caller's transaction; the key
/// moves only if the movement exists, and its change is announced on commit. `None` if the
/// movement does not exist.
pub async fn finish_in<D: Db>(
    conn: &mut D::Connection,
    key: KeyRef,
    operation: Operation,
    resource_id: Uuid,
    result: &MovementResult,
) -> Result<Option<Finished>, StoreError> {
    let user_id = key.user.as_i64();
    let Some(movement) =
        movements::finish::<D>(conn, operation, user_id, resource_id, result).await?
    else {
        return Ok(None);
    };
    let key_now = keys::set_done::<D>(conn, key, resource_id).await?;
    D::announce_change(conn, key).await?;
    Ok(Some(Finished {
        movement,
        key: key_now,
    }))
}
