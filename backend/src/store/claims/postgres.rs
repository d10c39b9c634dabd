//! PostgreSQL's two writes of [`ClaimWrites`]: each one statement, so one round trip and one
//! implicit transaction, committed on its own.

use shared::{Fingerprint, Operation};
use std::sync::Arc;

use sqlx::{Connection, Postgres};
use time::OffsetDateTime;
use uuid::Uuid;

use super::{ClaimWrites, claim_payment_query, finish_query};
use crate::domain::{Cause, EventKind};
use crate::store::columns::Label;
use crate::store::db::{Arg, Exec, Fields};
use crate::store::error::StoreError;
use crate::store::key_changes;
use crate::store::sql::movements::payment_from_row;
use crate::store::sql::{key_row, keys, movements, outcome};
use crate::store::types::{FinalOutcome, Finished, KeyRef, Lease, NewPayment, PaymentRow};
use crate::store::writer_connections::WriterConnections;

/// The `pay_bill` claim with its pending payment, in one statement: the payment is written only
/// if the key was inserted, and carries the claim's `claimed` event (its id from the trail's
/// sequence, the request's id and trace id; `migrations/20261207000001_routine_trail_on_movements.sql`
/// says why). Its parameters: [`super::claim_payment_query`].
pub(in crate::store) fn claim_payment_statement() -> String {
    format!(
        "
WITH claimed AS (
    {insert_key}),
paid AS (
    INSERT INTO payments (payment_id, user_id, bill_id, amount_paise, payer_vpa, status,
                          bank_reference, claim_event_id, claim_request_id, claim_trace_id,
                          claim_request_id_text)
    SELECT resource_id, $1, $9, $10, $11, 'pending', $12, nextval('key_events_event_id_seq'),
           $13, $14, $15 FROM claimed
    RETURNING payment_id, user_id, bill_id, amount_paise, payer_vpa, status, bank_reference,
              decline_reason)
SELECT paid.*, claimed.expires_at FROM paid, claimed",
        insert_key = key_row::insert_started::<Postgres>(),
    )
}

/// The bank's final word on a movement of `operation`, in one statement: the movement's
/// outcome, the key's `done` state (only if the movement moved), the announcement if a request
/// waits on the key (its row says `awaited`) and the `bank_answered` event. The event goes on
/// a payment's row when the request that claimed the payment records the reply (nearly
/// always: only an id is written, the rest is the claim's and the outcome's), else into
/// `key_events` naming the request that did.
pub(in crate::store) fn finish_statement(operation: Operation) -> String {
    let (table, id_column, columns) = movements::table(operation);
    let (reply_on_the_row, replied_on_the_row) = match operation {
        Operation::PayBill => (
            ", answer_event_id = CASE WHEN claim_event_id IS NOT NULL \
                 AND ($6, $7, $8) IS NOT DISTINCT FROM \
                     (claim_request_id, claim_trace_id, claim_request_id_text) \
                 THEN nextval('key_events_event_id_seq') END",
            "answer_event_id IS NOT NULL",
        ),
        Operation::RefundPayment => ("", "false"),
    };
    format!(
        "
WITH moved AS (
    UPDATE {table} SET status = $3, decline_reason = $4, finished_at = now(){reply_on_the_row}
    WHERE {id_column} = $1 AND user_id = $2 AND status = 'pending'
    RETURNING {columns}, {replied_on_the_row} AS replied_on_the_row),
done AS (
    UPDATE idempotency_keys SET {set_done}
    WHERE user_id = $2 AND key = $5 AND resource_id = $1 AND state <> 'done'
      AND EXISTS (SELECT 1 FROM moved)
    RETURNING {key_columns}, awaited),
told AS (SELECT pg_notify($10, $11) FROM done WHERE awaited),
recorded AS (
    INSERT INTO key_events (user_id, key, resource_id, event, detail, request_id, trace_id,
                            request_id_text)
    SELECT $2, $5, $1, 'bank_answered', $9, $6, $7, $8 FROM moved WHERE NOT replied_on_the_row)
SELECT moved.*, {done_columns}, done.read_at, (SELECT count(*) FROM told) AS told
FROM moved LEFT JOIN done ON true",
        set_done = keys::SET_DONE,
        key_columns = key_row::read_columns::<Postgres>(""),
        done_columns = key_row::decoded_columns("done."),
    )
}

impl ClaimWrites for Postgres {
    /// The claim and its pending payment in one statement (one round trip, one implicit
    /// transaction): the payment row is written only if the key was inserted, and the
    /// statement commits on its own before the bank is called.
    async fn claim_key_with_pending_payment(
        writer: &Arc<WriterConnections>,
        key: KeyRef,
        (fingerprint, payment): (&Fingerprint, &NewPayment),
        claim: Lease,
        cause: &Cause,
    ) -> Result<Option<(PaymentRow, OffsetDateTime)>, StoreError> {
        let sql = claim_payment_statement();
        let query = claim_payment_query(&sql, key, (fingerprint, payment), claim, cause);
        let mut conn = writer.acquire().await?;
        let claimed = Postgres::fetch_optional(&mut conn, query).await?;
        conn.keep();
        let Some(row) = claimed else {
            return Ok(None);
        };
        let expires_at = Fields::<Postgres>::of(&row).time("expires_at")?;
        Ok(Some((payment_from_row::<Postgres>(&row, "")?, expires_at)))
    }

    /// One statement, so one round trip and one implicit transaction instead of `BEGIN`, two
    /// `UPDATE`s, a `NOTIFY` and `COMMIT`: the movement's outcome, the key's `done` state (only
    /// if the movement moved) and, if a request waits on the key, the announcement, which
    /// PostgreSQL sends on commit. When it changes nothing (a racing writer finished the
    /// movement first, or it is gone) the general transaction runs instead, to return the
    /// movement as that writer left it.
    async fn finish_movement_and_key(
        writer: &Arc<WriterConnections>,
        key: KeyRef,
        (operation, movement_id): (Operation, Uuid),
        result: &FinalOutcome,
        cause: &Cause,
    ) -> Result<Option<Finished>, StoreError> {
        let sql = finish_statement(operation);
        let query = finish_query(&sql, key.clone(), movement_id, result, cause)
            .arg(key_changes::CHANNEL.to_owned())
            .arg(key_changes::payload(key.clone()));
        let mut conn = writer.acquire().await?;
        let Some(row) = Postgres::fetch_optional(&mut conn, query).await? else {
            let mut tx = Connection::begin(&mut *conn).await?;
            let finished = outcome::finish_in::<Postgres>(
                &mut tx,
                key,
                (operation, movement_id),
                result,
                EventKind::BankReplied,
                cause,
            )
            .await?;
            tx.commit().await?;
            conn.keep();
            return Ok(finished);
        };
        conn.keep();
        let movement = movements::movement_from_row::<Postgres>(operation, &row)?;
        let key_moved: Option<Label<shared::KeyState>> =
            Fields::<Postgres>::of(&row).get("state")?;
        let key_now = match key_moved {
            Some(_) => Some(key_row::stored_key_from_row::<Postgres>(&row)?),
            None => None,
        };
        Ok(Some(Finished {
            movement,
            key: key_now,
        }))
    }
}
