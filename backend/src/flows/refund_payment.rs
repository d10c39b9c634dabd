//! `refund_payment`: claim the key (with a pending refund, checked against what remains of the
//! payment), refund once, save, answer; or answer a repeat from what is saved.

use shared::api::RefundRequest;
use shared::{Operation, Problem, ProblemKind, UserId};
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
use crate::store::{KeyRef, NewRefund, RefundClaimResult, SavedMovement};

/// Refunds part of `payment_id` for `user` once per key; a repeat of a key still in progress
/// waits up to `wait` for its answer (`Prefer: wait`).
#[tracing::instrument(skip_all, fields(user_id = %user, payment_id, key))]
pub async fn refund_payment<'a>(
    state: &AppState,
    user: UserId,
    key_header_values: impl IntoIterator<Item = &'a [u8]>,
    payment_id: &str,
    body: &[u8],
    wait: Option<Duration>,
) -> Result<Answer> {
    let operation = Operation::RefundPayment;
    let admitted = admit(state, operation, key_header_values, payment_id, body)?;
    tracing::Span::current().record("key", tracing::field::display(&admitted.key));
    let request = Arc::new(RefundRequest::from_json(&admitted.body)?);
    let Ok(payment_id) = Uuid::try_parse(payment_id) else {
        return Ok(payment_not_found());
    };
    let key = KeyRef::new(user, &admitted.key);
    if let Some(answer) = answer_from_memory(state, key, &admitted.attempt) {
        return Ok(answer);
    }
    let admitted = Arc::new(admitted);
    answer_in_rounds(state, operation, key, wait, |round| {
        let (state, admitted) = (state.clone(), Arc::clone(&admitted));
        let request = Arc::clone(&request);
        async move { claim_and_refund(&state, key, &admitted, payment_id, &request, round).await }
    })
    .await
}

async fn claim_and_refund(
    state: &AppState,
    key: KeyRef,
    admitted: &Admitted,
    payment_id: Uuid,
    request: &RefundRequest,
    round: Round,
) -> Result<Reached> {
    let refund_id = Uuid::new_v4();
    let refund = NewRefund {
        refund_id,
        payment_id,
        amount_paise: request.amount_paise.as_i64(),
        bank_reference: Operation::RefundPayment.bank_reference(refund_id),
        key_kept_for: state.policy.keep_keys_for,
    };
    let mut read_first = match round {
        Round::First => None,
        Round::AfterWait => state.store.load_key(key).await?,
    };
    for _ in 0..CLAIM_ROUNDS {
        let claimed = match read_first.take() {
            Some(stored) => RefundClaimResult::Existing(stored),
            None => {
                state
                    .store
                    .claim_refund(key, &admitted.attempt.fingerprint, &refund)
                    .await?
            }
        };
        let stored = match claimed {
            RefundClaimResult::Claimed { refund, expires_at } => {
                let movement = SavedMovement::Refund(refund);
                let answer = call_bank_and_save(state, key, &movement).await?;
                return Ok(Reached::Answer(answer.expiring(expires_at)));
            }
            RefundClaimResult::Existing(stored) => stored,
            RefundClaimResult::PaymentNotFound => return Ok(Reached::Answer(payment_not_found())),
            RefundClaimResult::ExceedsRemaining { remaining_paise } => {
                return Ok(Reached::Answer(Answer::problem(Problem::new(
                    ProblemKind::RefundExceedsPayment,
                    format!(
                        "The refund of {} paise exceeds the {remaining_paise} paise that remain refundable on this payment.",
                        refund.amount_paise
                    ),
                ))));
            }
        };
        let step = answer_existing_key(state, key, &admitted.attempt, &stored).await?;
        if let Some(reached) = carry_out(state, key, step, stored.record.expires_at).await? {
            return Ok(reached);
        }
    }
    Err(Error::ClaimRoundsExhausted)
}

fn payment_not_found() -> Answer {
    Answer::problem(Problem::new(
        ProblemKind::NotFound,
        "You have no succeeded payment with this id.",
    ))
}
