//! `pay_bill`: claim the key (with a pending payment), debit once, save, reply; or reply to a
//! repeat from what is saved. The path is the shared one (`super::path`).

use shared::Operation;

use super::Caller;
use super::admit::Submitted;
use super::path::carry_out;
use crate::domain::Reply;
use crate::error::Result;
use crate::state::AppState;

/// Pays `bill_id` for the caller once per key; a repeat of a key still in progress waits up to
/// the caller's wait for its reply (`Prefer: wait`).
#[tracing::instrument(skip_all, fields(user_id = %caller.user, bill_id = bill.path_parameter, key))]
pub async fn pay_bill(state: &AppState, caller: &Caller, bill: Submitted<'_>) -> Result<Reply> {
    carry_out(state, caller, Operation::PayBill, bill).await
}
