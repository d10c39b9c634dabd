//! A payment or a refund once it is admitted, the same for both: in rounds
//! ([`super::rounds`]), claim the key with a fresh pending movement ([`Claiming`] says which);
//! if this request won it, call the bank once and save; if the key is stored already, decide
//! on it ([`super::existing_key`]); if the key had expired and was made way for, claim again.

use std::sync::Arc;
use std::time::{Duration, Instant};

use shared::admission::Fields;
use shared::api::{PayBillRequest, RefundRequest};
use shared::{Fingerprint, Operation, Problem, ProblemKind};
use uuid::Uuid;

use super::Caller;
use super::admit::Admitted;
use super::bank_call::{HeldClaim, call_bank_and_save};
use super::existing_key::{reply_existing_key, reply_from_memory};
use super::replies::bank_unavailable;
use super::rounds::{Round, RoundEnd, reply_in_rounds};
use super::waiting::Waiting;
use crate::domain::{Cause, Reply};
use crate::error::{Error, Result};
use crate::state::AppState;
use crate::store::{ClaimResult, ClaimToken, KeyRef, NewPayment, NewRefund, StoreError, StoredKey};

/// How many claims a round makes at most: the one loop for every race between a claim and the
/// key's row. Reusing an expired key that was released with a check still to come takes three
/// (settle the old claim, delete the key, claim it); a key that vanishes between a claim and
/// its read (expired and deleted in that instant) takes one more; one beyond spares a rarer
/// race a spurious error.
const CLAIM_TRIES: usize = 5;

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
    /// What an admitted request claims: a payment of the bill in its path, or a refund of the
    /// payment in its path; the 404 reply if that is no payment id.
    pub(super) fn of(fields: Fields, path_parameter: &str) -> Result<Claiming, Reply> {
        Ok(match fields {
            Fields::PayBill(request) => Claiming::Payment {
                bill_id: path_parameter.to_owned(),
                request,
            },
            Fields::Refund(request) => Claiming::Refund {
                payment_id: Uuid::try_parse(path_parameter).map_err(|_| payment_not_found())?,
                request,
            },
        })
    }

    fn operation(&self) -> Operation {
        match self {
            Claiming::Payment { .. } => Operation::PayBill,
            Claiming::Refund { .. } => Operation::RefundPayment,
        }
    }

    /// Claims `key` as the claim `claim`, with a fresh pending movement whose id is `id` (a new
    /// id, so a new bank reference).
    async fn claim(
        &self,
        state: &AppState,
        (key, id, claim): (KeyRef, Uuid, ClaimToken),
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
                    .claim_payment(key, fingerprint, &payment, claim, cause)
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
                    .claim_refund(key, fingerprint, &refund, claim, cause)
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

/// Replies to the admitted request of `caller` on its key: from memory if the key's reply is
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
    reply_in_rounds(state, (operation, key), waiting, &cause, |round| {
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
        let stored = match read_first.take() {
            Some(stored) => stored,
            None => match claim_new(state, (key, fingerprint, claiming), cause).await? {
                NewClaim::Replied(end) => return Ok(end),
                NewClaim::Existing(stored) => stored,
                NewClaim::Vanished => continue,
            },
        };
        let attempt = &admitted.attempt;
        if let Some(end) = reply_existing_key(state, key, attempt, &stored, cause).await? {
            return Ok(end);
        }
    }
    Err(Error::ClaimRoundsExhausted)
}

/// What a new claim came to: the round's end, or a key stored already to decide on.
enum NewClaim {
    /// The claim was made and carried out, or refused.
    Replied(RoundEnd),
    /// The (user, key) exists.
    Existing(StoredKey),
    /// The key existed at the claim and was gone at the read (expired and deleted between):
    /// the loop claims again.
    Vanished,
}

/// Claims `key` for a new bank call once the bank breaker admits one, and carries it out. While
/// the breaker refuses, nothing is claimed: a stored key is still decided on (a replay,
/// outcome pending), and a new one gets 503 `bank-unavailable`.
async fn claim_new(
    state: &AppState,
    (key, fingerprint, claiming): (KeyRef, &Fingerprint, &Claiming),
    cause: &Cause,
) -> Result<NewClaim> {
    let admission = match state.bank.admit() {
        Ok(admission) => admission,
        Err(refused) => {
            return Ok(match state.claims().load_key(key).await? {
                Some(stored) => NewClaim::Existing(stored),
                None => NewClaim::Replied(RoundEnd::Reply(bank_unavailable(refused))),
            });
        }
    };
    let (id, claim) = (Uuid::new_v4(), ClaimToken::mint());
    let writing = Instant::now();
    let claimed = claiming
        .claim(state, (key, id, claim), fingerprint, cause)
        .await;
    state.metrics.write_took("claim", writing.elapsed());
    let reply = match claimed {
        Ok(ClaimResult::Claimed {
            movement,
            claim,
            expires_at,
        }) => {
            let held = HeldClaim {
                key,
                claim,
                movement: &movement,
            };
            let reply = call_bank_and_save(state, held, admission, cause).await?;
            reply.expiring(expires_at)
        }
        Ok(ClaimResult::Existing(stored)) => return Ok(NewClaim::Existing(stored)),
        Ok(ClaimResult::Vanished) => return Ok(NewClaim::Vanished),
        Ok(ClaimResult::PaymentNotFound) => payment_not_found(),
        Ok(ClaimResult::ExceedsRemaining { remaining_paise }) => {
            exceeds_remaining(claiming.amount_paise(), remaining_paise)
        }
        Err(error @ StoreError::Unavailable(_)) => {
            release_when_reachable(state, (key, id, claim), cause);
            return Err(error.into());
        }
        Err(error) => return Err(error.into()),
    };
    Ok(NewClaim::Replied(RoundEnd::Reply(reply)))
}

/// Releases the claim `claim` (of `key`, with the movement `id`) whose statement the database
/// never replied, once the database replies again (a failover between the commit and its
/// reply, say), in a task of its own. The claim may have committed or not; either way no bank
/// call was made for it, and only this request would have made one, so releasing it is safe and
/// lets the client's retry claim it again at once, instead of waiting for reconciliation to
/// find it `stuck_after` old. The release matches this claim alone, and only while its row is
/// younger than `stuck_after` on the database's clock: a key released since and claimed again
/// (by a reconciler's release and a retry on another replica, while this one was cut off) is
/// another claim and is left alone. Tries for at most `stuck_after` here too, after which the
/// statement would refuse anyway.
fn release_when_reachable(
    state: &AppState,
    (key, id, claim): (KeyRef, Uuid, ClaimToken),
    cause: &Cause,
) {
    let (state, cause) = (state.clone(), cause.clone());
    tokio::spawn(async move {
        let give_up = tokio::time::Instant::now() + state.policy.stuck_after;
        let mut pause = CLAIM_WITHOUT_REPLY_FIRST_PAUSE;
        while tokio::time::Instant::now() < give_up {
            tokio::time::sleep(pause).await;
            let stuck_after = state.policy.stuck_after;
            match state
                .claims()
                .release_unsent(key, (id, claim), stuck_after, &cause)
                .await
            {
                Ok(()) => return,
                Err(StoreError::Unavailable(_)) => {
                    pause = (pause * 2).min(CLAIM_WITHOUT_REPLY_MAX_PAUSE)
                }
                Err(error) => {
                    tracing::warn!(%error, "could not release a claim whose reply was lost; reconciliation will");
                    return;
                }
            }
        }
    });
}

/// The first pause before releasing a claim whose reply was lost (the database is failing over,
/// which takes seconds); the pause doubles after each try the database did not reply…
const CLAIM_WITHOUT_REPLY_FIRST_PAUSE: Duration = Duration::from_millis(500);
/// …up to this.
const CLAIM_WITHOUT_REPLY_MAX_PAUSE: Duration = Duration::from_secs(5);

/// A refund of a payment the user does not have (or that did not succeed).
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
