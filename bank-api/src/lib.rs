//! The partner bank's HTTP API: the wire contract of SPEC §7 (docs/SPEC.md, "Bank simulator"),
//! as types that both sides of the wire share.
//!
//! - [`DebitRequest`], [`RefundRequest`] and their outcomes ([`DebitOutcome`],
//!   [`RefundOutcome`]), the "never seen" reply ([`UnknownReference`]) and every other error
//!   body ([`ErrorBody`]): what the bank reads and writes, strictly typed.
//! - [`StatusWord`] and [`ReplyBody`]: what a client of *any* bank needs to read replies
//!   leniently, by the body's `status` word, whatever else a bank adds or leaves out.
//! - [`Ledger`]: every money movement the bank executed (`GET /ledger`), what "exactly once"
//!   is counted against.
//! - [`callback`]: the bank's signed callbacks, a movement's final status pushed early.
//! - [`settlement`]: the bank's end-of-day settlement file, written by the simulator and read
//!   by the backend's `settle` command.
//! - [`Knobs`]: the bank simulator's behaviour (`GET`/`PUT /knobs`), so tools that drive the
//!   simulator set it with the same type the simulator reads.
//!
//! No I/O and no framework: the bank simulator (`tools/bank-simulator`), the backend's bank
//! client and the tools all link this crate, and it keeps their dependency lists short.

pub mod callback;
mod knobs;
mod ledger;
mod reply;
pub mod settlement;
mod wire;

pub use knobs::{
    DEFAULT_LOST_REPLY_DELAY_MS, Knobs, KnobsError, LookupStatus, UnknownLookupStatus,
};
pub use ledger::{Ledger, LedgerEntry};
pub use reply::{ReplyBody, StatusWord};
pub use wire::{
    DebitOutcome, DebitRequest, DeclineReason, ErrorBody, ErrorStatus, PendingReference,
    RefundOutcome, RefundRejection, RefundRequest, RequestError, UnknownReference,
};
