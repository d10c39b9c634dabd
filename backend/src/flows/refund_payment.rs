//! `refund_payment`: claim the key (with a pending refund, checked against what remains of the
//! payment), refund once, save, reply; or reply to a repeat from what is saved.

use shared::Operation;

use super::Caller;
use super::admit::{Submitted, admit};
use super::claim::{Claiming, claim_in_rounds};
use super::existing_key::replay_of_the_same_bytes;
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
    if let Some(reply) = replay_of_the_same_bytes(state, caller, Operation::RefundPayment, &refund)
    {
        return Ok(reply);
    }
    let (admitted, fields) = admit(state, Operation::RefundPayment, &refund)?;
    match Claiming::of(fields, refund.path_parameter) {
        Ok(refund) => claim_in_rounds(state, caller, admitted, refund).await,
        Err(refused) => Ok(refused),
    }
}
