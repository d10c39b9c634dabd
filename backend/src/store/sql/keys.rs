//! Statements on `idempotency_keys`, one function each, written once for both databases.
//!
//! Reconciliation takes a key by writing a *lease* on its row (`lease_owner`, a fresh id per
//! taking, and `lease_until`) in one statement, and every write of the bank's reply checks the
//! row still carries that owner. So no transaction and no connection is held across a bank
//! look-up, two reconcilers never hold one key, and a reconciler that died frees its keys when
//! their leases run out.

use shared::{Fingerprint, Operation, UserId};
use uuid::Uuid;

pub use super::key_row::stored_key_from_row;
use super::key_row::{StartedKey, bind_started, insert_started, read_columns};
use super::movements::saved_movement_from_joined_row;
use crate::store::columns::Subject;
use crate::store::columns::{Label, Span, Timestamp};
use crate::store::db::{Arg, Db, Fields};
use crate::store::error::StoreError;
use crate::store::types::{ClaimToken, KeyRef, Lease, StoredKey};

/// Loads the key of a user, if stored, and for a finished key its payment or refund too, in
/// the same query (one round trip for a replay: retry storms are mostly replays).
pub async fn select_key<D: Db>(
    conn: &mut D::Connection,
    key: KeyRef,
) -> Result<Option<StoredKey>, StoreError> {
    let sql = select_key_statement::<D>();
    let query = sqlx::query(&sql).arg(Subject::of(&key.user)).arg(key.key);
    let Some(row) = D::fetch_optional(conn, query).await? else {
        return Ok(None);
    };
    let mut stored = stored_key_from_row::<D>(&row)?;
    stored.saved = saved_movement_from_joined_row::<D>(&row, &stored)?.map(Box::new);
    Ok(Some(stored))
}

/// The statement of [`select_key`]: the key `($1, $2)` joined with its finished movement.
pub fn select_key_statement<D: Db>() -> String {
    format!(
        "
SELECT {}, {}
FROM idempotency_keys k
LEFT JOIN payments p
  ON k.state = 'done' AND k.operation = 'pay_bill'
     AND p.user_id = k.user_id AND p.payment_id = k.resource_id
LEFT JOIN refunds r
  ON k.state = 'done' AND k.operation = 'refund_payment'
     AND r.user_id = k.user_id AND r.refund_id = k.resource_id
WHERE k.user_id = $1 AND k.key = $2",
        read_columns::<D>("k."),
        super::movements::JOINED_COLUMNS,
    )
}

/// The claim: inserts the key as `started`, held by its claim (its lease and `claim_token`),
/// expiring `kept_for` from now by the database's clock, unless the (user, key) exists. The
/// key's expiry if this call inserted it, else `None`. Run inside the claim's transaction, never
/// around the bank call.
pub async fn insert_started_key<D: Db>(
    conn: &mut D::Connection,
    started: &StartedKey<'_>,
) -> Result<Option<time::OffsetDateTime>, StoreError> {
    let sql = insert_started::<D>();
    let query = bind_started(sqlx::query(&sql), started);
    let Some(row) = D::fetch_optional(conn, query).await? else {
        return Ok(None);
    };
    Ok(Some(Fields::<D>::of(&row).time("expires_at")?))
}

/// The assignments that mark a key finished (and free of any lease).
pub const SET_DONE: &str =
    "state = 'done', next_lookup_at = NULL, lease_owner = NULL, lease_until = NULL";

/// Marks the key finished (and free of any lease), returning it as it now stands. Only an
/// unfinished key of this movement moves, so a late writer (the request path and a reconciler
/// racing) changes nothing the first one wrote; `None` then.
pub async fn set_done<D: Db>(
    conn: &mut D::Connection,
    key: KeyRef,
    movement_id: Uuid,
) -> Result<Option<StoredKey>, StoreError> {
    let sql = format!(
        "UPDATE idempotency_keys SET {SET_DONE} \
         WHERE user_id = $1 AND key = $2 AND resource_id = $3 AND state <> 'done' \
         RETURNING {}",
        read_columns::<D>("")
    );
    let query = sqlx::query(&sql)
        .arg(Subject::of(&key.user))
        .arg(key.key)
        .arg(movement_id);
    let row = D::fetch_optional(conn, query).await?;
    row.map(|row| stored_key_from_row::<D>(&row)).transpose()
}

