//! The audit trail (SPEC §8, docs/design.md "The audit trail"): what happened to each key, in
//! order, with the request that caused it and, for an operator's action, who and why.
//!
//! Two kinds of event reach the `key_events` table:
//! - **state changes** (a claim, the bank's answer, a release, a resolution, expiry) are
//!   written by the store in the very statement or transaction that makes the change
//!   (`store::sql::events`), so one is never committed without the other;
//! - **observations** that change nothing (a replay, a refused mismatch or duplicate, a wait)
//!   are handed to [`Appender`], which writes them in batches off the request path.
//!
//! The request id comes from the request's `X-Request-Id` ([`request_id`]), carried in a
//! task-local so the store can stamp it without every signature naming it.

mod appender;
pub mod request_id;

pub use appender::{Appender, Observed};

use uuid::Uuid;

/// What happened to a key (the `event` column). Names are the wire's, in the operator API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// A request claimed the key (and wrote its pending payment or refund).
    Claimed,
    /// A retry claimed a released key again, to call the bank under the same reference.
    ClaimedAgain,
    /// A repeat got the saved answer.
    Replayed,
    /// A repeat with another body was refused (422).
    MismatchRefused,
    /// A repeat while the first attempt ran was refused (409).
    InProgressRefused,
    /// A repeat waited (`Prefer: wait`) for the first attempt's answer.
    Waited,
    /// The request's own bank call ended with the bank's final word.
    BankAnswered,
    /// The request's bank call ended without a readable outcome: the key is `unknown`.
    BankAnswerUnknown,
    /// The reconciler asked the bank and the answer was not final (or could not be had).
    LookedUp,
    /// The bank never saw the claim's reference: the key is released for a retry.
    Released,
    /// A released claim's reference turned up at the bank after all.
    LateDebitFound,
    /// The reconciler learnt the bank's final word for an unfinished key.
    Resolved,
    /// A released claim's last check found nothing: its movement is void.
    Voided,
    /// The janitor deleted the key.
    Expired,
    /// An operator asked the bank about the key now.
    OperatorLookup,
    /// An operator checked the customer's ledger against the bank's.
    LedgerChecked,
    /// An operator read the customer's record or trail in the console.
    CustomerViewed,
}

impl EventKind {
    /// The stored and wire name.
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Claimed => "claimed",
            EventKind::ClaimedAgain => "claimed_again",
            EventKind::Replayed => "replayed",
            EventKind::MismatchRefused => "mismatch_refused",
            EventKind::InProgressRefused => "in_progress_refused",
            EventKind::Waited => "waited",
            EventKind::BankAnswered => "bank_answered",
            EventKind::BankAnswerUnknown => "bank_answer_unknown",
            EventKind::LookedUp => "looked_up",
            EventKind::Released => "released",
            EventKind::LateDebitFound => "late_debit_found",
            EventKind::Resolved => "resolved",
            EventKind::Voided => "voided",
            EventKind::Expired => "expired",
            EventKind::OperatorLookup => "operator_lookup",
            EventKind::LedgerChecked => "ledger_checked",
            EventKind::CustomerViewed => "customer_viewed",
        }
    }
}

/// Who did an operator's action, and why (both recorded with its event).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorAction {
    /// The operator token's subject.
    pub operator: String,
    /// The reason the operator gave: required for an action that asks the bank (1 to 500
    /// characters, no control characters); `None` for a read, which needs none.
    pub reason: Option<String>,
}

/// One event to append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEvent {
    /// The customer.
    pub user_id: i64,
    /// The key's storage UUID; `None` for a customer-level event.
    pub key: Option<Uuid>,
    /// The claim's payment or refund.
    pub resource_id: Option<Uuid>,
    /// What happened.
    pub kind: EventKind,
    /// A few words more (the bank's answer, the next look-up).
    pub detail: Option<String>,
    /// The causing request's `X-Request-Id`.
    pub request_id: Option<String>,
    /// For an operator's action.
    pub operator: Option<OperatorAction>,
}

impl NewEvent {
    /// An event of the claim (`key`, `resource_id`) of `user_id`, stamped with the current
    /// request's id (none outside a request).
    pub fn of_claim(
        user_id: i64,
        key: Uuid,
        resource_id: Uuid,
        kind: EventKind,
        detail: Option<String>,
    ) -> NewEvent {
        NewEvent {
            user_id,
            key: Some(key),
            resource_id: Some(resource_id),
            kind,
            detail,
            request_id: request_id::current(),
            operator: None,
        }
    }
}
