//! Store errors, each saying what happened, and split by what the caller should tell the
//! client: "try again later" (the database is unreachable, 503) or "a bug" (500). None is ever
//! saved as a key's reply.

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
    /// The movement id a claim derived (`shared::movement_id`) is taken by an earlier claim of
    /// the same key, made before the key expired: nothing was written; claim under the next
    /// generation.
    #[error("the claim's movement id is taken by an earlier claim of the key")]
    MovementIdTaken,
}

impl StoreError {
    /// A claim's error as the claim's caller needs it: a unique violation can only be the new
    /// movement's primary key (the key's own conflict is not an error but an existing key), so
    /// it becomes [`StoreError::MovementIdTaken`].
    pub(super) fn of_claim(self) -> StoreError {
        match self {
            StoreError::Database(sqlx::Error::Database(db)) if db.is_unique_violation() => {
                StoreError::MovementIdTaken
            }
            other => other,
        }
    }
}

impl From<sqlx::Error> for StoreError {
    /// Classifies the error; one that says the connection's server has gone or stopped being
    /// the primary also marks every connection opened before it as stale
    /// ([`super::failover`]), so the pool drops them instead of handing them out again.
    fn from(error: sqlx::Error) -> Self {
        if lost_the_primary(&error) {
            super::failover::connections_before_now_are_stale();
        }
        if is_unavailable(&error) {
            StoreError::Unavailable(error)
        } else {
            StoreError::Database(error)
        }
    }
}

/// Connection-level failures: the pool timed out, the connection's server is gone or no longer
/// the primary, or the database said to try again later (each store knows its own codes).
fn is_unavailable(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) if sqlite_busy(db.as_ref()) => true,
        _ => lost_the_primary(error),
    }
}

/// The connection's server is gone or no longer takes writes (a failover): the socket broke,
/// or PostgreSQL replied SQLSTATE class 08 (connection exception), 57P (shutting down, or not
/// yet accepting connections) or 25006 (a read-only transaction: the server is a standby, or a
/// former primary demoted under the connection). Each means the next statement on that
/// connection would fail the same way.
fn lost_the_primary(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(_) | sqlx::Error::Tls(_) | sqlx::Error::Protocol(_) => true,
        sqlx::Error::Database(db) => {
            db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
                .is_some()
                && db.code().is_some_and(|code| {
                    code.starts_with("08")
                        || code.starts_with("57P")
                        || code == READ_ONLY_TRANSACTION
                })
        }
        _ => false,
    }
}

/// SQLSTATE `read_only_sql_transaction`.
const READ_ONLY_TRANSACTION: &str = "25006";

/// SQLite's "try again later": `SQLITE_BUSY` (another writer held the lock past
/// `busy_timeout`) and `SQLITE_LOCKED`, with any extended code.
fn sqlite_busy(error: &dyn sqlx::error::DatabaseError) -> bool {
    error
        .try_downcast_ref::<sqlx::sqlite::SqliteError>()
        .and_then(sqlx::error::DatabaseError::code)
        .and_then(|code| code.parse::<i32>().ok())
        .is_some_and(|code| matches!(code & 0xff, 5 | 6))
}
