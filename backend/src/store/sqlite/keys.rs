//! Statements on SQLite's `idempotency_keys`, one function each: the PostgreSQL statements'
//! counterparts, plus the reconciliation lease that stands in for `FOR UPDATE SKIP LOCKED`.

use shared::{Fingerprint, KeyState, Operation, StoredRecord, UserId};
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqliteConnection};
use uuid::Uuid;

use super::timestamps::{NOW, from_micros, to_micros};
use crate::store::error::StoreError;
use crate::store::joined_rows::saved_movement_from_row;
use crate::store::types::{KeyRef, LookupHistory, StoredKey};

/// A key taken for reconciliation: the key, its row, its look-up history, and the lease value
/// that proves the taker still holds it.
pub(super) struct LeasedKey {
    pub key: KeyRef,
    pub stored: StoredKey,
    pub history: LookupHistory,
    pub lease_until: i64,
}

/// The columns `stored_key_from_row` reads, of the table named `table` (`"k."` or `""`, as
/// `RETURNING` takes no alias), plus the database clock.
fn key_columns(table: &str) -> String {
    format!(
        "{table}user_id, {table}key, {table}operation, {table}state, {table}fingerprint, \
         {table}resource_id, {table}created_at, {table}claimed_at, {table}failed_lookups, \
         {table}lease_until, {table}bank_call_ended, {NOW} AS read_at"
    )
}

/// Loads the key of a user, if stored, and for a finished key its payment or refund too (one
/// query for a replay, as on PostgreSQL).
pub(super) async fn select_key(
    conn: &mut SqliteConnection,
    key: KeyRef,
) -> Result<Option<StoredKey>, StoreError> {
    let sql = format!(
        "SELECT {}, \
           p.bill_id AS p_bill_id, p.amount_paise AS p_amount_paise, p.payer_vpa AS p_payer_vpa, \
           p.status AS p_status, p.bank_reference AS p_bank_reference, \
           p.decline_reason AS p_decline_reason, \
           r.payment_id AS r_payment_id, r.amount_paise AS r_amount_paise, r.status AS r_status, \
           r.bank_reference AS r_bank_reference, r.debit_reference AS r_debit_reference, \
           r.decline_reason AS r_decline_reason \
         FROM idempotency_keys k \
         LEFT JOIN payments p \
           ON k.state = 'done' AND k.operation = 'pay_bill' \
              AND p.user_id = k.user_id AND p.payment_id = k.resource_id \
         LEFT JOIN refunds r \
           ON k.state = 'done' AND k.operation = 'refund_payment' \
              AND r.user_id = k.user_id AND r.refund_id = k.resource_id \
         WHERE k.user_id = ?1 AND k.key = ?2",
        key_columns("k.")
    );
    let row = sqlx::query(&sql)
        .bind(key.user.as_i64())
        .bind(key.key)
        .fetch_optional(conn)
        .await?;
    row.map(|row| {
        let mut stored = stored_key_from_row(&row)?;
        stored.saved = saved_movement_from_row(&row, &stored)?.map(Box::new);
        Ok(stored)
    })
    .transpose()
}

/// Takes the lease on one unfinished (or released) key of a user, if nobody holds it: one
/// `UPDATE`, so two reconcilers can never both take it. `None` if it is finished, gone, or
/// leased.
pub(super) async fn lease_unfinished_key(
    conn: &mut SqliteConnection,
    key: KeyRef,
    lease_micros: i64,
) -> Result<Option<LeasedKey>, StoreError> {
    let sql = format!(
        "UPDATE idempotency_keys SET lease_until = {NOW} + ?3 \
         WHERE user_id = ?1 AND key = ?2 AND state <> 'done' \
           AND (lease_until IS NULL OR lease_until <= {NOW}) \
         RETURNING {}",
        key_columns("")
    );
    let row = sqlx::query(&sql)
        .bind(key.user.as_i64())
        .bind(key.key)
        .bind(lease_micros)
        .fetch_optional(conn)
        .await?;
    row.map(|row| leased_key_from_row(&row)).transpose()
}

