//! The bank simulator: plays the partner bank over HTTP in development and tests.
//!
//! It executes debits and refunds by reference into an in-memory ledger and, like a real bank,
//! answers a repeated reference with its first outcome without moving money again. Knobs
//! ([`Knobs`]) make it slow (latency plus jitter), declining (`decline_rate`), failing (500
//! before doing anything, `error_rate`), forgetful of its replies (executes, then holds the
//! answer until the caller has given up, `lost_reply_rate`) or careless (dedupe off, so a
//! repeat debits twice: the backend must prevent doubles on its own). All random draws come
//! from one generator seeded by `seed`, so a run repeats for the same arrival order.
//!
//! Sandbox rule: a debit from an account whose name part starts with `decline`
//! (`decline@okbank`) is always declined; see [`is_always_declined`].
//!
//! The wire contract is SPEC §7. Run it with the `bank-simulator` binary, or in-process with
//! [`BankSimulator::spawn`] (a real socket on a free port) or [`BankSimulator::router`].

mod books;
mod error;
mod extract;
mod http;
mod knobs;
mod ledger;
mod plan;
mod sandbox;
mod server;
mod simulator;
mod wire;

pub use knobs::LookupStatus;
pub use knobs::{DEFAULT_LOST_REPLY_DELAY_MS, Knobs, KnobsError};
pub use ledger::{Ledger, LedgerEntry};
pub use sandbox::{ALWAYS_DECLINED_PREFIX, is_always_declined};
pub use server::{RunningBank, serve};
pub use simulator::BankSimulator;
pub use wire::{
    DebitOutcome, DebitRequest, DeclineReason, ErrorBody, ErrorStatus, RefundOutcome,
    RefundRejection, RefundRequest, RequestError, UnknownReference,
};
