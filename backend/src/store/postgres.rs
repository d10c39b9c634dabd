//! PostgreSQL: production, and the only store for more than one replica. Its [`Dialect`]: the
//! `pay_bill` claim is one statement, and `FOR UPDATE SKIP LOCKED` lets every replica claim,
//! refund, reconcile and expire at once without stepping on each other.

use std::time::Duration;

use shared::Fingerprint;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions, PgQueryResult};
use sqlx::{PgConnection, PgPool, Pool, Postgres, Transaction};

use super::db::{Arg, Db, Exec};
use super::dialect::Dialect;
use super::error::StoreError;
use super::key_changes;
use super::sql::movements::payment_from_row;
use super::types::{KeyRef, Lease, NewPayment, PaymentRow};
use crate::store::columns::{Label, Span};

impl Db for Postgres {}

impl Dialect for Postgres {
    const NOW: &'static str = "now()";
    const SKIP_LOCKED: &'static str = "FOR UPDATE SKIP LOCKED";
    const FOR_UPDATE: &'static str = "FOR UPDATE";

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
    ) -> Result<Option<PaymentRow>, StoreError> {
        let query = sqlx::query(
            "WITH claimed AS ( \
                 INSERT INTO idempotency_keys (user_id, key, operation, state, fingerprint, \
                                               resource_id, lease_owner, lease_until) \
                 VALUES ($1, $2, $3, 'started', $4, $5, $10, now() + $11) \
                 ON CONFLICT (user_id, key) DO NOTHING RETURNING resource_id) \
             INSERT INTO payments (payment_id, user_id, bill_id, amount_paise, payer_vpa, \
                                   status, bank_reference) \
             SELECT resource_id, $1, $6, $7, $8, 'pending', $9 FROM claimed \
             RETURNING payment_id, user_id, bill_id, amount_paise, payer_vpa, status, \
                       bank_reference, decline_reason",
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
        .arg(Span(claim.lasts));
        let mut conn = pool.acquire().await?;
        let row = Postgres::fetch_optional(&mut conn, query).await?;
        row.map(|row| payment_from_row::<Postgres>(&row, ""))
            .transpose()
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