/// Takes the lease on the oldest key due for a bank look-up (any `unknown` key, or a `started`
/// key claimed more than `stuck_after` ago, whose back-off has passed; or a `released` key whose
/// next check for a late debit has come; in each case only if its lease is free). The choice
/// and the lease are one statement under SQLite's write lock, so reconcilers never take the
/// same key, and none ever waits behind another's bank look-up.
pub(super) async fn lease_next_due_key(
    conn: &mut SqliteConnection,
    stuck_after_micros: i64,
    lease_micros: i64,
) -> Result<Option<LeasedKey>, StoreError> {
    let sql = format!(
        "UPDATE idempotency_keys SET lease_until = {NOW} + ?2 \
         WHERE rowid = ( \
             SELECT rowid FROM idempotency_keys \
             WHERE state <> 'done' \
               AND ((state = 'unknown' \
                     OR (state = 'started' AND claimed_at <= {NOW} - ?1)) \
                    AND (next_lookup_at IS NULL OR next_lookup_at <= {NOW}) \
                 OR (state = 'released' AND next_lookup_at <= {NOW})) \
               AND (lease_until IS NULL OR lease_until <= {NOW}) \
             ORDER BY claimed_at LIMIT 1) \
         RETURNING {}",
        key_columns("")
    );
    let row = sqlx::query(&sql)
        .bind(stuck_after_micros)
        .bind(lease_micros)
        .fetch_optional(conn)
        .await?;
    row.map(|row| leased_key_from_row(&row)).transpose()
}

/// Ends a lease that is still `lease_until`; `false` if it ran out and another reconciler took
/// the key (then that one's work stands). Run in the transaction that writes the result.
pub(super) async fn end_lease(
    conn: &mut SqliteConnection,
    key: KeyRef,
    lease_until: i64,
) -> Result<bool, StoreError> {
    let result = sqlx::query(
        "UPDATE idempotency_keys SET lease_until = NULL \
         WHERE user_id = ?1 AND key = ?2 AND lease_until = ?3",
    )
    .bind(key.user.as_i64())
    .bind(key.key)
    .bind(lease_until)
    .execute(conn)
    .await?;
    Ok(result.rows_affected() == 1)
}

/// The claim: inserts the key as `started` unless the (user, key) exists. `true` if this call
/// inserted it. Run inside the claim's transaction, never around the bank call.
pub(super) async fn insert_started_key(
    conn: &mut SqliteConnection,
    key: KeyRef,
    operation: Operation,
    fingerprint: &Fingerprint,
    resource_id: Uuid,
) -> Result<bool, StoreError> {
    let inserted = sqlx::query(
        "INSERT INTO idempotency_keys (user_id, key, operation, state, fingerprint, resource_id) \
         VALUES (?1, ?2, ?3, 'started', ?4, ?5) \
         ON CONFLICT (user_id, key) DO NOTHING RETURNING 1",
    )
    .bind(key.user.as_i64())
    .bind(key.key)
    .bind(operation.name())
    .bind(fingerprint.as_bytes().as_slice())
    .bind(resource_id)
    .fetch_optional(conn)
    .await?;
    Ok(inserted.is_some())
}

/// Marks the key finished. Only an unfinished key of this resource moves, so a late writer (the
/// request path and a reconciler racing) changes nothing the first one wrote.
pub(super) async fn set_done(
    conn: &mut SqliteConnection,
    key: KeyRef,
    resource_id: Uuid,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE idempotency_keys SET state = 'done', next_lookup_at = NULL, lease_until = NULL \
         WHERE user_id = ?1 AND key = ?2 AND resource_id = ?3 AND state <> 'done'",
    )
    .bind(key.user.as_i64())
    .bind(key.key)
    .bind(resource_id)
    .execute(conn)
    .await?;
    Ok(())
}

/// Moves a `started` key to `unknown`, due for a bank look-up `due_in_micros` from now;
/// `call_ended` records whether the bank call ended with a definite answer. `true` if it moved.
pub(super) async fn set_unknown(
    conn: &mut SqliteConnection,
    key: KeyRef,
    resource_id: Uuid,
    call_ended: bool,
    due_in_micros: i64,
) -> Result<bool, StoreError> {
    let sql = format!(
        "UPDATE idempotency_keys \
         SET state = 'unknown', next_lookup_at = {NOW} + ?5, bank_call_ended = ?4 \
         WHERE user_id = ?1 AND key = ?2 AND resource_id = ?3 AND state = 'started'"
    );
    let result = sqlx::query(&sql)
        .bind(key.user.as_i64())
        .bind(key.key)
        .bind(resource_id)
        .bind(call_ended)
        .bind(due_in_micros)
        .execute(conn)
        .await?;
    Ok(result.rows_affected() == 1)
}

