//! A payments client that follows the idempotency rules of SPEC §6, for phones and tools.
//!
//! One tap on Pay is one action with one key, and the key never changes while the action lives:
//! 1. [`PaymentsClient::begin`] mints the key, freezes the body
//!    ([`shared::retry::PendingAction`]) and writes both to the [`ActionStore`] (one JSON file
//!    per action, written atomically and fsynced) *before* anything is sent.
//! 2. [`PaymentsClient::run`] sends the identical key and body until a final answer (2xx, 402,
//!    any other 4xx), retrying timeouts, network errors and 409/429/5xx after waits from the
//!    shared [`RetrySchedule`] (exponential, full jitter, `Retry-After` as a floor). Each
//!    attempt asks with `Prefer: wait=N` for the first attempt's answer should that still be
//!    running, N below the attempt's own timeout ([`ClientRules::prefer_wait`]).
//! 3. At the deadline (10 minutes by default, as the article's app) it stops sending and asks
//!    the server for the key's outcome (`GET /v1/idempotency-keys/{key}`) instead of paying
//!    again; an outcome still unsettled keeps the action saved.
//! 4. After a crash or restart, [`PaymentsClient::resume_all`] carries on with the saved key and
//!    the saved body bytes. Only a new user action gets a new key.
//!
//! Time ([`Clock`]), randomness ([`Jitter`]) and the network ([`Transport`]) are parameters, so
//! unit tests drive the loop on a fake clock instantly and the incident replay runs it on a
//! compressed one; [`HttpTransport`], [`SystemClock`] and [`OsJitter`] are the real ones.

mod action_result;
mod action_store;
mod attempt_loop;
mod clock;
mod events;
mod http_transport;
mod jitter;
mod payments_client;
mod status_check;
mod transport;

#[cfg(test)]
mod test_support;
#[cfg(test)]
mod vector_tests;

pub use action_result::{ActionResult, Completion, FinalReply, Unsettled};
pub use action_store::{ActionStore, SavedAction, StoreError};
pub use clock::{Clock, SystemClock};
pub use events::{Event, Report};
pub use http_transport::{HttpTransport, KEY_HEADER};
pub use jitter::{Jitter, OsJitter};
pub use payments_client::PaymentsClient;
pub use shared::retry::{ClientRules, PREFER_WAIT_MARGIN, RetrySchedule};
pub use transport::{Reply, SendError, Transport};
