//! The bank simulator: plays the partner bank over HTTP in development and tests.
//!
//! It executes debits and refunds by reference into an in-memory ledger and, like a real bank,
//! replies to a repeated reference with its first outcome without moving money again. Knobs
//! ([`Knobs`]) make it slow (latency plus jitter), declining (`decline_rate`), failing (503
//! before doing anything, `error_rate`), forgetful of its replies (executes, then holds the
//! reply until the caller has given up, `lost_reply_rate`) or careless (dedupe off, so a
//! repeat debits twice: the backend must prevent doubles on its own). All random draws come
//! from one generator seeded by `seed`, so a run repeats for the same arrival order.
//!
//! With a callback URL and secret ([`BankSimulator::send_callbacks_to`]) it posts each decided
//! call's final status, signed, delayed, lost or repeated as the knobs say (`callbacks`).
//!
//! Status look-ups follow the rail's rules when the knobs say so ([`status_checks`]): replied
//! `pending` for a while after the call, refused (`429 status_check_refused`) when sooner than
//! the first-check delay or beyond the per-reference limit, and counted at `GET /stats`.
//!
//! Sandbox rule: a debit from an account whose name part starts with `decline`
//! (`decline@okbank`) is always declined; see [`is_always_declined`].
//!
//! The wire contract is SPEC §7, typed in the `bank-api` crate (requests, outcomes, the ledger,
//! the knobs), which this crate serves and re-exports. Run it with the `bank-simulator` binary,
//! or in-process with [`BankSimulator::spawn`] (a real socket on a free port) or
//! [`BankSimulator::router`]; over TLS with [`TlsListener`]. A test tool: the backend uses it only in its tests, and the
//! production image does not carry it.

mod books;
mod callbacks;
mod error;
mod extract;
mod http;
mod plan;
mod sandbox;
mod server;
mod simulator;
mod status_checks;
mod tls;

pub use bank_api::{
    DEFAULT_LOST_REPLY_DELAY_MS, DebitOutcome, DebitRequest, DeclineReason, ErrorBody, ErrorStatus,
    Knobs, KnobsError, Ledger, LedgerEntry, LookupStatus, PendingReference, RefundOutcome,
    RefundRejection, RefundRequest, RequestError, UnknownReference,
};
pub use sandbox::{ALWAYS_DECLINED_PREFIX, is_always_declined};
pub use server::{RunningBank, serve};
pub use simulator::BankSimulator;
pub use status_checks::CheckStats;
pub use tls::{HANDSHAKE_TIMEOUT, TlsListener, server_config};
