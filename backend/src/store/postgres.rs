//! PostgreSQL: production, and the only store for more than one replica. Its [`Dialect`]: the
//! `pay_bill` claim is one statement, the bank's final word is one statement, and `FOR UPDATE SKIP LOCKED` lets every replica claim,
//! refund, reconcile and expire at once without stepping on each other.

use std::sync::Arc;
use std::time::Duration;

use sqlx::migrate::{MigrateError, Migrator};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions, PgQueryResult};
use sqlx::{Connection, PgConnection, PgPool, Pool, Postgres, Transaction};

use super::db::{Arg, Db, Exec};
use super::dialect::{Dialect, unapplied};
use super::error::StoreError;
use super::failover::{self, PING_IF_IDLE_FOR};
use super::key_changes;
use super::types::{KeyRef, ReplicationState};
use super::writer_connections::WriterConnections;
use crate::store::columns::Subject;

impl Db for Postgres {}

impl Dialect for Postgres {
    type Writer = Arc<WriterConnections>;
    const NOW: &'static str = "now()";
    const SKIP_LOCKED: &'static str = "FOR UPDATE SKIP LOCKED";
    const FOR_UPDATE: &'static str = "FOR UPDATE";

    /// Connections held out of the pool ([`WriterConnections`]): each claim and outcome is one
    /// statement, committed on its own, and PostgreSQL groups the commits of concurrent
    /// connections itself.
    fn writer(pool: &PgPool) -> Arc<WriterConnections> {
        Arc::new(WriterConnections::new(pool.clone()))
    }

    /// The writer has no task of its own to stop.
    fn writer_health(_writer: &Arc<WriterConnections>) -> (bool, u64) {
        (true, 0)
    }

    fn writer_idle_connections(writer: &Arc<WriterConnections>) -> u32 {
        writer.idle()
    }

    fn rows_affected(result: &PgQueryResult) -> u64 {
        result.rows_affected()
    }

    async fn begin_write(pool: &PgPool) -> Result<Transaction<'static, Postgres>, sqlx::Error> {
        pool.begin().await
    }

    async fn announce_change(conn: &mut PgConnection, key: KeyRef) -> Result<(), StoreError> {
        let query = sqlx::query(
            "SELECT pg_notify($1, $2) FROM idempotency_keys \
             WHERE user_id = $3 AND key = $4 AND awaited",
        )
        .arg(key_changes::CHANNEL.to_owned())
        .arg(key_changes::payload(key.clone()))
        .arg(Subject::of(&key.user))
        .arg(key.key);
        Postgres::execute(conn, query).await?;
        Ok(())
    }

    /// One statement, committed on its own. It waits for a write in progress on the row, so it
    /// lands either before that write (which then announces) or after it.
    async fn mark_awaited(pool: &PgPool, key: KeyRef) -> Result<(), StoreError> {
        let query = sqlx::query(
            "UPDATE idempotency_keys SET awaited = true \
             WHERE user_id = $1 AND key = $2 AND NOT awaited",
        )
        .arg(Subject::of(&key.user))
        .arg(key.key);
        Postgres::execute(&mut *pool.acquire().await?, query).await?;
        Ok(())
    }

    /// One statement: whether the server is in recovery, this session's `synchronous_commit`,
    /// and how many standbys acknowledge commits now.
    async fn replication(pool: &PgPool) -> Result<Option<ReplicationState>, StoreError> {
        let row = sqlx::query_as::<_, (bool, String, i64, bool)>(
            "SELECT pg_is_in_recovery(), current_setting('synchronous_commit'), \
                    (SELECT count(*) FROM pg_stat_replication \
                      WHERE sync_state IN ('sync', 'quorum')), \
                    pg_has_role(current_user, 'pg_read_all_stats', 'MEMBER')",
        )
        .fetch_one(pool)
        .await?;
        let (in_recovery, synchronous_commit, synchronous_standbys, sees_replication) = row;
        Ok(Some(ReplicationState {
            in_recovery,
            synchronous_commit,
            synchronous_standbys: u32::try_from(synchronous_standbys).unwrap_or(u32::MAX),
            sees_replication,
        }))
    }

    fn migrator() -> &'static Migrator {
        static MIGRATOR: Migrator = sqlx::migrate!("../migrations");
        &MIGRATOR
    }

    async fn migrate(pool: &Pool<Postgres>) -> Result<(), MigrateError> {
        Self::migrator().run(pool).await
    }

    async fn unapplied_migrations(pool: &Pool<Postgres>) -> Result<Vec<i64>, MigrateError> {
        unapplied(Self::migrator(), &mut *pool.acquire().await?).await
    }
}

/// Connects a pool whose connections never carry a `statement_timeout`, and which closes a
/// connection opened before the last failover instead of lending it ([`super::failover`]).
///
/// A connection that sat idle for [`PING_IF_IDLE_FOR`] or more is pinged before it is lent,
/// and replaced if the ping fails (a proxy or the server closed it while idle); one lent again
/// sooner is not. A failed ping marks every connection opened before it stale
/// ([`super::failover`]): the server or proxy that closed that one most likely closed the
/// others, and one used less than a second ago would be lent unpinged. sqlx's own test pings
/// every connection on every acquire, which cost a payment two of its six round trips to the database (docs/figures.md, "Where a payment's CPU
/// goes"); sqlx pings each connection when it comes back to the pool as well, so one lent
/// within a second of that ping is as tested as the ping would make it. (The claim and the
/// outcome run on connections held out of the pool, which skip that return ping:
/// [`WriterConnections`].)
///
/// Why no statement timeout: under synchronous replication a commit waits for a standby, and a
/// statement cancelled during that wait (which is what a timeout does) is replied to as a
/// *success*, with only a warning that the commit "might not have been replicated". A claim
/// acknowledged that way could be lost in the failover that follows, and the retry would
/// debit again. So the session setting is pinned to 0 whatever the role or database says, and
/// a request's deadline is kept by the application instead (`REQUEST_TIMEOUT_MS`), which
/// replies without cancelling anything at the database.
pub async fn connect(
    options: PgConnectOptions,
    max_connections: u32,
    acquire_timeout: Duration,
) -> Result<PgPool, sqlx::Error> {
    PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(acquire_timeout)
        .test_before_acquire(false)
        .before_acquire(|connection, metadata| {
            Box::pin(async move {
                if failover::is_stale(metadata.age) {
                    return Ok(false);
                }
                if metadata.idle_for >= PING_IF_IDLE_FOR {
                    connection
                        .ping()
                        .await
                        .inspect_err(|_| failover::connections_before_now_are_stale())?;
                }
                Ok(true)
            })
        })
        .connect_with(options.options([("statement_timeout", "0")]))
        .await
}
