//! SQLite's two writes of [`ClaimWrites`]: each one statement string through the group commit
//! (`store::group_commit`), which shares one transaction and one fsync among the writes that
//! arrive together, with the statements that open the write's savepoint in front.
//!
//! SQLite cannot write inside a `WITH`, so where PostgreSQL has one statement
//! (`claims/postgres.rs`) SQLite runs three, sent together: sqlx runs every statement of one
//! string on SQLite's thread in one trip, binding the same numbered parameters to each. Each
//! statement after the first writes only if the one before it changed a row (`changes() = 1`:
//! SQLite's count for the last statement that completed, and the statements of a string run one
//! after another). Their rows come back in order, which tells which statements wrote.

use shared::{Fingerprint, Operation};
use sqlx::Sqlite;
use time::OffsetDateTime;
use uuid::Uuid;

use super::{ClaimWrites, claim_payment_query, finish_query};
use crate::domain::{Cause, EventKind};
use crate::store::db::Fields;
use crate::store::dialect::Dialect;
use crate::store::error::StoreError;
use crate::store::group_commit::GroupCommit;
use crate::store::sql::movements::{PAYMENT_COLUMNS, payment_from_row};
use crate::store::sql::{key_row, keys, movements, outcome};
use crate::store::types::{FinalOutcome, Finished, KeyRef, Lease, NewPayment, PaymentRow};

/// The `pay_bill` claim with its pending payment and its `claimed` event: the payment and the
/// event are written only if the key was inserted. Its rows: none if the key was stored
/// already, else the key's expiry, then the payment. Its parameters:
/// [`super::claim_payment_query`].
fn claim_payment_statements() -> String {
    format!(
        "
{insert_key};
INSERT INTO payments (payment_id, user_id, bill_id, amount_paise, payer_vpa, status,
                      bank_reference)
SELECT $5, $1, $9, $10, $11, 'pending', $12 WHERE changes() = 1
RETURNING {PAYMENT_COLUMNS};
INSERT INTO key_events (user_id, key, resource_id, event, request_id, trace_id, request_id_text)
SELECT $1, $2, $5, 'claimed', $13, $14, $15 WHERE changes() = 1",
        insert_key = key_row::insert_started::<Sqlite>(),
    )
}

/// The bank's final word on a movement of `operation`: the movement's outcome, its
/// `bank_answered` event and the key's `done` state, the last two only if the movement moved
/// (as on PostgreSQL, whose statement writes the event with the movement). The key's update
/// comes last so that its rows follow the movement's: none if the movement was not pending,
/// else the movement, then the key if it moved (its `changes() = 1` reads the event's insert,
/// which wrote a row exactly when the movement moved).
fn finish_statements(operation: Operation) -> String {
    let (table, id_column, columns) = movements::table(operation);
    format!(
        "
UPDATE {table} SET status = $3, decline_reason = $4, finished_at = {now}
WHERE {id_column} = $1 AND user_id = $2 AND status = 'pending'
RETURNING {columns};
INSERT INTO key_events (user_id, key, resource_id, event, detail, request_id, trace_id,
                        request_id_text)
SELECT $2, $5, $1, 'bank_answered', $9, $6, $7, $8 WHERE changes() = 1;
UPDATE idempotency_keys SET {set_done}
WHERE user_id = $2 AND key = $5 AND resource_id = $1 AND state <> 'done' AND changes() = 1
RETURNING {key_columns}",
        now = Sqlite::NOW,
        set_done = keys::SET_DONE,
        key_columns = key_row::read_columns::<Sqlite>(""),
    )
}

impl ClaimWrites for Sqlite {
    async fn claim_key_with_pending_payment(
        writer: &GroupCommit,
        key: KeyRef,
        (fingerprint, payment): (&Fingerprint, &NewPayment),
        claim: Lease,
        cause: &Cause,
    ) -> Result<Option<(PaymentRow, OffsetDateTime)>, StoreError> {
        let (fingerprint, payment, cause) = (*fingerprint, payment.clone(), cause.clone());
        writer
            .write(move |opening| {
                Box::pin(async move {
                    let (rows, _) = opening
                        .fetch_all(&claim_payment_statements(), |sql| {
                            claim_payment_query(sql, key, (&fingerprint, &payment), claim, &cause)
                        })
                        .await?;
                    match rows.as_slice() {
                        [] => Ok(None),
                        [key_row, payment_row] => Ok(Some((
                            payment_from_row::<Sqlite>(payment_row, "")?,
                            Fields::<Sqlite>::of(key_row).time("expires_at")?,
                        ))),
                        rows => Err(StoreError::Corrupt(format!(
                            "the claim returned {} rows; none or two expected",
                            rows.len()
                        ))),
                    }
                })
            })
            .await
    }

    /// The common case in one trip; when the movement was not pending (a racing writer
    /// finished it first, or it is gone) nothing was written, and the general statements run
    /// instead, in the same write, to return the movement as that writer left it.
    async fn finish_movement_and_key(
        writer: &GroupCommit,
        key: KeyRef,
        (operation, movement_id): (Operation, Uuid),
        result: &FinalOutcome,
        cause: &Cause,
    ) -> Result<Option<Finished>, StoreError> {
        let (result, cause) = (result.clone(), cause.clone());
        writer
            .write(move |opening| {
                Box::pin(async move {
                    let (rows, conn) = opening
                        .fetch_all(&finish_statements(operation), |sql| {
                            finish_query(sql, key.clone(), movement_id, &result, &cause)
                        })
                        .await?;
                    let (moved, key_now) = match rows.as_slice() {
                        [] => {
                            return outcome::finish_in::<Sqlite>(
                                conn,
                                key,
                                (operation, movement_id),
                                &result,
                                EventKind::BankReplied,
                                &cause,
                            )
                            .await;
                        }
                        [moved] => (moved, None),
                        [moved, done] => {
                            (moved, Some(key_row::stored_key_from_row::<Sqlite>(done)?))
                        }
                        rows => {
                            return Err(StoreError::Corrupt(format!(
                                "the outcome returned {} rows; at most two expected",
                                rows.len()
                            )));
                        }
                    };
                    Ok(Some(Finished {
                        movement: movements::movement_from_row::<Sqlite>(operation, moved)?,
                        key: key_now,
                    }))
                })
            })
            .await
    }
}
