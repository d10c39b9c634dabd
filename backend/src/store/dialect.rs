//! [`Dialect`]: the small pieces that differ between PostgreSQL and the embedded SQLite store,
//! put into the statements written once for both (`store::sql`). The two writes that differ
//! as a whole (the `pay_bill` claim and the bank's final word) are not here: they are written
//! side by side, one per database, in `store::claims` ([`ClaimWrites`](super::claims::ClaimWrites)).
//!
//! | piece | PostgreSQL | SQLite |
//! |---|---|---|
//! | the clock, [`Dialect::NOW`] | `now()` (`timestamptz`) | unix microseconds from `unixepoch('subsec')` |
//! | taking rows another writer is not using, [`Dialect::SKIP_LOCKED`] | `FOR UPDATE SKIP LOCKED` | nothing: writers take turns |
//! | locking a row read before a write, [`Dialect::FOR_UPDATE`] | `FOR UPDATE` | nothing: the write lock is taken at `BEGIN` |
//! | a write transaction, [`Dialect::begin_write`] | `BEGIN` | `BEGIN IMMEDIATE`, so it never fails half-way |
//! | rows a statement changed, [`Dialect::rows_affected`] | `PgQueryResult` | `SqliteQueryResult` |
//! | telling other processes a key changed, [`Dialect::announce_change`] | `NOTIFY` on commit, if a request waits on it | nothing: one process |
//! | marking a key a request waits on, [`Dialect::mark_awaited`] | `awaited` on its row | nothing: one process |
//! | the server's replication, [`Dialect::replication`] | `pg_stat_replication` and settings | none: one file |

use std::future::Future;

use sqlx::migrate::{Migrate, MigrateError, Migrator};
use sqlx::{Database, Pool, Transaction};

use super::error::StoreError;
use super::types::{KeyRef, ReplicationState};

/// The pieces of SQL and behaviour that differ between the two databases.
pub trait Dialect: Database {
    /// SQL for the database's clock, in the unit [`super::columns::Timestamp`] is stored in.
    const NOW: &'static str;

    /// Ends a `SELECT` that picks rows to change, so concurrent writers never pick the same row
    /// and never wait for one another.
    const SKIP_LOCKED: &'static str;

    /// Ends a `SELECT` whose row the transaction will act on, so no other writer changes it
    /// before the transaction ends.
    const FOR_UPDATE: &'static str;

    /// What writes the claims and outcomes, the hot writes of every payment: the pool itself
    /// on PostgreSQL; on SQLite the group-commit writer ([`super::group_commit`]).
    type Writer: Clone + Send + Sync + std::fmt::Debug + 'static;

    /// The writer on `pool` (started here, if it is a task).
    fn writer(pool: &Pool<Self>) -> Self::Writer;

    /// Whether the writer is running, and how many times it had to be started again.
    fn writer_health(writer: &Self::Writer) -> (bool, u64);

    /// How many of the pool's connections the writer holds idle (the pool counts them in use).
    fn writer_idle_connections(writer: &Self::Writer) -> u32;

    /// How many rows a statement changed.
    fn rows_affected(result: &Self::QueryResult) -> u64;

    /// Begins a transaction that will write.
    fn begin_write(
        pool: &Pool<Self>,
    ) -> impl Future<Output = Result<Transaction<'static, Self>, sqlx::Error>> + Send;

    /// Tells the other processes on this database, once the connection's transaction commits,
    /// that `key` left `started`, if a request waits on it ([`super::key_changes`]); the
    /// transaction has written the key's row, so a request marking it waits for the commit.
    /// This process's own watchers are woken by the store itself.
    fn announce_change(
        conn: &mut Self::Connection,
        key: KeyRef,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Marks `key` as one a request waits on, so the write that moves it out of `started`
    /// announces the change to the other processes ([`super::key_changes`]).
    fn mark_awaited(
        pool: &Pool<Self>,
        key: KeyRef,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// What the server says of its replication; `None` for a database that has none.
    fn replication(
        pool: &Pool<Self>,
    ) -> impl Future<Output = Result<Option<ReplicationState>, StoreError>> + Send;

    /// This database's migrations (embedded at build time).
    fn migrator() -> &'static Migrator;

    /// Applies this database's migrations.
    fn migrate(pool: &Pool<Self>) -> impl Future<Output = Result<(), MigrateError>> + Send;

    /// The versions of this database's migrations not applied to the database at `pool`.
    fn unapplied_migrations(
        pool: &Pool<Self>,
    ) -> impl Future<Output = Result<Vec<i64>, MigrateError>> + Send;
}

/// The versions of `migrator`'s migrations that `conn`'s database has not applied (all of
/// them, where the migrations' own table does not exist yet).
pub async fn unapplied(
    migrator: &Migrator,
    conn: &mut (impl Migrate + Send),
) -> Result<Vec<i64>, MigrateError> {
    let applied = match conn.list_applied_migrations().await {
        Ok(applied) => applied,
        Err(MigrateError::Execute(error)) if is_missing_table(&error) => Vec::new(),
        Err(error) => return Err(error),
    };
    Ok(migrator
        .iter()
        .map(|migration| migration.version)
        .filter(|version| !applied.iter().any(|done| done.version == *version))
        .collect())
}

/// Whether `error` says a table does not exist (PostgreSQL's 42P01, SQLite's "no such table").
fn is_missing_table(error: &sqlx::Error) -> bool {
    error.as_database_error().is_some_and(|error| {
        error.code().as_deref() == Some("42P01") || error.message().contains("no such table")
    })
}
