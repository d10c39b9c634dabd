//! Persistence: every SQL statement of the backend, behind [`PgStore`]'s narrow interface.
//!
//! Callers speak in domain terms (claim a key, load it, finish it, mark it unknown, release it,
//! list stuck keys, expire old ones) and never see SQL; the per-table modules hold one function
//! per statement, and [`PgStore`] composes them into the transactions SPEC §5 requires.

mod error;
mod keys;
mod payments;
mod pg_store;
mod refunds;
mod types;

pub use error::StoreError;
pub use pg_store::{LockedKey, PgStore};
pub use types::{
    ClaimResult, KeyRef, MovementResult, MovementStatus, NewPayment, NewRefund, PaymentRow,
    RefundClaimResult, RefundRow, SavedMovement, StoredKey, UnfinishedKey,
};
