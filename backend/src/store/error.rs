//! Store errors, each saying what happened, and split by what the caller should tell the
//! client: "try again later" (the database is unreachable, 503) or "a bug" (500). None is ever
//! saved as a key's answer.

use thiserror::Error;

/// A failed store operation.
#[derive(Debug, Error)]
pub enum StoreError {
    /// The database could not be reached or is shutting down: nothing was done, retry later.
    #[error("the database is unavailable: {0}")]
    Unavailable(#[source] sqlx::Error),
    /// Any other database error: a bug or a broken invariant.
    #[error("database error: {0}")]
    Database(#[source] sqlx::Error),
    /// A reconciler's lease on a key ran out and another reconciler took the key over, so this
    /// one wrote nothing; the other's work stands.
    #[error("the reconciliation lease on the key was lost to another reconciler")]
    LeaseLost,
    /// A row held a value the code does not know, or rows broke an invariant (a finished key
    /// whose payment is gone, say): a hand-edited database or a bug.
    #[error("corrupt row: {0}")]
    Corrupt(String),
    /// Every claim found the key taken, and every read then found it gone (expired and deleted
    /// in between, time after time): the claim gave up.
    #[error("the key vanished between each claim and its read")]
    KeyKeptVanishing,
}

impl From<sqlx::Error> for StoreError {
    fn from(error: sqlx::Error) -> Self {
        if is_unavailable(&error) {
            StoreError::Unavailable(error)
        } else {
            StoreError::Database(error)
        }
    }
}

/// Connection-level failures: the pool timed out, the socket broke, or the database said to try
/// again later (each store knows its own codes for that).
fn is_unavailable(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => postgres_unavailable(db.as_ref()) || sqlite_busy(db.as_ref()),
        _ => false,
    }
}

/// PostgreSQL's "try again later" errors: SQLSTATE class 08 (connection exception) and 57P
/// (the server is shutting down or not yet accepting connections).
fn postgres_unavailable(error: &dyn sqlx::error::DatabaseError) -> bool {
    error
        .code()
        .is_some_and(|code| code.starts_with("08") || code.starts_with("57P"))
}

/// SQLite's "try again later": `SQLITE_BUSY` (another writer held the lock past
/// `busy_timeout`) and `SQLITE_LOCKED`, with any extended code.
fn sqlite_busy(error: &dyn sqlx::error::DatabaseError) -> bool {
    error
        .try_downcast_ref::<sqlx::sqlite::SqliteError>()
        .and_then(sqlx::error::DatabaseError::code)
        .and_then(|code| code.parse::<i32>().ok())
        .is_some_and(|code| matches!(code & 0xff, 5 | 6))
}
