//! The embedded SQLite store: the default when no `DATABASE_URL` names PostgreSQL, so the
//! backend runs on a fresh machine with nothing else installed. One file
//! (`data/payments.sqlite` by default), one process: deployments with more than one replica
//! need PostgreSQL.
//!
//! Its [`Dialect`], where SQLite differs:
//! - **Writers take turns.** SQLite has no row locks; a write transaction locks the whole
//!   database. Every transaction that reads before it writes (the claims, `finish`) starts with
//!   `BEGIN IMMEDIATE`, which takes the write lock up front, so writers queue (behind
//!   `busy_timeout`) instead of failing half-way; that also serialises the refund claim's
//!   remaining-amount check. The journal is in WAL mode, so readers never wait for a writer.
//! - **The claim** is three `INSERT`s sent as one string (SQLite cannot `INSERT` inside a
//!   `WITH`; `store::claims`), still committed before the bank is called.
//! - **Claims and outcomes share commits.** One writer task gathers the claims and outcomes
//!   that arrive together into one transaction, one fsync for many payments, with
//!   `synchronous = FULL` kept ([`super::group_commit`]).
//! - **Time** is INTEGER unix microseconds from SQLite's clock (the process's: the database is
//!   in-process); UUIDs are 16-byte BLOBs.

use std::path::Path;
use std::time::Duration;

use sqlx::migrate::{MigrateError, Migrator};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteQueryResult,
    SqliteSynchronous,
};
use sqlx::{Sqlite, SqliteConnection, Transaction};

use super::db::Db;
use super::dialect::{Dialect, unapplied};
use super::error::StoreError;
use super::group_commit::GroupCommit;
use super::types::{KeyRef, ReplicationState};

/// How long a writer waits for SQLite's write lock before the request gets a 503: far longer
/// than any one of this store's write transactions holds it.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

impl Db for Sqlite {}

impl Dialect for Sqlite {
    type Writer = GroupCommit;
    const NOW: &'static str = "CAST(unixepoch('subsec') * 1000000 AS INTEGER)";
    const SKIP_LOCKED: &'static str = "";
    const FOR_UPDATE: &'static str = "";

    fn writer(pool: &SqlitePool) -> GroupCommit {
        GroupCommit::start(pool)
    }

    fn writer_health(writer: &GroupCommit) -> (bool, u64) {
        let health = writer.health();
        (health.is_running(), health.restarts())
    }

    /// The group-commit task borrows from the pool; it holds none idle.
    fn writer_idle_connections(_writer: &GroupCommit) -> u32 {
        0
    }

    fn rows_affected(result: &SqliteQueryResult) -> u64 {
        result.rows_affected()
    }

    /// Takes SQLite's write lock from the first statement, so the transaction never fails
    /// half-way because another writer got in between its read and its write.
    async fn begin_write(pool: &SqlitePool) -> Result<Transaction<'static, Sqlite>, sqlx::Error> {
        pool.begin_with("BEGIN IMMEDIATE").await
    }

    /// Nothing to send: the database is this process's own, and the store wakes this
    /// process's watchers itself.
    async fn announce_change(_conn: &mut SqliteConnection, _key: KeyRef) -> Result<(), StoreError> {
        Ok(())
    }

    /// Nothing to mark: no other process waits on this database's keys.
    async fn mark_awaited(_pool: &SqlitePool, _key: KeyRef) -> Result<(), StoreError> {
        Ok(())
    }

    /// One file on one machine: nothing is replicated.
    async fn replication(_pool: &SqlitePool) -> Result<Option<ReplicationState>, StoreError> {
        Ok(None)
    }

    fn migrator() -> &'static Migrator {
        static MIGRATOR: Migrator = sqlx::migrate!("../migrations/sqlite");
        &MIGRATOR
    }

    async fn migrate(pool: &SqlitePool) -> Result<(), MigrateError> {
        Self::migrator().run(pool).await
    }

    async fn unapplied_migrations(pool: &SqlitePool) -> Result<Vec<i64>, MigrateError> {
        unapplied(Self::migrator(), &mut *pool.acquire().await?).await
    }
}

/// Opens (creating it and its directory if missing) the database file at `path`, in WAL mode
/// with full fsync on commit, and a pool of `max_connections`.
pub async fn open(
    path: &Path,
    max_connections: u32,
    acquire_timeout: Duration,
) -> Result<SqlitePool, sqlx::Error> {
    if let Some(directory) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        std::fs::create_dir_all(directory)?;
    }
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Full)
        .busy_timeout(BUSY_TIMEOUT)
        .foreign_keys(true);
    SqlitePoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(acquire_timeout)
        .connect_with(options)
        .await
}
