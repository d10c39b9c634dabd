//! Persistence: every SQL statement of the backend, behind one narrow interface, [`Store`].
//!
//! Callers speak in domain terms (claim a key, load it, finish it, mark it unknown, lease it
//! to ask the bank, release it, expire old ones) through a [`SharedStore`], and never see SQL
//! or learn which database holds the rows. Inside, the layers are:
//! - [`sql`]: each statement once, generic over the database ([`db::Db`]), with the few pieces
//!   that differ put in by a [`dialect::Dialect`];
//! - [`sql_store`]: the statements composed into the transactions SPEC §5 requires, once;
//! - [`postgres`] (production, and any deployment with more than one replica) and [`sqlite`]
//!   (the default: one process, nothing else to install): each database's dialect, connection
//!   and migrations;
//! - [`group_commit`]: SQLite's one writer, many claims and outcomes per commit;
//! - the audit trail's `key_events`, written with the changes they record (`sql::events`), and
//!   the operator console's reads (`sql::support_desk`);
//! - [`key_changes`]: announcements of keys leaving `started`, for requests that wait on one
//!   (`Prefer: wait`), across replicas on PostgreSQL.

mod columns;
mod db;
mod dialect;
mod error;
mod group_commit;
mod interface;
mod key_changes;
pub mod postgres;
mod sql;
mod sql_store;
pub mod sqlite;
mod types;

pub use error::StoreError;
pub use interface::{SharedStore, Store, connect};
pub use key_changes::{KeyChanges, KeyWatch};
pub use sql::events::StoredEvent;
pub use sql::support_desk::{
    CLAIM_EVENTS_LIMIT, CustomerKey, CustomerMovement, LateDebit, MovementCursor, Page, Paged,
    QueueCursor, QueuedKey, TrailOf,
};
pub use types::{
    CLAIM_LEASE, CLAIM_LEASE_RENEWAL, ClaimResult, Finished, KeyRef, LeasedKey, LookupHistory,
    MovementResult, NewPayment, NewRefund, PaymentRow, RECONCILE_LEASE, RefundClaimResult,
    RefundRow, SavedMovement, StoredKey, UnknownCall,
};
