//! A payment or a refund once it is admitted, the same for both: in rounds
//! ([`super::rounds`]), claim the key with a fresh pending movement ([`Claiming`] says which);
//! if this request won it, call the bank once and save; if the key is stored already, decide
//! on it ([`super::existing_key`]); if the key had expired and was made way for, claim again.

use std::sync::Arc;
use std::time::{Duration, Instant};

use shared::api::{PayBillRequest, RefundRequest};
use shared::{Fingerprint, Operation, Problem, ProblemKind};
use uuid::Uuid;

use super::Caller;
use super::admit::Admitted;
use super::bank_call::call_bank_and_save;
use super::existing_key::{answer_existing_key, reply_from_memory};
use super::rounds::{Round, RoundEnd, answer_in_rounds};
use super::waiting::Waiting;
use crate::domain::{Cause, Reply};
use crate::error::{Error, Result};
use crate::state::AppState;
use crate::store::{ClaimResult, KeyRef, NewPayment, NewRefund, StoreError};

/// How many claims a round makes at most. Reusing an expired key that was released with a
/// check still to come takes three (settle the old claim, delete the key, claim it); one more
/// spares a rare race a spurious error.
const CLAIM_TRIES: usize = 4;

/// What a claim writes with the key: a payment of a bill, or a refund of a payment.
#[derive(Debug)]
pub(super) enum Claiming {
    /// `pay_bill` of `bill_id`.
    Payment {
        /// The bill.
        bill_id: String,
        /// The checked body.
        request: PayBillRequest,
    },
    /// `refund_payment` of `payment_id`.
    Refund {
        /// The payment refunded.
        payment_id: Uuid,
        /// The checked body.
        request: RefundRequest,
    },
}

impl Claiming {
    fn operation(&self) -> Operation {
        match self {
            Claiming::Payment { .. } => Operation::PayBill,
            Claiming::Refund { .. } => Operation::RefundPayment,
        }
    }

    /// Claims `key` with a fresh pending movement whose id is `id` (a new id, so a new bank
    /// reference).
    async fn claim(
        &self,
        state: &AppState,
        (key, id): (KeyRef, Uuid),
        fingerprint: &Fingerprint,
        cause: &Cause,
    ) -> Result<ClaimResult, StoreError> {
        let bank_reference = self.operation().bank_reference(id);
        let key_kept_for = state.policy.keep_keys_for;
        match self {
            Claiming::Payment { bill_id, request } => {
                let payment = NewPayment {
                    payment_id: id,
                    bill_id: bill_id.clone(),
                    amount_paise: request.amount_paise.as_i64(),
                    payer_vpa: request.payer_vpa.clone(),
                    bank_reference,
                    key_kept_for,
                };
                let claims = state.claims();
                claims
                    .claim_payment(key, fingerprint, &payment, cause)
                    .await
            }
            Claiming::Refund {
                payment_id,
                request,
            } => {
                let refund = NewRefund {
                    refund_id: id,
                    payment_id: *payment_id,
                    amount_paise: request.amount_paise.as_i64(),
                    bank_reference,
                    key_kept_for,
                };
                state
                    .claims()
                    .claim_refund(key, fingerprint, &refund, cause)
                    .await
            }
        }
    }

    fn amount_paise(&self) -> i64 {
        match self {
            Claiming::Payment { request, .. } => request.amount_paise.as_i64(),
            Claiming::Refund { request, .. } => request.amount_paise.as_i64(),
        }
    }
}

/// Answers the admitted request of `caller` on its key: from memory if the key's reply is
/// remembered, else in rounds of [`claim_and_carry_out`].
pub(super) async fn claim_in_rounds(
    state: &AppState,
    caller: &Caller,
    admitted: Admitted,
    claiming: Claiming,
) -> Result<Reply> {
    let key = KeyRef::new(caller.user, &admitted.key);
    let cause = caller.cause();
    let attempt = (&admitted.attempt, admitted.sent);
    if let Some(reply) = reply_from_memory(state, key, attempt, &cause) {
        return Ok(reply);
    }
    let operation = claiming.operation();
    let shared = Arc::new((admitted, claiming));
    let waiting = Waiting::new(state, caller.wait);
    answer_in_rounds(state, (operation, key), waiting, &cause, |round| {
        let (state, shared, cause) = (state.clone(), Arc::clone(&shared), cause.clone());
        async move {
            let (admitted, claiming) = &*shared;
            claim_and_carry_out(&state, (key, admitted, claiming), round, &cause).await
        }
    })
    .await
}

