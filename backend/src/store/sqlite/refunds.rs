//! Statements on SQLite's `refunds`, one function each.

use sqlx::SqliteConnection;
use uuid::Uuid;

use super::timestamps::NOW;
use crate::store::error::StoreError;
use crate::store::types::{KeyRef, MovementResult, NewRefund, RefundRow};

const REFUND_COLUMNS: &str = "refund_id, payment_id, user_id, amount_paise, status, \
     bank_reference, debit_reference, decline_reason";

/// What has been or may still be refunded of a payment: every refund but the declined and the
/// void ones (a pending refund, released or not, may yet move money).
pub(super) async fn committed_total(
    conn: &mut SqliteConnection,
    user_id: i64,
    payment_id: Uuid,
) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT COALESCE(sum(amount_paise), 0) FROM refunds \
         WHERE payment_id = ?1 AND user_id = ?2 AND status NOT IN ('declined', 'void')",
    )
    .bind(payment_id)
    .bind(user_id)
    .fetch_one(conn)
    .await?)
}

/// Writes a pending refund of the debit `debit_reference`, in the claim's transaction.
pub(super) async fn insert_pending(
    conn: &mut SqliteConnection,
    key: KeyRef,
    refund: &NewRefund,
    debit_reference: &str,
) -> Result<RefundRow, StoreError> {
    let sql = format!(
        "INSERT INTO refunds (refund_id, payment_id, user_id, amount_paise, status, \
                              bank_reference, debit_reference) \
         VALUES (?1, ?2, ?3, ?4, 'pending', ?5, ?6) RETURNING {REFUND_COLUMNS}"
    );
    Ok(sqlx::query_as(&sql)
        .bind(refund.refund_id)
        .bind(refund.payment_id)
        .bind(key.user.as_i64())
        .bind(refund.amount_paise)
        .bind(&refund.bank_reference)
        .bind(debit_reference)
        .fetch_one(conn)
        .await?)
}

/// Writes the bank's final word on a pending refund; see `payments::finish`.
pub(super) async fn finish(
    conn: &mut SqliteConnection,
    user_id: i64,
    refund_id: Uuid,
    result: &MovementResult,
) -> Result<Option<RefundRow>, StoreError> {
    let (status, reason) = result.status_and_reason();
    let sql = format!(
        "UPDATE refunds SET status = ?3, decline_reason = ?4, finished_at = {NOW} \
         WHERE refund_id = ?1 AND user_id = ?2 AND status = 'pending' RETURNING {REFUND_COLUMNS}"
    );
    let updated: Option<RefundRow> = sqlx::query_as(&sql)
        .bind(refund_id)
        .bind(user_id)
        .bind(status)
        .bind(reason)
        .fetch_optional(&mut *conn)
        .await?;
    match updated {
        Some(row) => Ok(Some(row)),
        None => select(conn, user_id, refund_id).await,
    }
}

/// A refund of this user.
pub(super) async fn select(
    conn: &mut SqliteConnection,
    user_id: i64,
    refund_id: Uuid,
) -> Result<Option<RefundRow>, StoreError> {
    let sql = format!("SELECT {REFUND_COLUMNS} FROM refunds WHERE refund_id = ?1 AND user_id = ?2");
    Ok(sqlx::query_as(&sql)
        .bind(refund_id)
        .bind(user_id)
        .fetch_optional(conn)
        .await?)
}

/// The refunds of a payment, oldest first, for reads.
pub(super) async fn select_for_payment(
    conn: &mut SqliteConnection,
    user_id: i64,
    payment_id: Uuid,
) -> Result<Vec<RefundRow>, StoreError> {
    let sql = format!(
        "SELECT {REFUND_COLUMNS} FROM refunds WHERE payment_id = ?1 AND user_id = ?2 \
         ORDER BY created_at, refund_id"
    );
    Ok(sqlx::query_as(&sql)
        .bind(payment_id)
        .bind(user_id)
        .fetch_all(conn)
        .await?)
}

/// Marks a released refund `void` (see `payments::set_void`).
pub(super) async fn set_void(
    conn: &mut SqliteConnection,
    user_id: i64,
    refund_id: Uuid,
) -> Result<(), StoreError> {
    let sql = format!(
        "UPDATE refunds SET status = 'void', finished_at = {NOW} \
         WHERE refund_id = ?1 AND user_id = ?2 AND status = 'pending'"
    );
    sqlx::query(&sql)
        .bind(refund_id)
        .bind(user_id)
        .execute(conn)
        .await?;
    Ok(())
}
