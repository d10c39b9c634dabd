//! `refund_payment`: claim the key (with a pending refund, checked against what remains of the
//! payment), refund once, save, answer; or answer a repeat from what is saved.

use std::sync::Arc;

use shared::api::RefundRequest;
use shared::{Operation, Problem, ProblemKind};
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
use crate::store::{KeyRef, NewRefund, RefundClaimResult, SavedMovement};

/// Refunds part of `payment_id` for the caller once per key; a repeat of a key still in
/// progress waits up to the caller's wait for its answer (`Prefer: wait`).
#[tracing::instrument(skip_all, fields(user_id = %caller.user, payment_id, key))]
pub async fn refund_payment<'a>(
    state: &AppState,
    caller: &Caller,
    key_header_values: impl IntoIterator<Item = &'a [u8]>,
    payment_id: &str,
    body: &[u8],
) -> Result<Reply> {
    let operation = Operation::RefundPayment;
    let admitted = admit(state, operation, key_header_values, payment_id, body)?;
    tracing::Span::current().record("key", tracing::field::display(&admitted.key));
    let request = Arc::new(RefundRequest::from_json(&admitted.body)?);
    let Ok(payment_id) = Uuid::try_parse(payment_id) else {
        return Ok(payment_not_found());
    };
    let key = KeyRef::new(caller.user, &admitted.key);
    let cause = caller.cause();
    if let Some(reply) = reply_from_memory(state, key, &admitted.attempt, &cause) {
        return Ok(reply);
    }
    let admitted = Arc::new(admitted);
    let waiting = Waiting::new(state, caller.wait);
    answer_in_rounds(state, (operation, key), waiting, &cause, |round| {
        let (state, admitted, cause) = (state.clone(), Arc::clone(&admitted), cause.clone());
        let request = Arc::clone(&request);
        async move {
            let refund_id = Uuid::new_v4();
            let refund = NewRefund {
                refund_id,
                payment_id,
                amount_paise: request.amount_paise.as_i64(),
                bank_reference: operation.bank_reference(refund_id),
                key_kept_for: state.policy.keep_keys_for,
            };
            let fingerprint = admitted.attempt.fingerprint;
            let claim = || async {
                let claims = state.claims();
                Ok(
                    match claims
                        .claim_refund(key, &fingerprint, &refund, &cause)
                        .await?
                    {
                        RefundClaimResult::Claimed { refund, expires_at } => ClaimTry::Claimed {
                            movement: SavedMovement::Refund(refund),
                            expires_at,
                        },
                        RefundClaimResult::Existing(stored) => ClaimTry::Existing(stored),
                        RefundClaimResult::PaymentNotFound => {
                            ClaimTry::Refused(payment_not_found())
                        }
                        RefundClaimResult::ExceedsRemaining { remaining_paise } => {
                            ClaimTry::Refused(exceeds_remaining(
                                refund.amount_paise,
                                remaining_paise,
                            ))
                        }
                    },
                )
            };
            claim_and_carry_out(&state, (key, &admitted), round, &cause, claim).await
        }
    })
    .await
}

fn payment_not_found() -> Reply {
    Reply::problem(Problem::new(
        ProblemKind::NotFound,
        "You have no succeeded payment with this id.",
    ))
}

fn exceeds_remaining(amount_paise: i64, remaining_paise: i64) -> Reply {
    Reply::problem(Problem::new(
        ProblemKind::RefundExceedsPayment,
        format!(
            "The refund of {amount_paise} paise exceeds the {remaining_paise} paise that remain \
             refundable on this payment."
        ),
    ))
}
