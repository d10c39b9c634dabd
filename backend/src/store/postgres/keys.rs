//! Statements on PostgreSQL's `idempotency_keys`, one function each. States are written and read as text and
//! mapped through `shared::KeyState`, so the enum's names live in one place.

use shared::{Fingerprint, KeyState, Operation, StoredRecord};
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::store::error::StoreError;
use crate::store::joined_rows::saved_movement_from_row;
use crate::store::types::{KeyRef, LookupHistory, StoredKey};

/// The columns `stored_key_from_row` reads, plus the database clock.
const KEY_COLUMNS: &str = "k.user_id, k.key, k.operation::text AS operation, \
     k.state::text AS state, k.fingerprint, k.resource_id, k.created_at, k.claimed_at, \
     k.failed_lookups, k.bank_call_ended, now() AS read_at";

/// Loads the key of a user, if stored, and for a finished key its payment or refund too (one
/// round trip for a replay: retry storms are mostly replays).
pub(super) async fn select_key(
    conn: &mut PgConnection,
    key: KeyRef,
) -> Result<Option<StoredKey>, StoreError> {
    let sql = format!(
        "SELECT {KEY_COLUMNS}, \
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
         WHERE k.user_id = $1 AND k.key = $2"
    );
    let row = sqlx::query(&sql)
        .bind(user_id(key))
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

/// Locks one unfinished (or released) key of a user for reconciliation; `None` if it is
/// finished, gone, or already locked by another reconciler (`SKIP LOCKED`: never wait behind a
/// bank look-up).
pub(super) async fn lock_unfinished_key(
    conn: &mut PgConnection,
    key: KeyRef,
) -> Result<Option<(StoredKey, LookupHistory)>, StoreError> {
    let sql = format!(
        "SELECT {KEY_COLUMNS} FROM idempotency_keys k \
         WHERE user_id = $1 AND key = $2 AND state <> 'done' FOR UPDATE SKIP LOCKED"
    );
    let row = sqlx::query(&sql)
        .bind(user_id(key))
        .bind(key.key)
        .fetch_optional(conn)
        .await?;
    row.map(|row| Ok((stored_key_from_row(&row)?, lookup_history_from_row(&row)?)))
        .transpose()
}

/// Locks the oldest key due for a bank look-up: any `unknown` key, or a `started` key whose
/// claim is older than `stuck_after`, whose back-off has passed; or a `released` key whose next
/// check for a late debit has come. `SKIP LOCKED` lets every replica run this at once without
/// two of them taking the same row.
pub(super) async fn lock_next_due_key(
    conn: &mut PgConnection,
    stuck_after_seconds: f64,
) -> Result<Option<(KeyRef, StoredKey, LookupHistory)>, StoreError> {
    let sql = format!(
        "SELECT {KEY_COLUMNS} FROM idempotency_keys k \
         WHERE state <> 'done' \
           AND (((state = 'unknown' \
                  OR (state = 'started' AND claimed_at <= now() - make_interval(secs => $1))) \
                 AND (next_lookup_at IS NULL OR next_lookup_at <= now())) \
                OR (state = 'released' AND next_lookup_at <= now())) \
         ORDER BY claimed_at LIMIT 1 FOR UPDATE SKIP LOCKED"
    );
    let row = sqlx::query(&sql)
        .bind(stuck_after_seconds)
        .fetch_optional(conn)
        .await?;
    row.map(|row| {
        let key = KeyRef {
            user: shared::UserId::from_i64(row.try_get("user_id")?)
                .ok_or_else(|| StoreError::Corrupt("user_id is not positive".to_owned()))?,
            key: row.try_get("key")?,
        };
        Ok((
            key,
            stored_key_from_row(&row)?,
            lookup_history_from_row(&row)?,
        ))
    })
    .transpose()
}

/// The claim: inserts the key as `started` unless the (user, key) exists. `true` if this call
/// inserted it. Run inside the claim's transaction or statement, never around the bank call.
pub(super) async fn insert_started_key(
    conn: &mut PgConnection,
    key: KeyRef,
    operation: Operation,
    fingerprint: &Fingerprint,
    resource_id: Uuid,
) -> Result<bool, StoreError> {
    let inserted = sqlx::query(
        "INSERT INTO idempotency_keys (user_id, key, operation, state, fingerprint, resource_id) \
         VALUES ($1, $2, $3::idempotent_operation, 'started', $4, $5) \
         ON CONFLICT (user_id, key) DO NOTHING RETURNING 1",
    )
    .bind(user_id(key))
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
    conn: &mut PgConnection,
    key: KeyRef,
    resource_id: Uuid,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE idempotency_keys SET state = 'done', next_lookup_at = NULL \
         WHERE user_id = $1 AND key = $2 AND resource_id = $3 AND state <> 'done'",
    )
    .bind(user_id(key))
    .bind(key.key)
    .bind(resource_id)
    .execute(conn)
    .await?;
    Ok(())
}

