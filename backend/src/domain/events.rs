//! The audit trail's vocabulary (SPEC §8): what happened to a key ([`EventKind`]), an event to
//! append ([`NewEvent`]), an observation written in a batch ([`Observed`]), and what a write is
//! recorded against ([`Cause`]: the [`RequestId`] and, for an operator's action, the
//! [`OperatorAction`]). The store writes them, the trail's appender batches observations, the
//! flows and the operator API make them.

use std::sync::Arc;

use time::OffsetDateTime;
use uuid::Uuid;

use super::TraceId;
use shared::UserId;

/// What happened to a key (the `event` column). Names are the wire's, in the operator API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// A request claimed the key (and wrote its pending payment or refund).
    Claimed,
    /// A retry claimed a released key again, to call the bank under the same reference.
    ClaimedAgain,
    /// A repeat got the saved reply.
    Replayed,
    /// A repeat with another body was refused (422).
    MismatchRefused,
    /// A repeat while the first attempt ran was refused (409).
    InProgressRefused,
    /// A repeat waited (`Prefer: wait`) for the first attempt's reply.
    Waited,
    /// The request's own bank call ended with the bank's final word.
    BankReplied,
    /// The request's bank call ended without a readable outcome: the key is `unknown`.
    BankReplyUnknown,
    /// The reconciler asked the bank and the reply was not final (or could not be had).
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
    /// Every kind, in the order of the PostgreSQL enum type `key_event_kind`.
    const ALL: [EventKind; 17] = [
        EventKind::Claimed,
        EventKind::ClaimedAgain,
        EventKind::Replayed,
        EventKind::MismatchRefused,
        EventKind::InProgressRefused,
        EventKind::Waited,
        EventKind::BankReplied,
        EventKind::BankReplyUnknown,
        EventKind::LookedUp,
        EventKind::Released,
        EventKind::LateDebitFound,
        EventKind::Resolved,
        EventKind::Voided,
        EventKind::Expired,
        EventKind::OperatorLookup,
        EventKind::LedgerChecked,
        EventKind::CustomerViewed,
    ];

    /// The kind named `name` (a stored or wire name).
    pub fn from_name(name: &str) -> Option<EventKind> {
        EventKind::ALL.into_iter().find(|kind| kind.name() == name)
    }

    /// The stored and wire name.
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Claimed => "claimed",
            EventKind::ClaimedAgain => "claimed_again",
            EventKind::Replayed => "replayed",
            EventKind::MismatchRefused => "mismatch_refused",
            EventKind::InProgressRefused => "in_progress_refused",
            EventKind::Waited => "waited",
            EventKind::BankReplied => "bank_answered",
            EventKind::BankReplyUnknown => "bank_answer_unknown",
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
    pub user_id: UserId,
    /// The key's storage UUID; `None` for a customer-level event.
    pub key: Option<Uuid>,
    /// The claim's payment or refund.
    pub movement_id: Option<Uuid>,
    /// What happened.
    pub kind: EventKind,
    /// A few words more (the bank's reply, the next look-up).
    pub detail: Option<String>,
    /// The causing request's `X-Request-Id`.
    pub request_id: Option<String>,
    /// The causing request's trace.
    pub trace_id: Option<TraceId>,
    /// For an operator's action.
    pub operator: Option<OperatorAction>,
}

impl NewEvent {
    /// An event of the claim (`key`, `movement_id`) of `user_id`, recorded against `cause`.
    pub fn of_claim(
        (user_id, key, movement_id): (UserId, Uuid, Uuid),
        kind: EventKind,
        detail: Option<String>,
        cause: &Cause,
    ) -> NewEvent {
        NewEvent {
            user_id,
            key: Some(key),
            movement_id: Some(movement_id),
            kind,
            detail,
            request_id: cause.request_id.as_ref().map(|id| id.as_str().to_owned()),
            trace_id: cause.trace_id,
            operator: cause.operator.clone(),
        }
    }

    /// A customer-level event of `user_id` (no key): an operator's check or read.
    pub fn of_customer(
        user_id: UserId,
        kind: EventKind,
        detail: String,
        cause: &Cause,
    ) -> NewEvent {
        NewEvent {
            user_id,
            key: None,
            movement_id: None,
            kind,
            detail: Some(detail),
            request_id: cause.request_id.as_ref().map(|id| id.as_str().to_owned()),
            trace_id: cause.trace_id,
            operator: cause.operator.clone(),
        }
    }
}

/// An observation as written: stamped when it happened, with how many it stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    /// The event.
    pub event: NewEvent,
    /// When it happened (this process's clock).
    pub at: OffsetDateTime,
    /// How many identical observations this row stands for.
    pub repeats: u32,
}

/// A request's id: its `X-Request-Id` as sent (1 to 64 visible ASCII characters) or minted by
/// the backend, echoed on its reply and recorded with every event it causes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RequestId(Arc<str>);

impl RequestId {
    /// The id `text` (checked by the HTTP layer that reads it).
    pub fn new(text: &str) -> RequestId {
        RequestId(Arc::from(text))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What a write is recorded against in the audit trail: the request that caused it and, for an
/// operator's action, who and why. Passed to every store write that records an event, so each
/// call site says whom the record names; the reconciler's own work has neither
/// ([`Cause::background`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cause {
    /// The causing request.
    pub request_id: Option<RequestId>,
    /// The causing request's trace.
    pub trace_id: Option<TraceId>,
    /// The operator and their reason, for an operator's action.
    pub operator: Option<OperatorAction>,
}

impl Cause {
    /// A customer's request, under the trace `trace_id`.
    pub fn request(id: &RequestId, trace_id: TraceId) -> Cause {
        Cause {
            request_id: Some(id.clone()),
            trace_id: Some(trace_id),
            operator: None,
        }
    }

    /// An operator's request under the trace `trace_id`, for `action`.
    pub fn operator(id: &RequestId, trace_id: TraceId, action: OperatorAction) -> Cause {
        Cause {
            request_id: Some(id.clone()),
            trace_id: Some(trace_id),
            operator: Some(action),
        }
    }

    /// Work of the backend's own (the reconciler, the janitor): no request, no operator.
    pub fn background() -> Cause {
        Cause::default()
    }
}
