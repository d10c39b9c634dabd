//! The embedded SQLite store: the default when no `DATABASE_URL` names PostgreSQL, so the
//! backend runs on a fresh machine with nothing else installed. One file
//! (`data/payments.sqlite` by default), one process: deployments with more than one replica
//! need PostgreSQL.
//!
//! It keeps SPEC §5's guarantees its own way where SQLite differs from PostgreSQL:
//! - **Writers.** SQLite has no row locks; a write transaction locks the whole database. Every
//!   transaction that reads before it writes (the claims, `finish`) starts with
//!   `BEGIN IMMEDIATE`, which takes the write lock up front, so writers queue one at a time
//!   (behind `busy_timeout`) instead of failing half-way. That also serialises the refund
//!   claim's remaining-amount check, which PostgreSQL does with `FOR UPDATE` on the payment.
//!   The journal is in WAL mode, so readers (replays, reads) never wait for a writer.
//! - **Claims** are still committed before the bank is called and the outcome and the key's
//!   `done` state are still one transaction; a claim is two `INSERT`s in one short transaction,
//!   because SQLite cannot `INSERT` inside a `WITH`.
//! - **Reconciliation** cannot hold a row lock across the bank look-up (there is no
//!   `FOR UPDATE SKIP LOCKED`, and an open write transaction would stop every claim). Instead a
//!   reconciler takes a key with one `UPDATE` that sets a *lease* (`lease_until`, now plus
//!   [`RECONCILE_LEASE`]) on a key whose lease is free or has run out, and commits. It then
//!   asks the bank, and writes the result guarded by its lease: only if `lease_until` still
//!   holds the value it set. A later lease is always strictly later, so that value identifies
//!   the holder; a reconciler whose lease ran out and was taken over writes nothing
//!   ([`crate::store::StoreError::LeaseLost`]). A crashed reconciler's key is free again when
//!   its lease runs out.
//! - **Expiry** deletes one bounded batch per statement
//!   (`DELETE … WHERE rowid IN (SELECT rowid … LIMIT n)`), each its own short write.
//! - **Types.** UUIDs are 16-byte BLOBs, fingerprints 32-byte BLOBs, timestamps INTEGER unix
//!   microseconds from SQLite's clock (the process's clock: the database is in-process).

mod keys;
mod payments;
mod refunds;
mod sqlite_store;
mod timestamps;

use std::time::Duration;

pub use sqlite_store::{SqliteLockedKey, SqliteStore};

/// How long a reconciler owns a key it took: far longer than a bank look-up takes (the bank
/// client gives up after `BANK_TIMEOUT_MS`, 5 s by default), short enough that a key taken by a
/// crashed reconciler is retried well within `stuck_after`.
pub const RECONCILE_LEASE: Duration = Duration::from_secs(60);

/// SQLite's "try again later": `SQLITE_BUSY` (another writer held the lock past
/// `busy_timeout`) and `SQLITE_LOCKED`, with any extended code.
pub(super) fn is_busy(error: &dyn sqlx::error::DatabaseError) -> bool {
    error
        .try_downcast_ref::<sqlx::sqlite::SqliteError>()
        .and_then(sqlx::error::DatabaseError::code)
        .and_then(|code| code.parse::<i32>().ok())
        .is_some_and(|code| matches!(code & 0xff, 5 | 6))
}
