//! Store errors, split by what the caller should tell the client: "try again later" (the
//! database is unreachable, 503) or "a bug" (500). Neither is ever saved as a key's answer.

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
    /// A row held a value the code does not know (a hand-edited database).
    #[error("corrupt row: {0}")]
    Corrupt(String),
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

/// Connection-level failures: the pool timed out, the socket broke, or PostgreSQL said it is
/// shutting down or not accepting connections (SQLSTATE classes 08 and 57P).
fn is_unavailable(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => db
            .code()
            .is_some_and(|code| code.starts_with("08") || code.starts_with("57P")),
        _ => false,
    }
}