/// One round of the request `admitted` on `key`: claims (or, after a wait, reads the key
/// first), and carries out what follows, recorded against `cause`.
async fn claim_and_carry_out(
    state: &AppState,
    (key, admitted, claiming): (KeyRef, &Admitted, &Claiming),
    round: Round,
    cause: &Cause,
) -> Result<RoundEnd> {
    let mut read_first = match round {
        Round::First => None,
        Round::AfterWait => state.claims().load_key(key).await?,
    };
    let fingerprint = &admitted.attempt.fingerprint;
    for _ in 0..CLAIM_TRIES {
        let claimed = match read_first.take() {
            Some(stored) => ClaimResult::Existing(stored),
            None => {
                let id = Uuid::new_v4();
                let writing = Instant::now();
                let claim = claiming.claim(state, (key, id), fingerprint, cause).await;
                state.metrics.write_took("claim", writing.elapsed());
                match claim {
                    Ok(claimed) => claimed,
                    Err(error @ StoreError::Unavailable(_)) => {
                        release_when_reachable(state, (key, id), cause);
                        return Err(error.into());
                    }
                    Err(error) => return Err(error.into()),
                }
            }
        };
        let stored = match claimed {
            ClaimResult::Claimed {
                movement,
                expires_at,
            } => {
                let reply = call_bank_and_save(state, key, &movement, cause).await?;
                return Ok(RoundEnd::Reply(reply.expiring(expires_at)));
            }
            ClaimResult::Existing(stored) => stored,
            ClaimResult::PaymentNotFound => return Ok(RoundEnd::Reply(payment_not_found())),
            ClaimResult::ExceedsRemaining { remaining_paise } => {
                let refused = exceeds_remaining(claiming.amount_paise(), remaining_paise);
                return Ok(RoundEnd::Reply(refused));
            }
        };
        let attempt = &admitted.attempt;
        if let Some(end) = answer_existing_key(state, key, attempt, &stored, cause).await? {
            return Ok(end);
        }
    }
    Err(Error::ClaimRoundsExhausted)
}

/// Releases the claim (`key`, `id`) whose statement the database never answered, once the
/// database answers again (a failover between the commit and its reply, say), in a task of its
/// own. The claim may have committed or not; either way no bank call was made for it, and only
/// this process would have made one, so releasing it is safe and lets the client's retry claim
/// it again at once, instead of waiting for reconciliation to find it `stuck_after` old. Tries
/// for at most `stuck_after`, when reconciliation would release it anyway.
fn release_when_reachable(state: &AppState, (key, id): (KeyRef, Uuid), cause: &Cause) {
    let (state, cause) = (state.clone(), cause.clone());
    tokio::spawn(async move {
        let give_up = tokio::time::Instant::now() + state.policy.stuck_after;
        let mut pause = UNANSWERED_CLAIM_FIRST_PAUSE;
        while tokio::time::Instant::now() < give_up {
            tokio::time::sleep(pause).await;
            let stuck_after = state.policy.stuck_after;
            match state
                .claims()
                .release_unsent(key, id, stuck_after, &cause)
                .await
            {
                Ok(()) => return,
                Err(StoreError::Unavailable(_)) => {
                    pause = (pause * 2).min(UNANSWERED_CLAIM_MAX_PAUSE)
                }
                Err(error) => {
                    tracing::warn!(%error, "could not release a claim whose answer was lost; reconciliation will");
                    return;
                }
            }
        }
    });
}

/// The first pause before releasing a claim whose answer was lost (the database is failing over,
/// which takes seconds); the pause doubles after each try the database did not answer…
const UNANSWERED_CLAIM_FIRST_PAUSE: Duration = Duration::from_millis(500);
/// …up to this.
const UNANSWERED_CLAIM_MAX_PAUSE: Duration = Duration::from_secs(5);

/// A refund of a payment the user does not have (or that did not succeed).
pub(super) fn payment_not_found() -> Reply {
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
