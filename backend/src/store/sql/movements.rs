//! Statements on `payments` and `refunds` (the money movements a key's claim creates), written
//! once for both databases, and for both tables where they read the same: a movement is
//! finished, read and voided the same way whichever table holds it.

use shared::Operation;
use shared::api::MovementStatus;
use uuid::Uuid;

use crate::store::columns::Label;
use crate::store::columns::Subject;
use crate::store::db::{Arg, Db, Fields};
use crate::store::error::StoreError;
use crate::store::types::{
    FinalOutcome, KeyRef, NewRefund, PaymentRow, RefundRow, SavedMovement, StoredKey,
};
use shared::UserId;

pub const PAYMENT_COLUMNS: &str = "payment_id, user_id, bill_id, amount_paise, payer_vpa, status, \
     bank_reference, decline_reason";

const REFUND_COLUMNS: &str = "refund_id, payment_id, user_id, amount_paise, status, \
     bank_reference, debit_reference, decline_reason";

/// The payment (`p`) and refund (`r`) columns `select_key` joins to a finished key, named with
/// a `p_` or `r_` prefix; read by [`saved_movement_from_joined_row`].
pub const JOINED_COLUMNS: &str = "\
     p.payment_id AS p_payment_id, p.user_id AS p_user_id, p.bill_id AS p_bill_id, \
     p.amount_paise AS p_amount_paise, p.payer_vpa AS p_payer_vpa, p.status AS p_status, \
     p.bank_reference AS p_bank_reference, p.decline_reason AS p_decline_reason, \
     r.refund_id AS r_refund_id, r.payment_id AS r_payment_id, r.user_id AS r_user_id, \
     r.amount_paise AS r_amount_paise, r.status AS r_status, \
     r.bank_reference AS r_bank_reference, r.debit_reference AS r_debit_reference, \
     r.decline_reason AS r_decline_reason";

/// The table, id column and columns of an operation's movements.
pub fn table(operation: Operation) -> (&'static str, &'static str, &'static str) {
    match operation {
        Operation::PayBill => ("payments", "payment_id", PAYMENT_COLUMNS),
        Operation::RefundPayment => ("refunds", "refund_id", REFUND_COLUMNS),
    }
}

/// Writes a pending refund of the debit `debit_reference`, in the claim's transaction.
pub async fn insert_pending_refund<D: Db>(
    conn: &mut D::Connection,
    key: KeyRef,
    refund: &NewRefund,
    debit_reference: String,
) -> Result<RefundRow, StoreError> {
    let sql = format!(
        "INSERT INTO refunds (refund_id, payment_id, user_id, amount_paise, status, \
                              bank_reference, debit_reference) \
         VALUES ($1, $2, $3, $4, 'pending', $5, $6) RETURNING {REFUND_COLUMNS}"
    );
    let query = sqlx::query(&sql)
        .arg(refund.refund_id)
        .arg(refund.payment_id)
        .arg(Subject::of(&key.user))
        .arg(refund.amount_paise)
        .arg(refund.bank_reference.clone())
        .arg(debit_reference);
    refund_from_row::<D>(&D::fetch_one(conn, query).await?, "")
}

/// Takes this user's succeeded payment for a refund claim, so refunds of one payment are
/// checked one at a time (under a row lock on PostgreSQL; SQLite's write transaction already
/// holds the database). Its amount and bank reference (the refund names the debit it
/// reverses), or `None` if there is no such payment.
pub async fn lock_succeeded_payment<D: Db>(
    conn: &mut D::Connection,
    user_id: UserId,
    payment_id: Uuid,
) -> Result<Option<(i64, String)>, StoreError> {
    let sql = format!(
        "SELECT amount_paise, bank_reference FROM payments \
         WHERE payment_id = $1 AND user_id = $2 AND status = 'succeeded' {}",
        D::FOR_UPDATE
    );
    let query = sqlx::query(&sql).arg(payment_id).arg(Subject::of(&user_id));
    let Some(row) = D::fetch_optional(conn, query).await? else {
        return Ok(None);
    };
    let fields = Fields::<D>::of(&row);
    Ok(Some((
        fields.get("amount_paise")?,
        fields.get("bank_reference")?,
    )))
}

