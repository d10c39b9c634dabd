//! PostgreSQL: production, and the only store for more than one replica. Its [`Dialect`]: the
//! `pay_bill` claim is one statement, the bank's final word is one statement, and `FOR UPDATE SKIP LOCKED` lets every replica claim,
//! refund, reconcile and expire at once without stepping on each other.

use std::time::Duration;

use shared::{Fingerprint, Operation};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions, PgQueryResult};
use sqlx::{Acquire, PgConnection, PgPool, Pool, Postgres, Transaction};
use time::OffsetDateTime;
use uuid::Uuid;

use super::db::{Arg, Db, Exec, Fields};
use super::dialect::Dialect;
use super::error::StoreError;
use super::key_changes;
use super::sql::movements::payment_from_row;
use super::sql::{keys, movements, outcome};
use super::types::{Finished, KeyRef, Lease, MovementResult, NewPayment, PaymentRow};
use crate::store::columns::{Label, Span};
use crate::trail::{EventKind, request_id};

impl Db for Postgres {}

impl Dialect for Postgres {
    type Writer = PgPool;
    const NOW: &'static str = "now()";
    const SKIP_LOCKED: &'static str = "FOR UPDATE SKIP LOCKED";
    const FOR_UPDATE: &'static str = "FOR UPDATE";

    /// The pool: each claim and outcome is one statement, committed on its own, and
    /// PostgreSQL groups the commits of concurrent connections itself.
    fn writer(pool: &PgPool) -> PgPool {
        pool.clone()
    }

    /// The pool has no task of its own to stop.
    fn writer_health(_writer: &PgPool) -> (bool, u64) {
        (true, 0)
    }

    fn rows_affected(result: &PgQueryResult) -> u64 {
        result.rows_affected()
    }

