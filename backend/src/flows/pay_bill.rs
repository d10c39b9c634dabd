//! `pay_bill`: claim the key (with a pending payment), debit once, save, answer; or answer a
//! repeat from what is saved.

use shared::api::{PayBillRequest, check_bill_id};
use shared::{Operation, UserId};
use uuid::Uuid;

use std::sync::Arc;
use std::time::Duration;

use super::answer::Answer;
use super::bank_call::call_bank_and_save;
use super::existing_key::{CLAIM_ROUNDS, answer_existing_key, answer_from_memory, carry_out};
use super::request::{Admitted, admit};
use super::waiting::{Reached, Round, answer_in_rounds};
use crate::error::{Error, Result};
use crate::state::AppState;
use crate::store::{ClaimResult, KeyRef, NewPayment, SavedMovement};

/// Pays `bill_id` for `user` once per key; a repeat of a key still in progress waits up to
/// `wait` for its answer (`Prefer: wait`).
#[tracing::instrument(skip_all, fields(user_id = %user, bill_id, key))]
pub async fn pay_bill<'a>(
    state: &AppState,
    user: UserId,
    key_header_values: impl IntoIterator<Item = &'a [u8]>,
    bill_id: &str,
    body: &[u8],
    wait: Option<Duration>,
) -> Result<Answer> {
    let operation = Operation::PayBill;
    let admitted = admit(state, operation, key_header_values, bill_id, body)?;
    tracing::Span::current().record("key", tracing::field::display(&admitted.key));
    check_bill_id(bill_id)?;
    let request = Arc::new(PayBillRequest::from_json(&admitted.body)?);
    let key = KeyRef::new(user, &admitted.key);
    if let Some(answer) = answer_from_memory(state, key, &admitted.attempt) {
        return Ok(answer);
    }
    let (admitted, bill_id) = (Arc::new(admitted), Arc::<str>::from(bill_id));
    answer_in_rounds(state, operation, key, wait, |round| {
        let (state, admitted) = (state.clone(), Arc::clone(&admitted));
        let (bill_id, request) = (Arc::clone(&bill_id), Arc::clone(&request));
        async move { claim_and_pay(&state, key, &admitted, &bill_id, &request, round).await }
    })
    .await
}

async fn claim_and_pay(
    state: &AppState,
    key: KeyRef,
    admitted: &Admitted,
    bill_id: &str,
    request: &PayBillRequest,
    round: Round,
) -> Result<Reached> {
    let payment_id = Uuid::new_v4();
    let payment = NewPayment {
        payment_id,
        bill_id: bill_id.to_owned(),
        amount_paise: request.amount_paise.as_i64(),
        payer_vpa: request.payer_vpa.clone(),
        bank_reference: Operation::PayBill.bank_reference(payment_id),
        key_kept_for: state.policy.keep_keys_for,
    };
    let mut read_first = match round {
        Round::First => None,
        Round::AfterWait => state.store.load_key(key).await?,
    };
    for _ in 0..CLAIM_ROUNDS {
        let claimed = match read_first.take() {
            Some(stored) => ClaimResult::Existing(stored),
            None => {
                state
                    .store
                    .claim_payment(key, &admitted.attempt.fingerprint, &payment)
                    .await?
            }
        };
        let stored = match claimed {
            ClaimResult::Claimed {
                movement,
                expires_at,
            } => {
                let movement = SavedMovement::Payment(movement);
                let answer = call_bank_and_save(state, key, &movement).await?;
                return Ok(Reached::Answer(answer.expiring(expires_at)));
            }
            ClaimResult::Existing(stored) => stored,
        };
        let step = answer_existing_key(state, key, &admitted.attempt, &stored).await?;
        if let Some(reached) = carry_out(state, key, step, stored.record.expires_at).await? {
            return Ok(reached);
        }
    }
    Err(Error::ClaimRoundsExhausted)
}