/// Moves a `started` key to `unknown`, due for a bank look-up `due_in_seconds` from now;
/// `call_ended` records whether the bank call ended with a definite answer (nothing of it
/// still on its way). `true` if it moved.
pub(super) async fn set_unknown(
    conn: &mut PgConnection,
    key: KeyRef,
    resource_id: Uuid,
    call_ended: bool,
    due_in_seconds: f64,
) -> Result<bool, StoreError> {
    let result = sqlx::query(
        "UPDATE idempotency_keys \
         SET state = 'unknown', bank_call_ended = $4, \
             next_lookup_at = now() + make_interval(secs => $5) \
         WHERE user_id = $1 AND key = $2 AND resource_id = $3 AND state = 'started'",
    )
    .bind(user_id(key))
    .bind(key.key)
    .bind(resource_id)
    .bind(call_ended)
    .bind(due_in_seconds)
    .execute(conn)
    .await?;
    Ok(result.rows_affected() == 1)
}

/// Sets when to ask the bank about the key next; a failed look-up also counts towards the
/// back-off (`failed` is 1), a scheduled check of a released key does not (0).
pub(super) async fn schedule_lookup(
    conn: &mut PgConnection,
    key: KeyRef,
    wait_seconds: f64,
    failed: i16,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE idempotency_keys \
         SET failed_lookups = LEAST(failed_lookups + $4, 1000), \
             next_lookup_at = now() + make_interval(secs => $3) \
         WHERE user_id = $1 AND key = $2",
    )
    .bind(user_id(key))
    .bind(key.key)
    .bind(wait_seconds)
    .bind(failed)
    .execute(conn)
    .await?;
    Ok(())
}

/// Releases an unfinished key of this resource (the bank never saw its reference), with its
/// first check for a late debit `check_after_seconds` from now. The key and its movement stay.
pub(super) async fn set_released(
    conn: &mut PgConnection,
    key: KeyRef,
    resource_id: Uuid,
    check_after_seconds: f64,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE idempotency_keys \
         SET state = 'released', failed_lookups = 0, bank_call_ended = false, \
             next_lookup_at = now() + make_interval(secs => $4) \
         WHERE user_id = $1 AND key = $2 AND resource_id = $3 AND state IN ('started', 'unknown')",
    )
    .bind(user_id(key))
    .bind(key.key)
    .bind(resource_id)
    .bind(check_after_seconds)
    .execute(conn)
    .await?;
    Ok(())
}

/// Ends a released key's checks: its last look-up found nothing at the bank, so the key may
/// now expire (its movement is made `void` in the same transaction).
pub(super) async fn end_checks(
    conn: &mut PgConnection,
    key: KeyRef,
    resource_id: Uuid,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE idempotency_keys SET next_lookup_at = NULL \
         WHERE user_id = $1 AND key = $2 AND resource_id = $3 AND state = 'released'",
    )
    .bind(user_id(key))
    .bind(key.key)
    .bind(resource_id)
    .execute(conn)
    .await?;
    Ok(())
}