/// The lease columns after the claim whose token is the numbered parameter `token` lets go of
/// the key: freed if the claim holds the lease (its owner is the token), left to a reconciler
/// that took the key over.
fn let_go_of_claim(token: &str) -> String {
    format!(
        "lease_owner = CASE WHEN lease_owner = {token} THEN NULL ELSE lease_owner END, \
         lease_until = CASE WHEN lease_owner = {token} THEN NULL ELSE lease_until END"
    )
}

/// Moves a `started` key of this movement to `unknown`, due for a status check `first_check_in`
/// from now,
/// ending the claim's lease if it still holds it (a reconciler that took the key over keeps
/// its own): only while the row is still the claim `claim`'s (its `claim_token`), so the
/// attempt of a key released and claimed again since changes nothing. `true` if it moved.
pub async fn set_unknown<D: Db>(
    conn: &mut D::Connection,
    key: KeyRef,
    (movement_id, claim): (Uuid, ClaimToken),
    first_check_in: std::time::Duration,
) -> Result<bool, StoreError> {
    let sql = format!(
        "UPDATE idempotency_keys \
         SET state = 'unknown', next_lookup_at = {now} + $4, {let_go} \
         WHERE user_id = $1 AND key = $2 AND resource_id = $3 AND state = 'started' \
           AND claim_token = $5",
        now = D::NOW,
        let_go = let_go_of_claim("$5"),
    );
    let query = sqlx::query(&sql)
        .arg(Subject::of(&key.user))
        .arg(key.key)
        .arg(movement_id)
        .arg(Span(first_check_in))
        .arg(claim.id());
    Ok(D::execute(conn, query).await? == 1)
}

/// Claims a released key again for the request that released it (same fingerprint): back to
/// `started`, held by the claiming process (`claim`), stuck detection counting from now; its
/// expiry stays the first claim's. Only a claim that can still be completed is taken: the key
/// unexpired by its row, its late-debit checks not ended, no reconciler holding it, and its
/// movement still `pending` (never `void`), all in this one statement, so a last check that
/// voids the movement and a retry that re-claims it can never both succeed. Returns the
/// operation and the movement to call the bank for; `None` if any of that does not hold.
pub async fn reclaim_released_key<D: Db>(
    conn: &mut D::Connection,
    key: KeyRef,
    fingerprint: &Fingerprint,
    claim: Lease,
) -> Result<Option<(Operation, Uuid)>, StoreError> {
    let sql = format!(
        "UPDATE idempotency_keys \
         SET state = 'started', claimed_at = {now}, next_lookup_at = NULL, failed_lookups = 0, \
             lease_owner = $4, lease_until = {now} + $5, claim_token = $4 \
         WHERE user_id = $1 AND key = $2 AND state = 'released' AND fingerprint = $3 \
           AND (lease_until IS NULL OR lease_until <= {now}) \
           AND expires_at > {now} AND next_lookup_at IS NOT NULL \
           AND ((operation = 'pay_bill' AND EXISTS ( \
                    SELECT 1 FROM payments p WHERE p.user_id = $1 \
                      AND p.payment_id = idempotency_keys.resource_id AND p.status = 'pending')) \
                OR (operation = 'refund_payment' AND EXISTS ( \
                    SELECT 1 FROM refunds r WHERE r.user_id = $1 \
                      AND r.refund_id = idempotency_keys.resource_id AND r.status = 'pending'))) \
         RETURNING operation, resource_id",
        now = D::NOW
    );
    let query = sqlx::query(&sql)
        .arg(Subject::of(&key.user))
        .arg(key.key)
        .arg(fingerprint.as_bytes().to_vec())
        .arg(claim.owner)
        .arg(Span(claim.lasts));
    let Some(row) = D::fetch_optional(conn, query).await? else {
        return Ok(None);
    };
    let fields = Fields::<D>::of(&row);
    let operation: Label<Operation> = fields.get("operation")?;
    Ok(Some((operation.0, fields.get("resource_id")?)))
}

