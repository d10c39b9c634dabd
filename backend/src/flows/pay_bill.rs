//! `pay_bill`: claim the key (with a pending payment), debit once, save, answer; or answer a
//! repeat from what is saved.

use shared::api::{PayBillRequest, check_bill_id};
use shared::{Operation, UserId};
use uuid::Uuid;

use super::answer::Answer;
use super::bank_call::{call_bank_and_save, run_to_completion};
use super::existing_key::{CLAIM_ROUNDS, Step, answer_existing_key};
use super::request::{Admitted, admit};
use crate::error::{Error, Result};
use crate::state::AppState;
use crate::store::{ClaimResult, KeyRef, NewPayment, SavedMovement};

/// Pays `bill_id` for `user` once per key.
#[tracing::instrument(skip_all, fields(user_id = %user, bill_id, key))]
pub async fn pay_bill<'a>(
    state: &AppState,
    user: UserId,
    key_header_values: impl IntoIterator<Item = &'a [u8]>,
    bill_id: &str,
    body: &[u8],
) -> Result<Answer> {
    let admitted = admit(state, Operation::PayBill, key_header_values, bill_id, body)?;
    tracing::Span::current().record("key", tracing::field::display(&admitted.key));
    check_bill_id(bill_id)?;
    let request = PayBillRequest::from_json(&admitted.body)?;
    let work = {
        let (state, bill_id) = (state.clone(), bill_id.to_owned());
        async move { claim_and_pay(&state, user, &admitted, &bill_id, &request).await }
    };
    run_to_completion(work).await
}

async fn claim_and_pay(
    state: &AppState,
    user: UserId,
    admitted: &Admitted,
    bill_id: &str,
    request: &PayBillRequest,
) -> Result<Answer> {
    let key = KeyRef::new(user, &admitted.key);
    let payment_id = Uuid::new_v4();
    let payment = NewPayment {
        payment_id,
        bill_id: bill_id.to_owned(),
        amount_paise: request.amount_paise.as_i64(),
        payer_vpa: request.payer_vpa.clone(),
        bank_reference: Operation::PayBill.bank_reference(payment_id),
    };
    for _ in 0..CLAIM_ROUNDS {
        let stored = match state
            .store
            .claim_payment(key, &admitted.attempt.fingerprint, &payment)
            .await?
        {
            ClaimResult::Claimed(payment) => {
                let movement = SavedMovement::Payment(payment);
                return call_bank_and_save(state, key, &movement).await;
            }
            ClaimResult::Existing(stored) => stored,
        };
        match answer_existing_key(state, key, &admitted.attempt, &stored).await? {
            Step::Answer(answer) => return Ok(answer),
            Step::CallBank(movement) => return call_bank_and_save(state, key, &movement).await,
            Step::ClaimAgain => continue,
        }
    }
    Err(Error::ClaimRoundsExhausted)
}
