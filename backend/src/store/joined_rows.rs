//! Reading the payment or refund that `select_key` joins to a finished key: the same column
//! names in both databases, so one reader serves both stores.

use sqlx::{ColumnIndex, Decode, Row, Type};
use uuid::Uuid;

use super::error::StoreError;
use super::types::{MovementStatus, PaymentRow, RefundRow, SavedMovement, StoredKey};

/// The joined `p_…` (payment) or `r_…` (refund) columns of a key row, if the join found one.
pub(super) fn saved_movement_from_row<'r, R>(
    row: &'r R,
    stored: &StoredKey,
) -> Result<Option<SavedMovement>, StoreError>
where
    R: Row,
    &'r str: ColumnIndex<R>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
    String: Decode<'r, R::Database> + Type<R::Database>,
    Uuid: Decode<'r, R::Database> + Type<R::Database>,
    MovementStatus: Decode<'r, R::Database> + Type<R::Database>,
{
    let user_id: i64 = row.try_get("user_id")?;
    if let Some(status) = row.try_get::<Option<MovementStatus>, _>("p_status")? {
        return Ok(Some(SavedMovement::Payment(PaymentRow {
            payment_id: stored.resource_id,
            user_id,
            bill_id: row.try_get("p_bill_id")?,
            amount_paise: row.try_get("p_amount_paise")?,
            payer_vpa: row.try_get("p_payer_vpa")?,
            status,
            bank_reference: row.try_get("p_bank_reference")?,
            decline_reason: row.try_get("p_decline_reason")?,
        })));
    }
    if let Some(status) = row.try_get::<Option<MovementStatus>, _>("r_status")? {
        return Ok(Some(SavedMovement::Refund(RefundRow {
            refund_id: stored.resource_id,
            payment_id: row.try_get("r_payment_id")?,
            user_id,
            amount_paise: row.try_get("r_amount_paise")?,
            status,
            bank_reference: row.try_get("r_bank_reference")?,
            debit_reference: row.try_get("r_debit_reference")?,
            decline_reason: row.try_get("r_decline_reason")?,
        })));
    }
    Ok(None)
}