/// What has been or may still be refunded of a payment: every refund but the declined and the
/// void ones (a pending refund, released or not, may yet move money).
pub async fn committed_refunds_total<D: Db>(
    conn: &mut D::Connection,
    user_id: UserId,
    payment_id: Uuid,
) -> Result<i64, StoreError> {
    let query = sqlx::query(
        "SELECT CAST(COALESCE(sum(amount_paise), 0) AS BIGINT) AS total FROM refunds \
         WHERE payment_id = $1 AND user_id = $2 AND status NOT IN ('declined', 'void')",
    )
    .arg(payment_id)
    .arg(Subject::of(&user_id));
    Fields::<D>::of(&D::fetch_one(conn, query).await?).get("total")
}

/// Writes the bank's final word on a pending movement, returning the row so finished; `None`
/// if it was not `pending` (a racing writer finished it first, or it is `void`, or it is gone),
/// and then nothing changed.
pub async fn finish<D: Db>(
    conn: &mut D::Connection,
    operation: Operation,
    user_id: UserId,
    id: Uuid,
    result: &FinalOutcome,
) -> Result<Option<SavedMovement>, StoreError> {
    let (table, id_column, columns) = table(operation);
    let (status, reason) = result.status_and_reason();
    let sql = format!(
        "UPDATE {table} SET status = $3, decline_reason = $4, finished_at = {now} \
         WHERE {id_column} = $1 AND user_id = $2 AND status = 'pending' RETURNING {columns}",
        now = D::NOW
    );
    let query = sqlx::query(&sql)
        .arg(id)
        .arg(Subject::of(&user_id))
        .arg(Label(status))
        .arg(reason.map(str::to_owned));
    let row = D::fetch_optional(conn, query).await?;
    row.map(|row| movement_from_row::<D>(operation, &row))
        .transpose()
}

/// A movement of this user.
pub async fn select<D: Db>(
    conn: &mut D::Connection,
    operation: Operation,
    user_id: UserId,
    id: Uuid,
) -> Result<Option<SavedMovement>, StoreError> {
    let (table, id_column, columns) = table(operation);
    let sql = format!("SELECT {columns} FROM {table} WHERE {id_column} = $1 AND user_id = $2");
    let query = sqlx::query(&sql).arg(id).arg(Subject::of(&user_id));
    let row = D::fetch_optional(conn, query).await?;
    row.map(|row| movement_from_row::<D>(operation, &row))
        .transpose()
}

/// The movement made under the bank reference `reference`, in either table.
pub async fn select_by_reference<D: Db>(
    conn: &mut D::Connection,
    reference: &str,
) -> Result<Option<SavedMovement>, StoreError> {
    for operation in Operation::ALL {
        let (table, _, columns) = table(operation);
        let sql = format!("SELECT {columns} FROM {table} WHERE bank_reference = $1");
        let query = sqlx::query(&sql).arg(reference.to_owned());
        if let Some(row) = D::fetch_optional(conn, query).await? {
            return movement_from_row::<D>(operation, &row).map(Some);
        }
    }
    Ok(None)
}

/// The refunds of a payment, oldest first, for reads.
pub async fn select_refunds_of<D: Db>(
    conn: &mut D::Connection,
    user_id: UserId,
    payment_id: Uuid,
) -> Result<Vec<RefundRow>, StoreError> {
    let sql = format!(
        "SELECT {REFUND_COLUMNS} FROM refunds WHERE payment_id = $1 AND user_id = $2 \
         ORDER BY created_at, refund_id"
    );
    let query = sqlx::query(&sql).arg(payment_id).arg(Subject::of(&user_id));
    let rows = D::fetch_all(conn, query).await?;
    rows.iter()
        .map(|row| refund_from_row::<D>(row, ""))
        .collect()
}