/// Deletes a key that the decision found expired, exactly as it was read (same `created_at`),
/// so that of two requests that both found it expired, only one deletes it and the other's
/// claim then finds the new row. Only a key past the expiry on its row goes, and a released
/// key only once its last check is done. `true` if deleted.
pub async fn delete_expired_key<D: Db>(
    conn: &mut D::Connection,
    key: KeyRef,
    created_at: time::OffsetDateTime,
) -> Result<bool, StoreError> {
    let sql = format!(
        "DELETE FROM idempotency_keys \
         WHERE user_id = $1 AND key = $2 AND created_at = $3 AND expires_at <= {now} \
           AND (state = 'done' OR (state = 'released' AND next_lookup_at IS NULL))",
        now = D::NOW
    );
    let query = sqlx::query(&sql)
        .arg(Subject::of(&key.user))
        .arg(key.key)
        .arg(Timestamp(created_at));
    Ok(D::execute(conn, query).await? == 1)
}

/// Deletes up to `batch_size` keys past the expiry on their rows, soonest-expired first:
/// finished keys, and released keys whose last check is done. Each batch is one short statement
/// (on PostgreSQL skipping rows another statement holds), so expiry never queues claims behind
/// it; unfinished keys are never expired (money may have moved).
pub async fn delete_expired_batch<D: Db>(
    conn: &mut D::Connection,
    batch_size: i64,
) -> Result<u64, StoreError> {
    let sql = format!(
        "DELETE FROM idempotency_keys WHERE (user_id, key) IN ( \
             SELECT user_id, key FROM idempotency_keys \
             WHERE (state = 'done' OR (state = 'released' AND next_lookup_at IS NULL)) \
               AND expires_at <= {now} \
             ORDER BY expires_at LIMIT $1 {skip_locked})",
        now = D::NOW,
        skip_locked = D::SKIP_LOCKED
    );
    let query = sqlx::query(&sql).arg(batch_size);
    Ok(D::execute(conn, query).await?)
}

/// When the oldest `started` and the oldest `unknown` key were claimed (`None` when there is
/// none), and the database's clock.
pub async fn oldest_unfinished<D: Db>(
    conn: &mut D::Connection,
) -> Result<(Option<Timestamp>, Option<Timestamp>, i64, Timestamp), StoreError> {
    let sql = format!(
        "SELECT \
           min(claimed_at) FILTER (WHERE state = 'started') AS started, \
           min(claimed_at) FILTER (WHERE state = 'unknown' AND settlement_due_at IS NULL) \
             AS unknown, \
           count(*) FILTER (WHERE settlement_due_at IS NOT NULL) AS awaiting, \
           {now} AS read_at \
         FROM idempotency_keys WHERE state IN ('started', 'unknown')",
        now = D::NOW
    );
    let row = D::fetch_one(conn, sqlx::query(&sql)).await?;
    let fields = Fields::<D>::of(&row);
    Ok((
        fields.get("started")?,
        fields.get("unknown")?,
        fields.get("awaiting")?,
        fields.get("read_at")?,
    ))
}

/// Takes `lease` on one unfinished (or released) key of a user, if nobody holds it: one
/// `UPDATE`, so two reconcilers can never both take it. `None` if it is finished, gone, held,
/// or released with its checks ended (its movement is void: nothing is left to ask).
pub async fn lease_key<D: Db>(
    conn: &mut D::Connection,
    key: KeyRef,
    lease: Lease,
) -> Result<Option<(KeyRef, StoredKey)>, StoreError> {
    let sql = format!(
        "UPDATE idempotency_keys SET lease_owner = $3, lease_until = {now} + $4 \
         WHERE user_id = $1 AND key = $2 AND state <> 'done' \
           AND NOT (state = 'released' AND next_lookup_at IS NULL) \
           AND (lease_until IS NULL OR lease_until <= {now}) \
         RETURNING {}",
        read_columns::<D>(""),
        now = D::NOW
    );
    let query = sqlx::query(&sql)
        .arg(Subject::of(&key.user))
        .arg(key.key)
        .arg(lease.owner)
        .arg(Span(lease.lasts));
    let row = D::fetch_optional(conn, query).await?;
    row.map(|row| leased_key_from_row::<D>(&row)).transpose()
}

