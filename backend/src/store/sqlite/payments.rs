//! Statements on SQLite's `payments`, one function each.

use sqlx::SqliteConnection;
use uuid::Uuid;

use super::timestamps::NOW;
use crate::store::error::StoreError;
use crate::store::types::{KeyRef, MovementResult, NewPayment, PaymentRow};

const PAYMENT_COLUMNS: &str = "payment_id, user_id, bill_id, amount_paise, payer_vpa, status, \
     bank_reference, decline_reason";

/// Writes a pending payment, in the claim's transaction, right after its key was inserted
/// (SQLite cannot `INSERT` inside a `WITH`, so the claim is two statements, not one).
pub(super) async fn insert_pending(
    conn: &mut SqliteConnection,
    key: KeyRef,
    payment: &NewPayment,
) -> Result<PaymentRow, StoreError> {
    let sql = format!(
        "INSERT INTO payments (payment_id, user_id, bill_id, amount_paise, payer_vpa, status, \
                               bank_reference) \
         VALUES (?1, ?2, ?3, ?4, ?5, 'pending', ?6) RETURNING {PAYMENT_COLUMNS}"
    );
    Ok(sqlx::query_as(&sql)
        .bind(payment.payment_id)
        .bind(key.user.as_i64())
        .bind(&payment.bill_id)
        .bind(payment.amount_paise)
        .bind(&payment.payer_vpa)
        .bind(&payment.bank_reference)
        .fetch_one(conn)
        .await?)
}

/// Writes the bank's final word on a pending payment. Returns the row as it now stands: if a
/// racing writer finished it first, its (identical) result stays and is returned.
pub(super) async fn finish(
    conn: &mut SqliteConnection,
    user_id: i64,
    payment_id: Uuid,
    result: &MovementResult,
) -> Result<Option<PaymentRow>, StoreError> {
    let (status, reason) = result.status_and_reason();
    let sql = format!(
        "UPDATE payments SET status = ?3, decline_reason = ?4, finished_at = {NOW} \
         WHERE payment_id = ?1 AND user_id = ?2 AND status = 'pending' \
         RETURNING {PAYMENT_COLUMNS}"
    );
    let updated: Option<PaymentRow> = sqlx::query_as(&sql)
        .bind(payment_id)
        .bind(user_id)
        .bind(status)
        .bind(reason)
        .fetch_optional(&mut *conn)
        .await?;
    match updated {
        Some(row) => Ok(Some(row)),
        None => select(conn, user_id, payment_id).await,
    }
}

/// A payment of this user.
pub(super) async fn select(
    conn: &mut SqliteConnection,
    user_id: i64,
    payment_id: Uuid,
) -> Result<Option<PaymentRow>, StoreError> {
    let sql =
        format!("SELECT {PAYMENT_COLUMNS} FROM payments WHERE payment_id = ?1 AND user_id = ?2");
    Ok(sqlx::query_as(&sql)
        .bind(payment_id)
        .bind(user_id)
        .fetch_optional(conn)
        .await?)
}

/// This user's succeeded payment: its amount and bank reference (the refund names the debit it
/// reverses), or `None`. No `FOR UPDATE`: the refund claim's `BEGIN IMMEDIATE` transaction
/// already holds SQLite's write lock, so no other refund of it can run meanwhile.
pub(super) async fn select_succeeded_for_refund(
    conn: &mut SqliteConnection,
    user_id: i64,
    payment_id: Uuid,
) -> Result<Option<(i64, String)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT amount_paise, bank_reference FROM payments \
         WHERE payment_id = ?1 AND user_id = ?2 AND status = 'succeeded'",
    )
    .bind(payment_id)
    .bind(user_id)
    .fetch_optional(conn)
    .await?)
}

/// Marks a released payment `void`: its last look-up found nothing at the bank (its key's
/// checks end in the same transaction).
pub(super) async fn set_void(
    conn: &mut SqliteConnection,
    user_id: i64,
    payment_id: Uuid,
) -> Result<(), StoreError> {
    let sql = format!(
        "UPDATE payments SET status = 'void', finished_at = {NOW} \
         WHERE payment_id = ?1 AND user_id = ?2 AND status = 'pending'"
    );
    sqlx::query(&sql)
        .bind(payment_id)
        .bind(user_id)
        .execute(conn)
        .await?;
    Ok(())
}