/// Sets when to ask the bank next (a failed look-up, `failed` = 1, also counts towards the
/// back-off) and ends the lease, if it is still `lease_until`. `false` if the lease had been
/// taken over.
pub(super) async fn schedule_lookup(
    conn: &mut SqliteConnection,
    key: KeyRef,
    lease_until: i64,
    wait_micros: i64,
    failed: i16,
) -> Result<bool, StoreError> {
    let sql = format!(
        "UPDATE idempotency_keys \
         SET failed_lookups = min(failed_lookups + ?5, 1000), \
             next_lookup_at = {NOW} + ?4, lease_until = NULL \
         WHERE user_id = ?1 AND key = ?2 AND lease_until = ?3"
    );
    let result = sqlx::query(&sql)
        .bind(key.user.as_i64())
        .bind(key.key)
        .bind(lease_until)
        .bind(wait_micros)
        .bind(failed)
        .execute(conn)
        .await?;
    Ok(result.rows_affected() == 1)
}

/// Releases an unfinished key of this resource (the bank never saw its reference), with its
/// first check for a late debit `check_after_micros` from now, and ends the lease, if it is
/// still `lease_until`. The key and its movement stay. `false` if the lease had been taken
/// over.
pub(super) async fn set_released(
    conn: &mut SqliteConnection,
    key: KeyRef,
    resource_id: Uuid,
    lease_until: i64,
    check_after_micros: i64,
) -> Result<bool, StoreError> {
    let sql = format!(
        "UPDATE idempotency_keys \
         SET state = 'released', failed_lookups = 0, bank_call_ended = 0, \
             next_lookup_at = {NOW} + ?5, lease_until = NULL \
         WHERE user_id = ?1 AND key = ?2 AND resource_id = ?3 \
           AND state IN ('started', 'unknown') AND lease_until = ?4"
    );
    let result = sqlx::query(&sql)
        .bind(key.user.as_i64())
        .bind(key.key)
        .bind(resource_id)
        .bind(lease_until)
        .bind(check_after_micros)
        .execute(conn)
        .await?;
    Ok(result.rows_affected() == 1)
}

/// Ends a released key's checks (its last look-up found nothing at the bank), so it may now
/// expire; run after `end_lease` in the transaction that makes its movement `void`.
pub(super) async fn end_checks(
    conn: &mut SqliteConnection,
    key: KeyRef,
    resource_id: Uuid,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE idempotency_keys SET next_lookup_at = NULL \
         WHERE user_id = ?1 AND key = ?2 AND resource_id = ?3 AND state = 'released'",
    )
    .bind(key.user.as_i64())
    .bind(key.key)
    .bind(resource_id)
    .execute(conn)
    .await?;
    Ok(())
}

/// Claims a released key again for the request that released it (same fingerprint): back to
/// `started`, stuck detection counting from now; a key leased by a reconciler is left alone.
/// Returns the operation and the movement to call the bank for; `None` if the key is not
/// released (any more), belongs to another request, or is being checked.
pub(super) async fn reclaim_released_key(
    conn: &mut SqliteConnection,
    key: KeyRef,
    fingerprint: &Fingerprint,
) -> Result<Option<(Operation, Uuid)>, StoreError> {
    let sql = format!(
        "UPDATE idempotency_keys \
         SET state = 'started', claimed_at = {NOW}, next_lookup_at = NULL, failed_lookups = 0 \
         WHERE user_id = ?1 AND key = ?2 AND state = 'released' AND fingerprint = ?3 \
           AND (lease_until IS NULL OR lease_until <= {NOW}) \
         RETURNING operation, resource_id"
    );
    let row = sqlx::query(&sql)
        .bind(key.user.as_i64())
        .bind(key.key)
        .bind(fingerprint.as_bytes().as_slice())
        .fetch_optional(conn)
        .await?;
    row.map(|row| {
        let operation: String = row.try_get("operation")?;
        let operation = Operation::from_name(&operation)
            .ok_or_else(|| StoreError::Corrupt(format!("unknown operation {operation:?}")))?;
        Ok((operation, row.try_get("resource_id")?))
    })
    .transpose()
}