/// Renews the claim's lease `claim` on a `started` key for another [`Lease::lasts`]: the
/// holder is alive and its bank call still runs. `false` if the key moved on or another took it.
pub async fn renew_claim<D: Db>(
    conn: &mut D::Connection,
    key: KeyRef,
    claim: Lease,
) -> Result<bool, StoreError> {
    let sql = format!(
        "UPDATE idempotency_keys SET lease_until = {now} + $4 \
         WHERE user_id = $1 AND key = $2 AND state = 'started' AND lease_owner = $3",
        now = D::NOW
    );
    let query = sqlx::query(&sql)
        .arg(Subject::of(&key.user))
        .arg(key.key)
        .arg(claim.owner)
        .arg(Span(claim.lasts));
    Ok(D::execute(conn, query).await? == 1)
}

/// Takes `lease` on the oldest keys due for a bank look-up, at most `limit`: an `unknown` key,
/// or a `started` key claimed more than `stuck_after` ago, or whose claim's lease lapsed (its
/// holder died mid-call), or already being asked about (it has a next look-up), whose back-off
/// has passed; or a `released` key whose next check for a late debit has come; in each case
/// only if nobody holds it. The choice and the lease are one statement, so reconcilers (on every
/// replica) never take the same key, and none ever waits behind another's bank look-up. Each
/// key taken, or why its row could not be read (naming the key where it can).
pub async fn lease_due_keys<D: Db>(
    conn: &mut D::Connection,
    stuck_after: std::time::Duration,
    lease: Lease,
    limit: usize,
) -> Result<Vec<Result<(KeyRef, StoredKey), StoreError>>, StoreError> {
    let sql = format!(
        "UPDATE idempotency_keys SET lease_owner = $2, lease_until = {now} + $3 \
         WHERE (user_id, key) IN ( \
             SELECT user_id, key FROM idempotency_keys \
             WHERE state <> 'done' AND settlement_due_at IS NULL \
               AND (((state = 'unknown' \
                      OR (state = 'started' \
                          AND (claimed_at <= {now} - $1 OR lease_until IS NOT NULL \
                               OR next_lookup_at IS NOT NULL))) \
                     AND (next_lookup_at IS NULL OR next_lookup_at <= {now})) \
                    OR (state = 'released' AND next_lookup_at <= {now})) \
               AND (lease_until IS NULL OR lease_until <= {now}) \
             ORDER BY claimed_at LIMIT $4 {skip_locked}) \
         RETURNING {}",
        read_columns::<D>(""),
        now = D::NOW,
        skip_locked = D::SKIP_LOCKED
    );
    let query = sqlx::query(&sql)
        .arg(Span(stuck_after))
        .arg(lease.owner)
        .arg(Span(lease.lasts))
        .arg(i64::try_from(limit).unwrap_or(i64::MAX));
    let rows = D::fetch_all(conn, query).await?;
    let mut taken: Vec<_> = rows
        .iter()
        .map(|row| leased_key_from_row::<D>(row).map_err(|error| naming_the_key::<D>(row, error)))
        .collect();
    // `RETURNING` keeps no order: the oldest claim first, as chosen (unreadable rows last).
    taken.sort_by_key(|taken| {
        let claimed_at = taken
            .as_ref()
            .ok()
            .map(|(_, stored)| stored.record.claimed_at);
        (claimed_at.is_none(), claimed_at)
    });
    Ok(taken)
}

/// `error`, read from `row`, with the row's key named if its user and key can be read.
fn naming_the_key<D: Db>(row: &D::Row, error: StoreError) -> StoreError {
    let fields = Fields::<D>::of(row);
    match (fields.get::<i64>("user_id"), fields.get::<Uuid>("key")) {
        (Ok(user), Ok(key)) => StoreError::Corrupt(format!("key {key} of user {user}: {error}")),
        _ => error,
    }
}

