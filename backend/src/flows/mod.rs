//! The payment operations as the idempotency rules demand them, free of HTTP: each takes the
//! authenticated user, the key header's values, the path parameter and the raw body, and returns
//! an [`Answer`] for the HTTP layer to send. The shared [`shared::decide`] says what to do; these
//! modules only do it.

mod answer;
mod bank_call;
mod existing_key;
mod pay_bill;
mod refund_payment;
mod request;
mod waiting;

pub use answer::Answer;
pub use pay_bill::pay_bill;
pub use refund_payment::refund_payment;
pub use waiting::{POLL_INTERVAL, Waiting};