/// Claims a released key again for the request that released it (same fingerprint): back to
/// `started`, stuck detection counting from now. `SKIP LOCKED`: a key a reconciler is checking
/// is left alone (the caller answers 409). Returns the operation and movement to call the bank
/// for, under the claim's own reference; `None` if the key is not released (any more), belongs
/// to another request, or is being checked.
pub(super) async fn reclaim_released_key(
    conn: &mut PgConnection,
    key: KeyRef,
    fingerprint: &Fingerprint,
) -> Result<Option<(Operation, Uuid)>, StoreError> {
    let row = sqlx::query(
        "UPDATE idempotency_keys k \
         SET state = 'started', claimed_at = now(), next_lookup_at = NULL, failed_lookups = 0 \
         WHERE (k.user_id, k.key) IN ( \
             SELECT user_id, key FROM idempotency_keys \
             WHERE user_id = $1 AND key = $2 AND state = 'released' AND fingerprint = $3 \
             FOR UPDATE SKIP LOCKED) \
         RETURNING k.operation::text AS operation, k.resource_id",
    )
    .bind(user_id(key))
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
/// so that of two requests that both found it expired, only one deletes it and the other's claim
/// then finds the new row. A released key goes only once its last check is done. `true` if
/// deleted.
pub(super) async fn delete_expired_key(
    conn: &mut PgConnection,
    key: KeyRef,
    created_at: OffsetDateTime,
) -> Result<bool, StoreError> {
    let result = sqlx::query(
        "DELETE FROM idempotency_keys \
         WHERE user_id = $1 AND key = $2 AND created_at = $3 \
           AND (state = 'done' OR (state = 'released' AND next_lookup_at IS NULL))",
    )
    .bind(user_id(key))
    .bind(key.key)
    .bind(created_at)
    .execute(conn)
    .await?;
    Ok(result.rows_affected() == 1)
}

/// Deletes up to `batch_size` expired keys older than `keep_for_seconds`, oldest first: finished
/// keys, and released keys whose last check is done. `SKIP LOCKED` and the small batch keep
/// each statement short, so expiry never queues claims behind it; unfinished keys are never
/// expired (money may have moved).
pub(super) async fn delete_expired_batch(
    conn: &mut PgConnection,
    keep_for_seconds: f64,
    batch_size: i64,
) -> Result<u64, StoreError> {
    let result = sqlx::query(
        "DELETE FROM idempotency_keys k USING ( \
             SELECT user_id, key FROM idempotency_keys \
             WHERE (state = 'done' OR (state = 'released' AND next_lookup_at IS NULL)) \
               AND created_at < now() - make_interval(secs => $1) \
             ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED) old \
         WHERE k.user_id = old.user_id AND k.key = old.key",
    )
    .bind(keep_for_seconds)
    .bind(batch_size)
    .execute(conn)
    .await?;
    Ok(result.rows_affected())
}

/// The ages, in seconds, of the oldest `started` and the oldest `unknown` key (0 when none).
pub(super) async fn oldest_unfinished_ages(
    conn: &mut PgConnection,
) -> Result<(f64, f64), StoreError> {
    let row = sqlx::query(
        "SELECT \
           COALESCE(EXTRACT(EPOCH FROM now() - min(claimed_at) FILTER (WHERE state = 'started')), 0)::float8 AS started, \
           COALESCE(EXTRACT(EPOCH FROM now() - min(claimed_at) FILTER (WHERE state = 'unknown')), 0)::float8 AS unknown \
         FROM idempotency_keys WHERE state <> 'done'",
    )
    .fetch_one(conn)
    .await?;
    Ok((row.try_get("started")?, row.try_get("unknown")?))
}

fn user_id(key: KeyRef) -> i64 {
    key.user.as_i64()
}

fn lookup_history_from_row(row: &PgRow) -> Result<LookupHistory, StoreError> {
    Ok(LookupHistory {
        failed_lookups: row.try_get("failed_lookups")?,
        bank_call_ended: row.try_get("bank_call_ended")?,
    })
}

fn stored_key_from_row(row: &PgRow) -> Result<StoredKey, StoreError> {
    let operation: String = row.try_get("operation")?;
    let state: String = row.try_get("state")?;
    let fingerprint: Vec<u8> = row.try_get("fingerprint")?;
    Ok(StoredKey {
        record: StoredRecord {
            fingerprint: Fingerprint::from_slice(&fingerprint)
                .ok_or_else(|| StoreError::Corrupt("fingerprint is not 32 bytes".to_owned()))?,
            state: KeyState::from_name(&state)
                .ok_or_else(|| StoreError::Corrupt(format!("unknown key state {state:?}")))?,
            created_at: row.try_get("created_at")?,
            claimed_at: row.try_get("claimed_at")?,
        },
        operation: Operation::from_name(&operation)
            .ok_or_else(|| StoreError::Corrupt(format!("unknown operation {operation:?}")))?,
        resource_id: row.try_get("resource_id")?,
        read_at: row.try_get("read_at")?,
        saved: None,
    })
}