    async fn begin_write(pool: &PgPool) -> Result<Transaction<'static, Postgres>, sqlx::Error> {
        pool.begin().await
    }

    /// The claim and its pending payment in one statement (one round trip, one implicit
    /// transaction): the payment row is written only if the key was inserted, and the
    /// statement commits on its own before the bank is called.
    async fn claim_key_with_pending_payment(
        pool: &PgPool,
        key: KeyRef,
        fingerprint: &Fingerprint,
        payment: &NewPayment,
        claim: Lease,
    ) -> Result<Option<(PaymentRow, OffsetDateTime)>, StoreError> {
        let query = sqlx::query(
            "WITH claimed AS ( \
                 INSERT INTO idempotency_keys (user_id, key, operation, state, fingerprint, \
                                               resource_id, lease_owner, lease_until, expires_at) \
                 VALUES ($1, $2, $3, 'started', $4, $5, $10, now() + $11, now() + $13) \
                 ON CONFLICT (user_id, key) DO NOTHING RETURNING resource_id, expires_at), \
             told AS ( \
                 INSERT INTO key_events (user_id, key, resource_id, event, request_id) \
                 SELECT $1, $2, resource_id, 'claimed', $12 FROM claimed), \
             paid AS ( \
                 INSERT INTO payments (payment_id, user_id, bill_id, amount_paise, payer_vpa, \
                                       status, bank_reference) \
                 SELECT resource_id, $1, $6, $7, $8, 'pending', $9 FROM claimed \
                 RETURNING payment_id, user_id, bill_id, amount_paise, payer_vpa, status, \
                           bank_reference, decline_reason) \
             SELECT paid.*, claimed.expires_at FROM paid, claimed",
        )
        .arg(key.user.as_i64())
        .arg(key.key)
        .arg(Label(shared::Operation::PayBill))
        .arg(fingerprint.as_bytes().to_vec())
        .arg(payment.payment_id)
        .arg(payment.bill_id.clone())
        .arg(payment.amount_paise)
        .arg(payment.payer_vpa.clone())
        .arg(payment.bank_reference.clone())
        .arg(claim.owner)
        .arg(Span(claim.lasts))
        .arg(request_id::current())
        .arg(Span(payment.key_kept_for));
        let mut conn = pool.acquire().await?;
        let Some(row) = Postgres::fetch_optional(&mut conn, query).await? else {
            return Ok(None);
        };
        let expires_at = Fields::<Postgres>::of(&row).time("expires_at")?;
        Ok(Some((payment_from_row::<Postgres>(&row, "")?, expires_at)))
    }

    /// One statement, so one round trip and one implicit transaction instead of `BEGIN`, two
    /// `UPDATE`s, a `NOTIFY` and `COMMIT`: the movement's outcome, the key's `done` state (only
    /// if the movement moved) and the announcement, which PostgreSQL sends on commit. When it
    /// changes nothing (a racing writer finished the movement first, or it is gone) the
    /// general transaction runs instead, to return the movement as that writer left it.
    async fn finish_movement_and_key(
        pool: &PgPool,
        key: KeyRef,
        operation: Operation,
        resource_id: Uuid,
        result: &MovementResult,
    ) -> Result<Option<Finished>, StoreError> {
        let (table, id_column, columns) = movements::table(operation);
        let (status, reason) = result.status_and_reason();
        let sql = format!(
            "WITH moved AS ( \
                 UPDATE {table} SET status = $3, decline_reason = $4, finished_at = now() \
                 WHERE {id_column} = $1 AND user_id = $2 AND status = 'pending' \
                 RETURNING {columns}), \
             done AS ( \
                 UPDATE idempotency_keys SET {set_done} \
                 WHERE user_id = $2 AND key = $5 AND resource_id = $1 AND state <> 'done' \
                   AND EXISTS (SELECT 1 FROM moved) \
                 RETURNING fingerprint, state, operation, resource_id, created_at, claimed_at, \
                           expires_at, now() AS read_at), \
             told AS (SELECT pg_notify($6, $7) FROM done), \
             recorded AS ( \
                 INSERT INTO key_events (user_id, key, resource_id, event, detail, request_id) \
                 SELECT $2, $5, $1, 'bank_answered', $8, $9 FROM done) \
             SELECT moved.*, done.fingerprint, done.state, done.operation, done.resource_id, \
                    done.created_at, done.claimed_at, done.expires_at, done.read_at, \
                    (SELECT count(*) FROM told) AS told \
             FROM moved LEFT JOIN done ON true",
            set_done = keys::SET_DONE,
        );
        let query = sqlx::query(&sql)
            .arg(resource_id)
            .arg(key.user.as_i64())
            .arg(Label(status))
            .arg(reason.map(str::to_owned))
            .arg(key.key)
            .arg(key_changes::CHANNEL.to_owned())
            .arg(key_changes::payload(key))
            .arg(result.describe())
            .arg(request_id::current());
        let mut conn = pool.acquire().await?;
        let Some(row) = Postgres::fetch_optional(&mut conn, query).await? else {
            let mut tx = conn.begin().await?;
            let finished = outcome::finish_in::<Postgres>(
                &mut tx,
                key,
                (operation, resource_id),
                result,
                EventKind::BankAnswered,
                request_id::current(),
            )
            .await?;
            tx.commit().await?;
            return Ok(finished);
        };
        let movement = movements::movement_from_row::<Postgres>(operation, &row)?;
        let key_moved: Option<Label<shared::KeyState>> =
            Fields::<Postgres>::of(&row).get("state")?;
        let key_now = match key_moved {
            Some(_) => Some(keys::stored_key_from_row::<Postgres>(&row)?),
            None => None,
        };
        Ok(Some(Finished {
            movement,
            key: key_now,
        }))
    }

    async fn announce_change(conn: &mut PgConnection, key: KeyRef) -> Result<(), StoreError> {
        let query = sqlx::query("SELECT pg_notify($1, $2)")
            .arg(key_changes::CHANNEL.to_owned())
            .arg(key_changes::payload(key));
        Postgres::execute(conn, query).await?;
        Ok(())
    }

    async fn migrate(pool: &Pool<Postgres>) -> Result<(), sqlx::migrate::MigrateError> {
        sqlx::migrate!("../migrations").run(pool).await
    }
}

/// Connects a pool.
pub async fn connect(
    options: PgConnectOptions,
    max_connections: u32,
    acquire_timeout: Duration,
) -> Result<PgPool, sqlx::Error> {
    PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(acquire_timeout)
        .connect_with(options)
        .await
}

/// PostgreSQL's "try again later" errors: SQLSTATE class 08 (connection exception) and 57P
/// (the server is shutting down or not yet accepting connections).
pub(super) fn is_unavailable(error: &dyn sqlx::error::DatabaseError) -> bool {
    error
        .code()
        .is_some_and(|code| code.starts_with("08") || code.starts_with("57P"))
}