/// Ends the lease `owner` holds on the key; `false` if it ran out and another reconciler took
/// the key (then that one's work stands). Run in the transaction that writes the result.
pub async fn end_lease<D: Db>(
    conn: &mut D::Connection,
    key: KeyRef,
    owner: Uuid,
) -> Result<bool, StoreError> {
    let query = sqlx::query(
        "UPDATE idempotency_keys SET lease_owner = NULL, lease_until = NULL \
         WHERE user_id = $1 AND key = $2 AND lease_owner = $3",
    )
    .arg(Subject::of(&key.user))
    .arg(key.key)
    .arg(owner);
    Ok(D::execute(conn, query).await? == 1)
}

/// Sets when to ask the bank next (`failed` = 1: a failed look-up, which also counts towards
/// the back-off) and ends `owner`'s lease. `false` if the lease had been taken over.
pub async fn schedule_lookup<D: Db>(
    conn: &mut D::Connection,
    key: KeyRef,
    owner: Uuid,
    wait: std::time::Duration,
    failed: i16,
) -> Result<bool, StoreError> {
    let sql = format!(
        "UPDATE idempotency_keys \
         SET failed_lookups = CASE WHEN failed_lookups + $4 > 1000 THEN 1000 \
                                   ELSE failed_lookups + $4 END, \
             next_lookup_at = {now} + $5, lease_owner = NULL, lease_until = NULL \
         WHERE user_id = $1 AND key = $2 AND lease_owner = $3",
        now = D::NOW
    );
    let query = sqlx::query(&sql)
        .arg(Subject::of(&key.user))
        .arg(key.key)
        .arg(owner)
        .arg(failed)
        .arg(Span(wait));
    Ok(D::execute(conn, query).await? == 1)
}

/// Counts one more status check on the key `owner` leases, unless it has had `at_most`; `true`
/// if counted. Run in the transaction that takes the check's slot of the pace, before the check
/// is sent: a check that went and whose reply was lost still counts.
pub async fn count_status_check<D: Db>(
    conn: &mut D::Connection,
    key: KeyRef,
    owner: Uuid,
    at_most: u16,
) -> Result<bool, StoreError> {
    let sql = format!(
        "UPDATE idempotency_keys \
         SET status_checks = status_checks + 1, last_status_check_at = {now} \
         WHERE user_id = $1 AND key = $2 AND lease_owner = $3 AND status_checks < $4",
        now = D::NOW
    );
    let query = sqlx::query(&sql)
        .arg(Subject::of(&key.user))
        .arg(key.key)
        .arg(owner)
        .arg(i16::try_from(at_most).unwrap_or(i16::MAX));
    Ok(D::execute(conn, query).await? == 1)
}

/// Sets an unfinished key of this movement, whose checks ran out undecided, to wait for the
/// bank's settlement file due `due_in` from now (or when it was already due, for a key that
/// waits already): `unknown`, never due for a check again, and ends `owner`'s lease. When the
/// file is due; `None` if the lease had been taken over.
pub async fn await_settlement<D: Db>(
    conn: &mut D::Connection,
    key: KeyRef,
    (movement_id, owner): (Uuid, Uuid),
    due_in: std::time::Duration,
) -> Result<Option<Timestamp>, StoreError> {
    let sql = format!(
        "UPDATE idempotency_keys \
         SET state = 'unknown', settlement_due_at = COALESCE(settlement_due_at, {now} + $5), \
             next_lookup_at = NULL, lease_owner = NULL, lease_until = NULL \
         WHERE user_id = $1 AND key = $2 AND resource_id = $3 \
           AND state IN ('started', 'unknown') AND lease_owner = $4 \
         RETURNING settlement_due_at",
        now = D::NOW
    );
    let query = sqlx::query(&sql)
        .arg(Subject::of(&key.user))
        .arg(key.key)
        .arg(movement_id)
        .arg(owner)
        .arg(Span(due_in));
    let Some(row) = D::fetch_optional(conn, query).await? else {
        return Ok(None);
    };
    Ok(Some(Fields::<D>::of(&row).get("settlement_due_at")?))
}

