//! PostgreSQL: production, and the only store for more than one replica. Its [`Dialect`]: the
//! `pay_bill` claim is one statement, the bank's final word is one statement, and `FOR UPDATE SKIP LOCKED` lets every replica claim,
//! refund, reconcile and expire at once without stepping on each other.

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions, PgQueryResult};
use sqlx::{PgConnection, PgPool, Pool, Postgres, Transaction};

use super::db::{Arg, Db, Exec};
use super::dialect::Dialect;
use super::error::StoreError;
use super::key_changes;
use super::types::KeyRef;

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
