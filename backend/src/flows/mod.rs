//! The payment operations as the idempotency rules demand them, free of HTTP: each takes the
//! caller (user, request id, wait), the key header's values, the path parameter and the raw
//! body, and returns a [`Reply`](crate::domain::Reply) for the HTTP layer to send. The shared
//! [`shared::decide`] says what to do; these modules only do it.
//!
//! A payment goes: [`pay_bill`] or [`refund_payment`] → `admit` (the checks before any
//! database work) → `rounds` (one round of work, and waiting between rounds for `Prefer: wait`)
//! → `claim` (the claim, or the decision on the stored key: `existing_key`) → `bank_call` (one
//! bank call under the claim's reference, and the save). The decision's outcome reaches the
//! round as a [`RoundEnd`](rounds::RoundEnd); `replies` holds the replies they share.

mod admit;
mod bank_call;
mod claim;
mod existing_key;
mod pay_bill;
mod refund_payment;
mod replies;
mod rounds;
mod waiting;

use std::time::Duration;

use shared::UserId;

use crate::domain::{Cause, RequestId, TraceId};

pub use admit::Submitted;
pub use pay_bill::pay_bill;
pub use refund_payment::refund_payment;
pub use replies::{payment_body, refund_body, saved_reply};
pub use waiting::{POLL_INTERVAL, Waiting};

/// Who sent a request, and how long it may wait for its key's first attempt.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The authenticated user.
    pub user: UserId,
    /// The request's id, recorded with every event it causes.
    pub request_id: RequestId,
    /// The request's trace, recorded with every event it causes too.
    pub trace_id: TraceId,
    /// `Prefer: wait`, capped by the policy; `None` if it does not wait.
    pub wait: Option<Duration>,
}

impl Caller {
    /// What the request's writes are recorded against.
    fn cause(&self) -> Cause {
        Cause::request(&self.request_id, self.trace_id)
    }
}
