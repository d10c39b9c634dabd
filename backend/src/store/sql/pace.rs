//! The deployment's one pace of status checks (`status_check_pace`, a single row): every
//! replica takes the next free slot from it, so all of them together never ask the bank faster
//! than the policy's `per_second`, whatever their number.

use std::time::Duration;

use crate::store::columns::Timestamp;
use crate::store::db::{Arg, Db, Fields};
use crate::store::error::StoreError;

/// Takes the next free slot, `spacing` after the one before, if it is no further than
/// `queue_at_most` ahead; how long until it comes, or `None` when the pace is spoken for that far
/// ahead (nothing taken). Run in the transaction that counts the check, which the row's lock
/// serialises with every other replica's.
pub async fn take_slot<D: Db>(
    conn: &mut D::Connection,
    spacing: Duration,
    queue_at_most: Duration,
) -> Result<Option<Duration>, StoreError> {
    let sql = format!(
        "SELECT next_slot_at, {now} AS read_at FROM status_check_pace WHERE id = 1 {lock}",
        now = D::NOW,
        lock = D::FOR_UPDATE
    );
    let row = D::fetch_one(conn, sqlx::query(&sql)).await?;
    let fields = Fields::<D>::of(&row);
    let (next_free, now): (Timestamp, Timestamp) =
        (fields.get("next_slot_at")?, fields.get("read_at")?);
    let slot = next_free.0.max(now.0);
    let wait: Duration = (slot - now.0).try_into().unwrap_or(Duration::ZERO);
    if wait > queue_at_most {
        return Ok(None);
    }
    let taken = sqlx::query("UPDATE status_check_pace SET next_slot_at = $1 WHERE id = 1")
        .arg(Timestamp(slot + spacing));
    D::execute(conn, taken).await?;
    Ok(Some(wait))
}
