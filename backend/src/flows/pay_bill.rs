//! `pay_bill`: claim the key (with a pending payment), debit once, save, answer; or answer a
//! repeat from what is saved.

use std::sync::Arc;

use shared::Operation;
use shared::api::{PayBillRequest, check_bill_id};
use uuid::Uuid;

use super::Caller;
use super::admit::admit;
use super::claim::{ClaimTry, claim_and_carry_out};
use super::existing_key::reply_from_memory;
use super::rounds::answer_in_rounds;
use super::waiting::Waiting;
use crate::domain::Reply;
use crate::error::Result;
use crate::state::AppState;
use crate::store::{ClaimResult, KeyRef, NewPayment, SavedMovement};

/// Pays `bill_id` for the caller once per key; a repeat of a key still in progress waits up to
/// the caller's wait for its answer (`Prefer: wait`).
#[tracing::instrument(skip_all, fields(user_id = %caller.user, bill_id, key))]
pub async fn pay_bill<'a>(
    state: &AppState,
    caller: &Caller,
    key_header_values: impl IntoIterator<Item = &'a [u8]>,
    bill_id: &str,
    body: &[u8],
) -> Result<Reply> {
    let operation = Operation::PayBill;
    let admitted = admit(state, operation, key_header_values, bill_id, body)?;
    tracing::Span::current().record("key", tracing::field::display(&admitted.key));
    check_bill_id(bill_id)?;
    let request = Arc::new(PayBillRequest::from_json(&admitted.body)?);
    let key = KeyRef::new(caller.user, &admitted.key);
    let cause = caller.cause();
    if let Some(reply) = reply_from_memory(state, key, &admitted.attempt, &cause) {
        return Ok(reply);
    }
    let (admitted, bill_id) = (Arc::new(admitted), Arc::<str>::from(bill_id));
    let waiting = Waiting::new(state, caller.wait);
    answer_in_rounds(state, (operation, key), waiting, &cause, |round| {
        let (state, admitted, cause) = (state.clone(), Arc::clone(&admitted), cause.clone());
        let (bill_id, request) = (Arc::clone(&bill_id), Arc::clone(&request));
        async move {
            let payment_id = Uuid::new_v4();
            let payment = NewPayment {
                payment_id,
                bill_id: bill_id.to_string(),
                amount_paise: request.amount_paise.as_i64(),
                payer_vpa: request.payer_vpa.clone(),
                bank_reference: operation.bank_reference(payment_id),
                key_kept_for: state.policy.keep_keys_for,
            };
            let fingerprint = admitted.attempt.fingerprint;
            let claim = || async {
                let claims = state.claims();
                Ok(
                    match claims
                        .claim_payment(key, &fingerprint, &payment, &cause)
                        .await?
                    {
                        ClaimResult::Claimed {
                            movement,
                            expires_at,
                        } => ClaimTry::Claimed {
                            movement: SavedMovement::Payment(movement),
                            expires_at,
                        },
                        ClaimResult::Existing(stored) => ClaimTry::Existing(stored),
                    },
                )
            };
            claim_and_carry_out(&state, (key, &admitted), round, &cause, claim).await
        }
    })
    .await
}
