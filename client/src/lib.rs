//! `payments-client`: a payments client that follows the idempotency rules of SPEC §6, for
//! phones and tools. [`PaymentsClient::pay_bill`] and [`PaymentsClient::refund`] give back the
//! payment or refund, or a [`PaymentError`] that says what to do:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use payments_client::{
//!     ClientRules, FileStore, HttpTransport, PaymentError, PaymentsClient, RetrySchedule,
//! };
//! use shared::{UserId, api::Paise};
//!
//! let store = FileStore::open(std::env::temp_dir().join(format!("actions-{}", std::process::id())))?;
//! let transport = HttpTransport::new(reqwest::Client::new(), "http://127.0.0.1:9", "a-token");
//! # let rules = ClientRules {
//! #     schedule: RetrySchedule { deadline: std::time::Duration::from_millis(200), ..RetrySchedule::default() },
//! #     status_look_ups: 1,
//! #     ..ClientRules::default()
//! # };
//! let phone = PaymentsClient::new(UserId::numbered(42), transport, store, rules);
//!
//! // At start-up, before anything new: carry on with what a crash or a killed app left.
//! for completion in phone.resume_all(&|event| eprintln!("{event}")).await? {
//!     let key = completion.key.clone();
//!     match completion.into_receipt::<payments_client::PaymentResponse>() {
//!         Ok(payment) => println!("{key}: paid under {}", payment.bank_reference),
//!         Err(why) => println!("{key}: {why}"),
//!     }
//! }
//!
//! let amount = Paise::new(230_000).expect("Rs 2,300");
//! match phone.pay_bill("elec-2026-12", amount, "asha@okbank", &|event| eprintln!("{event}")).await {
//!     Ok(payment) => println!("paid: {}", payment.bank_reference),
//!     Err(PaymentError::Declined { problem, .. }) => println!("declined: {}", problem.title),
//!     // Kept in the store: show a status screen; the next resume asks, never pays again.
//!     Err(PaymentError::Pending { key, .. }) => println!("not settled yet: {key}"),
//!     Err(other) => println!("{other}"),
//! }
//! # std::fs::remove_dir_all(std::env::temp_dir().join(format!("actions-{}", std::process::id())))?;
//! # Ok(())
//! # }
//! ```
//!
//! One tap on Pay is one action with one key, and the key never changes while the action lives:
//! 1. [`PaymentsClient::begin`] mints the key, freezes the body
//!    ([`shared::retry::PendingAction`]) and writes both to the [`ActionStore`] (by default a
//!    [`FileStore`]: one JSON file per action, written atomically and fsynced) *before* anything
//!    is sent.
//! 2. [`PaymentsClient::run`] sends the identical key and body until a final reply (2xx, 402,
//!    any other 4xx), retrying timeouts, network errors and 409/429/5xx after waits from the
//!    shared [`RetrySchedule`] (exponential, full jitter, `Retry-After` as a floor). Each
//!    attempt asks with `Prefer: wait=N` for the first attempt's reply should that still be
//!    running, N below the attempt's own timeout ([`ClientRules::prefer_wait`]). Every move is
//!    made by the shared rules ([`shared::retry::ActionProgress`]), which the test vectors in
//!    `shared/vectors/` hold every client to.
//! 3. At the deadline (10 minutes by default, as the article's app) it stops sending and asks
//!    the server for the key's outcome (`GET /v1/idempotency-keys/{key}`) instead of paying
//!    again; an outcome still unsettled keeps the action saved.
//! 4. After a crash or restart, [`PaymentsClient::resume_all`] carries on with the saved key and
//!    the saved body bytes. Only a new user action gets a new key.
//!
//! Time ([`Clock`]), randomness ([`Jitter`]), the network ([`Transport`]) and the store
//! ([`ActionStore`]) are parameters, so unit tests drive the loop on a fake clock instantly and
//! the incident replay runs it on a compressed one; [`HttpTransport`], [`SystemClock`],
//! [`OsJitter`] and [`FileStore`] are the real ones.

mod action_result;
mod action_store;
mod attempt_loop;
mod clock;
mod events;
mod file_store;
mod http_transport;
mod jitter;
mod payments_client;
mod status_check;
mod transport;
mod typed;

#[cfg(test)]
mod test_support;
#[cfg(test)]
mod vector_tests;

pub use action_result::{ActionResult, Completion, FinalReply, KnownBy, Unsettled};
pub use action_store::{ActionStore, MemoryStore, SavedAction, StoreError};
pub use clock::{Clock, SystemClock};
pub use events::{Event, Report};
pub use file_store::FileStore;
pub use http_transport::{HttpTransport, KEY_HEADER};
pub use jitter::{Jitter, OsJitter};
pub use payments_client::PaymentsClient;
pub use shared::api::{PaymentResponse, RefundResponse};
pub use shared::retry::{ClientRules, PREFER_WAIT_MARGIN, RetrySchedule};
pub use transport::{Reply, SendError, Transport};
pub use typed::PaymentError;