/// Releases an unfinished key of this movement (the bank never saw its reference), with its
/// first check for a late debit `check_after` from now, and ends `owner`'s lease. The key and
/// its movement stay. `false` if the lease had been taken over.
pub async fn set_released<D: Db>(
    conn: &mut D::Connection,
    key: KeyRef,
    movement_id: Uuid,
    owner: Uuid,
    check_after: std::time::Duration,
) -> Result<bool, StoreError> {
    let sql = format!(
        "UPDATE idempotency_keys \
         SET state = 'released', failed_lookups = 0, bank_call_ended = false, \
             next_lookup_at = {now} + $5, lease_owner = NULL, lease_until = NULL \
         WHERE user_id = $1 AND key = $2 AND resource_id = $3 \
           AND state IN ('started', 'unknown') AND lease_owner = $4",
        now = D::NOW
    );
    let query = sqlx::query(&sql)
        .arg(Subject::of(&key.user))
        .arg(key.key)
        .arg(movement_id)
        .arg(owner)
        .arg(Span(check_after));
    Ok(D::execute(conn, query).await? == 1)
}

/// Releases a `started` key of this movement whose bank call the claim `claim` never sent,
/// with its first check for a late debit `stuck_after` from now, ending the claim's lease if
/// it still holds it. Only while the row is still that claim's (its `claim_token`: not released
/// and claimed again since; a reconciler asking the bank meanwhile does not change it, and
/// finds the key released when it writes) and younger than `stuck_after` by its `claimed_at`,
/// on the database's clock: past that, reconciliation decides. `true` if it did.
pub async fn release_unsent_claim<D: Db>(
    conn: &mut D::Connection,
    key: KeyRef,
    (movement_id, claim): (Uuid, ClaimToken),
    stuck_after: std::time::Duration,
) -> Result<bool, StoreError> {
    let sql = format!(
        "UPDATE idempotency_keys \
         SET state = 'released', failed_lookups = 0, next_lookup_at = {now} + $4, {let_go} \
         WHERE user_id = $1 AND key = $2 AND resource_id = $3 AND state = 'started' \
           AND claim_token = $5 AND claimed_at > {now} - $4",
        now = D::NOW,
        let_go = let_go_of_claim("$5"),
    );
    let query = sqlx::query(&sql)
        .arg(Subject::of(&key.user))
        .arg(key.key)
        .arg(movement_id)
        .arg(Span(stuck_after))
        .arg(claim.id());
    Ok(D::execute(conn, query).await? == 1)
}

/// Ends a released key's checks (its last look-up found nothing at the bank), so it may now
/// expire; run after [`end_lease`] in the transaction that makes its movement `void`.
pub async fn end_checks<D: Db>(
    conn: &mut D::Connection,
    key: KeyRef,
    movement_id: Uuid,
) -> Result<(), StoreError> {
    let query = sqlx::query(
        "UPDATE idempotency_keys SET next_lookup_at = NULL \
         WHERE user_id = $1 AND key = $2 AND resource_id = $3 AND state = 'released'",
    )
    .arg(Subject::of(&key.user))
    .arg(key.key)
    .arg(movement_id);
    D::execute(conn, query).await?;
    Ok(())
}

/// The key whose claim made the movement `movement_id` of `user_id`, if it is still kept.
pub async fn key_of_movement<D: Db>(
    conn: &mut D::Connection,
    user_id: UserId,
    movement_id: Uuid,
) -> Result<Option<KeyRef>, StoreError> {
    let query =
        sqlx::query("SELECT key FROM idempotency_keys WHERE user_id = $1 AND resource_id = $2")
            .arg(Subject::of(&user_id))
            .arg(movement_id);
    let Some(row) = D::fetch_optional(conn, query).await? else {
        return Ok(None);
    };
    Ok(Some(KeyRef {
        user: user_id,
        key: Fields::<D>::of(&row).get("key")?,
    }))
}

fn leased_key_from_row<D: Db>(row: &D::Row) -> Result<(KeyRef, StoredKey), StoreError> {
    let fields = Fields::<D>::of(row);
    let key = KeyRef {
        user: fields.get::<Subject>("user_id")?.0,
        key: fields.get("key")?,
    };
    Ok((key, stored_key_from_row::<D>(row)?))
}
