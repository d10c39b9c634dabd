//! Persistence: every SQL statement of the backend, behind one narrow interface, [`Store`].
//!
//! Callers speak in domain terms (claim a key, load it, finish it, mark it unknown, release it,
//! take a stuck key for reconciliation, expire old ones) and never see SQL or learn which
//! database holds the rows. Each database has its own module with one function per statement
//! and its own way of giving SPEC §5's guarantees: [`postgres`] for production and any
//! deployment with more than one replica, [`sqlite`] (the default) for one process on one
//! machine with nothing else installed.

mod error;
mod interface;
mod joined_rows;
pub mod postgres;
pub mod sqlite;
mod types;

pub use error::StoreError;
pub use interface::{LockedKey, Store};
pub use types::{
    ClaimResult, KeyRef, LookupHistory, MovementResult, MovementStatus, NewPayment, NewRefund,
    PaymentRow, RefundClaimResult, RefundRow, SavedMovement, StoredKey, UnfinishedKey, UnknownCall,
};
