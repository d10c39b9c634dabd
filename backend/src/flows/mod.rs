//! The payment operations as the idempotency rules demand them, free of HTTP: each takes the
//! caller (user, request id, wait), the key header's values, the path parameter and the raw
//! body, and returns a [`Reply`](crate::domain::Reply) for the HTTP layer to send. The shared
//! state machine [`shared::server_path`] says every step; these modules only do them.
//!
//! A payment goes: [`pay_bill`] or [`refund_payment`] in `path` (the interpreter: each step the
//! machine names, and what came of it fed back) → the steps: `memory` (admission, and the
//! replay cache), `claim` (claim, re-claim, read), `bank_call` (the call, the save, the mark
//! `unknown`, the release), `stored_key` (replay from the database, ask the bank now, delete an
//! expired key), `waiting` (`Prefer: wait`). What the steps share (the work, what it claims, the
//! claim it holds) is in `work`; `replies` renders every reply.

mod bank_call;
mod claim;
mod memory;
mod path;
mod replies;
mod stored_key;
mod waiting;
mod work;

use std::time::Duration;

use shared::UserId;

use crate::domain::{Cause, RequestId, TraceId};

pub use memory::Submitted;
pub use path::{pay_bill, refund_payment};
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
