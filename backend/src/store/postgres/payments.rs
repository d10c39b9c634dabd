//! Statements on PostgreSQL's `payments`, one function each.

use sqlx::PgConnection;
use uuid::Uuid;

use crate::store::error::StoreError;
use crate::store::types::{KeyRef, MovementResult, NewPayment, PaymentRow};

const PAYMENT_COLUMNS: &str = "payment_id, user_id, bill_id, amount_paise, payer_vpa, status, \
     bank_reference, decline_reason";

/// The claim of a `pay_bill` key and its pending payment in one statement (one round trip, one
/// implicit transaction): the payment row is written only if the key was inserted, and the
/// statement commits on its own before the bank is called. No row back: the key existed.
pub(super) async fn claim_key_with_pending_payment(
    conn: &mut PgConnection,
    key: KeyRef,
    fingerprint: &shared::Fingerprint,
    payment: &NewPayment,
) -> Result<Option<PaymentRow>, StoreError> {
    let sql = format!(
        "WITH claimed AS ( \
             INSERT INTO idempotency_keys (user_id, key, operation, state, fingerprint, resource_id) \
             VALUES ($1, $2, 'pay_bill', 'started', $3, $4) \
             ON CONFLICT (user_id, key) DO NOTHING RETURNING resource_id) \
         INSERT INTO payments (payment_id, user_id, bill_id, amount_paise, payer_vpa, status, bank_reference) \
         SELECT resource_id, $1, $5, $6, $7, 'pending', $8 FROM claimed \
         RETURNING {PAYMENT_COLUMNS}"
    );
    Ok(sqlx::query_as(&sql)
        .bind(key.user.as_i64())
        .bind(key.key)
        .bind(fingerprint.as_bytes().as_slice())
        .bind(payment.payment_id)
        .bind(&payment.bill_id)
        .bind(payment.amount_paise)
        .bind(&payment.payer_vpa)
        .bind(&payment.bank_reference)
        .fetch_optional(conn)
        .await?)
}

/// Writes the bank's final word on a pending payment. Returns the row as it now stands: if a
/// racing writer finished it first, its (identical) result stays and is returned.
pub(super) async fn finish(
    conn: &mut PgConnection,
    user_id: i64,
    payment_id: Uuid,
    result: &MovementResult,
) -> Result<Option<PaymentRow>, StoreError> {
    let (status, reason) = result.status_and_reason();
    let sql = format!(
        "UPDATE payments SET status = $3, decline_reason = $4, finished_at = now() \
         WHERE payment_id = $1 AND user_id = $2 AND status = 'pending' RETURNING {PAYMENT_COLUMNS}"
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
    conn: &mut PgConnection,
    user_id: i64,
    payment_id: Uuid,
) -> Result<Option<PaymentRow>, StoreError> {
    let sql =
        format!("SELECT {PAYMENT_COLUMNS} FROM payments WHERE payment_id = $1 AND user_id = $2");
    Ok(sqlx::query_as(&sql)
        .bind(payment_id)
        .bind(user_id)
        .fetch_optional(conn)
        .await?)
}

/// Locks this user's succeeded payment so concurrent refunds of it run one at a time (the
/// remaining amount is checked under this lock). Returns its amount and bank reference (the
/// refund names the debit it reverses), or `None` if there is no such payment.
pub(super) async fn lock_succeeded_for_refund(
    conn: &mut PgConnection,
    user_id: i64,
    payment_id: Uuid,
) -> Result<Option<(i64, String)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT amount_paise, bank_reference FROM payments \
         WHERE payment_id = $1 AND user_id = $2 AND status = 'succeeded' FOR UPDATE",
    )
    .bind(payment_id)
    .bind(user_id)
    .fetch_optional(conn)
    .await?)
}

/// Marks a released payment `void`: its last look-up found nothing at the bank (its key's
/// checks end in the same transaction).
pub(super) async fn set_void(
    conn: &mut PgConnection,
    user_id: i64,
    payment_id: Uuid,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE payments SET status = 'void', finished_at = now() \
         WHERE payment_id = $1 AND user_id = $2 AND status = 'pending'",
    )
    .bind(payment_id)
    .bind(user_id)
    .execute(conn)
    .await?;
    Ok(())
}
