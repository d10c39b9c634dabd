//! The PostgreSQL store: production, and the only store for more than one replica. Row locks
//! (`FOR UPDATE`, `FOR UPDATE SKIP LOCKED`) let every replica claim, refund, reconcile and
//! expire at once without stepping on each other.

mod keys;
mod payments;
mod pg_store;
mod refunds;

pub use pg_store::{PgLockedKey, PgStore};

/// PostgreSQL's "try again later" errors: SQLSTATE class 08 (connection exception) and 57P
/// (the server is shutting down or not yet accepting connections).
pub(super) fn is_unavailable(error: &dyn sqlx::error::DatabaseError) -> bool {
    error
        .code()
        .is_some_and(|code| code.starts_with("08") || code.starts_with("57P"))
}