/// Marks a released movement `void`: its last look-up found nothing at the bank (its key's
/// checks end in the same transaction).
pub async fn set_void<D: Db>(
    conn: &mut D::Connection,
    operation: Operation,
    user_id: UserId,
    id: Uuid,
) -> Result<(), StoreError> {
    let (table, id_column, _) = table(operation);
    let sql = format!(
        "UPDATE {table} SET status = 'void', finished_at = {now} \
         WHERE {id_column} = $1 AND user_id = $2 AND status = 'pending'",
        now = D::NOW
    );
    D::execute(conn, sqlx::query(&sql).arg(id).arg(Subject::of(&user_id))).await?;
    Ok(())
}

/// The payment or refund [`JOINED_COLUMNS`] found for a finished key, if the join found one.
pub fn saved_movement_from_joined_row<D: Db>(
    row: &D::Row,
    stored: &StoredKey,
) -> Result<Option<SavedMovement>, StoreError> {
    let (status_column, prefix) = match stored.operation {
        Operation::PayBill => ("p_status", "p_"),
        Operation::RefundPayment => ("r_status", "r_"),
    };
    let status: Option<Label<MovementStatus>> = Fields::<D>::of(row).get(status_column)?;
    if status.is_none() {
        return Ok(None);
    }
    Ok(Some(match stored.operation {
        Operation::PayBill => SavedMovement::Payment(payment_from_row::<D>(row, prefix)?),
        Operation::RefundPayment => SavedMovement::Refund(refund_from_row::<D>(row, prefix)?),
    }))
}

/// A payment or refund row, as `operation` names it.
pub fn movement_from_row<D: Db>(
    operation: Operation,
    row: &D::Row,
) -> Result<SavedMovement, StoreError> {
    Ok(match operation {
        Operation::PayBill => SavedMovement::Payment(payment_from_row::<D>(row, "")?),
        Operation::RefundPayment => SavedMovement::Refund(refund_from_row::<D>(row, "")?),
    })
}

/// A payment row, its columns named with `prefix`.
pub fn payment_from_row<D: Db>(row: &D::Row, prefix: &str) -> Result<PaymentRow, StoreError> {
    let fields = Fields::<D>::of(row);
    let column = |name: &str| format!("{prefix}{name}");
    let status: Label<MovementStatus> = fields.get(&column("status"))?;
    Ok(PaymentRow {
        payment_id: fields.get(&column("payment_id"))?,
        user_id: fields.get::<Subject>(&column("user_id"))?.0,
        bill_id: fields.get(&column("bill_id"))?,
        amount_paise: fields.get(&column("amount_paise"))?,
        payer_vpa: fields.get(&column("payer_vpa"))?,
        status: status.0,
        bank_reference: fields.get(&column("bank_reference"))?,
        decline_reason: fields.get(&column("decline_reason"))?,
    })
}

/// A refund row, its columns named with `prefix`.
fn refund_from_row<D: Db>(row: &D::Row, prefix: &str) -> Result<RefundRow, StoreError> {
    let fields = Fields::<D>::of(row);
    let column = |name: &str| format!("{prefix}{name}");
    let status: Label<MovementStatus> = fields.get(&column("status"))?;
    Ok(RefundRow {
        refund_id: fields.get(&column("refund_id"))?,
        payment_id: fields.get(&column("payment_id"))?,
        user_id: fields.get::<Subject>(&column("user_id"))?.0,
        amount_paise: fields.get(&column("amount_paise"))?,
        status: status.0,
        bank_reference: fields.get(&column("bank_reference"))?,
        debit_reference: fields.get(&column("debit_reference"))?,
        decline_reason: fields.get(&column("decline_reason"))?,
    })
}
