//! Persistence: every SQL statement of the backend, behind interfaces cut by caller
//! ([`slices`]: [`Claims`] for the payment flows, [`Leases`] for reconciliation, [`Expiry`] for
//! the janitor, [`TrailWrites`], [`OperatorReads`], [`Health`]). Callers speak in domain terms
//! and never see SQL or learn which database holds the rows.
//!
//! Inside, from the bottom:
//! - `sql`: the statements PostgreSQL and SQLite share, each written once, generic over the
//!   database (`db::Db`), with the few pieces that differ (the clock, row locks, how a write
//!   transaction begins) put in by `dialect::Dialect`;
//! - `claims` (with `claims/postgres.rs` and `claims/sqlite.rs` side by side), `leases`,
//!   `upkeep`: each slice implemented once for both databases on [`sql_store::SqlStore`]; the
//!   two writes that truly differ (the `pay_bill` claim and the bank's final word: one statement
//!   on PostgreSQL, a group-commit transaction on SQLite) are written per database in `claims`;
//! - [`postgres`] (production, and any deployment with more than one replica) and [`sqlite`]
//!   (the default: one process, nothing else to install): each database's connection,
//!   migrations and dialect; `group_commit`: SQLite's one writer;
//! - `key_changes`: announcements of keys leaving `started`, for requests that wait on one
//!   (`Prefer: wait`), across replicas on PostgreSQL.

mod claims;
mod columns;
mod db;
mod dialect;
mod error;
mod failover;
mod group_commit;
mod key_changes;
mod leases;
#[cfg(test)]
mod pgbench_scripts;
pub mod postgres;
mod slices;
mod sql;
mod sql_store;
pub mod sqlite;
mod types;
mod upkeep;
mod writer_connections;

pub use error::StoreError;
pub use key_changes::{KeyChanges, KeyWatch};
pub use slices::{
    Claims, Expiry, Health, Leases, OperatorReads, PoolUse, SharedStore, Store, TrailWrites,
    connect,
};
pub use sql::events::StoredEvent;
/// Every column of `idempotency_keys` with what it holds, and those only PostgreSQL has: the key
/// row's one definition (`store::sql::key_row`), held against both databases' migrations by a
/// contract test.
pub use sql::key_row::{COLUMNS as KEY_ROW_COLUMNS, POSTGRES_ONLY as KEY_ROW_POSTGRES_ONLY};
pub use sql::operator_reads::{
    CLAIM_EVENTS_LIMIT, CustomerKey, CustomerMovement, LateDebit, MovementCursor, Page, Paged,
    QueueCursor, QueuedKey, TrailOf,
};
pub use types::{
    CLAIM_LEASE, CLAIM_LEASE_RENEWAL, CheckSlot, ClaimResult, ClaimToken, FinalOutcome, Finished,
    KeyRef, LeasedKey, NewPayment, NewRefund, PaymentRow, RECONCILE_LEASE, RefundRow,
    ReplicationState, SavedMovement, Settlement, StoredKey, UnfinishedKeys,
};