/// Deletes a key that the decision found expired, exactly as it was read (same `created_at`),
/// so that of two requests that both found it expired, only one deletes it and the other's
/// claim then finds the new row. A released key goes only once its last check is done. `true`
/// if deleted.
pub(super) async fn delete_expired_key(
    conn: &mut SqliteConnection,
    key: KeyRef,
    created_at: time::OffsetDateTime,
) -> Result<bool, StoreError> {
    let result = sqlx::query(
        "DELETE FROM idempotency_keys \
         WHERE user_id = ?1 AND key = ?2 AND created_at = ?3 \
           AND (state = 'done' OR (state = 'released' AND next_lookup_at IS NULL))",
    )
    .bind(key.user.as_i64())
    .bind(key.key)
    .bind(to_micros(created_at))
    .execute(conn)
    .await?;
    Ok(result.rows_affected() == 1)
}

/// Deletes up to `batch_size` expired keys older than `keep_for_micros`, oldest first, in one
/// statement by rowid: finished keys, and released keys whose last check is done. Each batch is
/// its own short write, so claims queue behind at most one batch; unfinished keys are never
/// expired (money may have moved).
pub(super) async fn delete_expired_batch(
    conn: &mut SqliteConnection,
    keep_for_micros: i64,
    batch_size: i64,
) -> Result<u64, StoreError> {
    let sql = format!(
        "DELETE FROM idempotency_keys WHERE rowid IN ( \
             SELECT rowid FROM idempotency_keys \
             WHERE (state = 'done' OR (state = 'released' AND next_lookup_at IS NULL)) \
               AND created_at < {NOW} - ?1 \
             ORDER BY created_at LIMIT ?2)"
    );
    let result = sqlx::query(&sql)
        .bind(keep_for_micros)
        .bind(batch_size)
        .execute(conn)
        .await?;
    Ok(result.rows_affected())
}

/// The ages, in microseconds, of the oldest `started` and the oldest `unknown` key (0 when
/// none).
pub(super) async fn oldest_unfinished_ages(
    conn: &mut SqliteConnection,
) -> Result<(i64, i64), StoreError> {
    let sql = format!(
        "SELECT \
           COALESCE({NOW} - min(claimed_at) FILTER (WHERE state = 'started'), 0) AS started, \
           COALESCE({NOW} - min(claimed_at) FILTER (WHERE state = 'unknown'), 0) AS unknown \
         FROM idempotency_keys WHERE state <> 'done'"
    );
    let row = sqlx::query(&sql).fetch_one(conn).await?;
    Ok((row.try_get("started")?, row.try_get("unknown")?))
}

fn leased_key_from_row(row: &SqliteRow) -> Result<LeasedKey, StoreError> {
    let key = KeyRef {
        user: UserId::from_i64(row.try_get("user_id")?)
            .ok_or_else(|| StoreError::Corrupt("user_id is not positive".to_owned()))?,
        key: row.try_get("key")?,
    };
    Ok(LeasedKey {
        key,
        stored: stored_key_from_row(row)?,
        history: LookupHistory {
            failed_lookups: row.try_get("failed_lookups")?,
            bank_call_ended: row.try_get("bank_call_ended")?,
        },
        lease_until: row.try_get("lease_until")?,
    })
}

fn stored_key_from_row(row: &SqliteRow) -> Result<StoredKey, StoreError> {
    let operation: String = row.try_get("operation")?;
    let state: String = row.try_get("state")?;
    let fingerprint: Vec<u8> = row.try_get("fingerprint")?;
    Ok(StoredKey {
        record: StoredRecord {
            fingerprint: Fingerprint::from_slice(&fingerprint)
                .ok_or_else(|| StoreError::Corrupt("fingerprint is not 32 bytes".to_owned()))?,
            state: KeyState::from_name(&state)
                .ok_or_else(|| StoreError::Corrupt(format!("unknown key state {state:?}")))?,
            created_at: from_micros(row.try_get("created_at")?)?,
            claimed_at: from_micros(row.try_get("claimed_at")?)?,
        },
        operation: Operation::from_name(&operation)
            .ok_or_else(|| StoreError::Corrupt(format!("unknown operation {operation:?}")))?,
        resource_id: row.try_get("resource_id")?,
        read_at: from_micros(row.try_get("read_at")?)?,
        saved: None,
    })
}
