//! `pay_bill`: claim the key (with a pending payment), debit once, save, reply; or reply to a
//! repeat from what is saved.

use shared::Operation;

use super::Caller;
use super::admit::{Submitted, admit};
use super::claim::{Claiming, claim_in_rounds};
use super::existing_key::replay_of_the_same_bytes;
use crate::domain::Reply;
use crate::error::Result;
use crate::state::AppState;

/// Pays `bill_id` for the caller once per key; a repeat of a key still in progress waits up to
/// the caller's wait for its reply (`Prefer: wait`).
#[tracing::instrument(skip_all, fields(user_id = %caller.user, bill_id = bill.path_parameter, key))]
pub async fn pay_bill(state: &AppState, caller: &Caller, bill: Submitted<'_>) -> Result<Reply> {
    if let Some(reply) = replay_of_the_same_bytes(state, caller, Operation::PayBill, &bill) {
        return Ok(reply);
    }
    let (admitted, fields) = admit(state, Operation::PayBill, &bill)?;
    match Claiming::of(fields, bill.path_parameter) {
        Ok(payment) => claim_in_rounds(state, caller, admitted, payment).await,
        Err(refused) => Ok(refused),
    }
}
