//! `refund_payment`: claim the key (with a pending refund, checked against what remains of the
//! payment), refund once, save, reply; or reply to a repeat from what is saved. The path is the
//! shared one (`super::path`).

use shared::Operation;

use super::Caller;
use super::admit::Submitted;
use super::path::carry_out;
use crate::domain::Reply;
use crate::error::Result;
use crate::state::AppState;

/// Refunds part of `payment_id` for the caller once per key; a repeat of a key still in
/// progress waits up to the caller's wait for its reply (`Prefer: wait`).
#[tracing::instrument(skip_all, fields(user_id = %caller.user, payment_id = refund.path_parameter, key))]
pub async fn refund_payment(
    state: &AppState,
    caller: &Caller,
    refund: Submitted<'_>,
) -> Result<Reply> {
    carry_out(state, caller, Operation::RefundPayment, refund).await
}
