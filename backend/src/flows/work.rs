//! What an admitted request's steps share, from its first claim to its reply: the [`Work`]
//! (owned, so that a round can run in a task of its own, `super::path`), what its claim writes
//! ([`Claiming`]: a payment of a bill, or a refund of a payment) and the claim it holds
//! ([`HeldClaim`]: the claim's token, its pending movement, the breaker's leave for its one
//! bank call, and its lease renewed while the request lives). Each step module reads and fills
//! the work: the claim holds the key here, the bank call leaves the bank's word here for the
//! save, and every step that renders a reply leaves it in [`ReplyParts`]. The step modules
//! depend on this one, never the other way.

use std::time::Duration;

use shared::admission::Fields;
use shared::api::{PayBillRequest, RefundRequest};
use shared::server_path::{Ending, Event, ServerPath};
use shared::{Fingerprint, Operation};
use uuid::Uuid;

use super::replies::{ReplyParts, payment_not_found, refuse_mismatch};
use crate::bank::{self, MoneyCall};
use crate::domain::{Cause, Reply};
use crate::state::AppState;
use crate::store::{
    CLAIM_LEASE_RENEWAL, ClaimResult, ClaimToken, FinalOutcome, KeyRef, NewPayment, NewRefund,
    SavedMovement, StoreError, StoredKey,
};

/// An admitted request at work on its key.
pub(super) struct Work {
    /// The application's state.
    pub state: AppState,
    /// The key, with its user.
    pub key: KeyRef,
    /// What the request's writes are recorded against.
    pub cause: Cause,
    /// The request's fingerprint, which a claim stores and a re-claim must match.
    pub fingerprint: Fingerprint,
    /// What a claim writes with the key.
    pub claiming: Claiming,
    /// The key as last read, if it was stored already.
    pub stored: Option<StoredKey>,
    /// The claim this request holds, from its claim until the reply.
    pub held: Option<HeldClaim>,
    /// The bank's final word, from the call until the save.
    pub final_word: Option<FinalOutcome>,
    /// How long the bank call took (zero after a failed save): the first status check counts
    /// from its end.
    pub call_took: Duration,
    /// What the reply is made of.
    pub parts: ReplyParts,
}

impl Work {
    /// The work of the request `claiming` on `key`, with the `parts` its memory phase gathered.
    pub(super) fn new(
        state: &AppState,
        (key, cause): (KeyRef, Cause),
        (fingerprint, claiming): (Fingerprint, Claiming),
        parts: ReplyParts,
    ) -> Work {
        Work {
            state: state.clone(),
            key,
            cause,
            fingerprint,
            claiming,
            stored: None,
            held: None,
            final_word: None,
            call_took: Duration::ZERO,
            parts,
        }
    }

    /// The request's operation.
    pub(super) fn operation(&self) -> Operation {
        self.claiming.operation()
    }

    /// The reply for `ending`; a refused mismatch is counted and recorded in the trail.
    pub(super) fn reply(&mut self, ending: Ending, path: &ServerPath) -> Reply {
        if ending == Ending::Mismatch {
            let key = (self.key.clone(), self.parts.movement_id);
            refuse_mismatch(&self.state, key, self.operation(), &self.cause);
        }
        let amount_paise = Some(self.claiming.amount_paise());
        std::mem::take(&mut self.parts).reply(ending, path.expires_at(), amount_paise)
    }
}

/// The event for a step run without what an earlier step should have left (`what`: a claim,
/// the stored key): a bug in the interpreter, logged. It is one no step produces, so the path
/// gives up with a 500 rather than guess.
pub(super) fn out_of_order(what: &'static str) -> Event {
    tracing::error!(what, "a step of the request's path ran without its input");
    Event::Arrived
}

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

    /// The operation claimed.
    pub(super) fn operation(&self) -> Operation {
        match self {
            Claiming::Payment { .. } => Operation::PayBill,
            Claiming::Refund { .. } => Operation::RefundPayment,
        }
    }

    /// The amount the request moves.
    pub(super) fn amount_paise(&self) -> i64 {
        match self {
            Claiming::Payment { request, .. } => request.amount_paise.as_i64(),
            Claiming::Refund { request, .. } => request.amount_paise.as_i64(),
        }
    }

    /// Claims `key` as the claim `claim`, with a fresh pending movement whose id is `id` (the
    /// request's own, `shared::movement_id`, and so its bank reference).
    pub(super) async fn claim(
        &self,
        state: &AppState,
        (key, id, claim): (KeyRef, Uuid, ClaimToken),
        fingerprint: &Fingerprint,
        cause: &Cause,
    ) -> Result<ClaimResult, StoreError> {
        let bank_reference = self.operation().bank_reference(id);
        let key_kept_for = state.policy.keep_keys_for;
        let claims = state.claims();
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
                claims
                    .claim_refund(key, fingerprint, &refund, claim, cause)
                    .await
            }
        }
    }
}

/// The claim a request holds on its key: the claim's token, its pending movement, the breaker's
/// leave for its one bank call, and the renewal of its lease while the request lives.
pub(super) struct HeldClaim {
    /// This claim of the key: every write on its behalf matches it.
    pub claim: ClaimToken,
    /// The pending payment or refund the claim calls the bank for.
    pub movement: SavedMovement,
    /// The breaker's leave for the call, taken by it.
    pub breaker_leave: Option<bank::Admitted>,
    _renewal: ClaimRenewal,
}

impl HeldClaim {
    /// Holds `claim` of `key` for `movement`, renewing its lease from now on.
    pub(super) fn start(
        state: &AppState,
        (key, claim): (KeyRef, ClaimToken),
        movement: SavedMovement,
        breaker_leave: bank::Admitted,
    ) -> HeldClaim {
        HeldClaim {
            claim,
            movement,
            breaker_leave: Some(breaker_leave),
            _renewal: ClaimRenewal::start(state, key, claim),
        }
    }

    /// The movement and claim every write on the claim's behalf matches.
    pub(super) fn this_claim(&self) -> (Uuid, ClaimToken) {
        (self.movement.id(), self.claim)
    }

    /// The one money-moving call the claim makes.
    pub(super) fn call(&self) -> MoneyCall<'_> {
        match &self.movement {
            SavedMovement::Payment(payment) => MoneyCall::Debit {
                reference: &payment.bank_reference,
                amount_paise: payment.amount_paise,
                account: &payment.payer_vpa,
            },
            SavedMovement::Refund(refund) => MoneyCall::Refund {
                reference: &refund.bank_reference,
                debit_reference: &refund.debit_reference,
                amount_paise: refund.amount_paise,
            },
        }
    }
}

/// Renews the lease of one claim on its key every [`CLAIM_LEASE_RENEWAL`] until dropped, which
/// is when the request ends (its bank call ended and what it said is written): while the process
/// lives, no reconciler takes the key; if it dies, the lease lapses within [`CLAIM_LEASE`] and
/// reconciliation asks the bank at once.
///
/// [`CLAIM_LEASE`]: crate::store::CLAIM_LEASE
struct ClaimRenewal {
    task: tokio::task::JoinHandle<()>,
}

impl ClaimRenewal {
    fn start(state: &AppState, key: KeyRef, claim: ClaimToken) -> ClaimRenewal {
        let store = state.store.clone();
        let task = tokio::spawn(async move {
            loop {
                tokio::time::sleep(CLAIM_LEASE_RENEWAL).await;
                match store.renew_claim(key.clone(), claim).await {
                    Ok(true) => {}
                    // The key moved on, or a reconciler took it: nothing left to hold.
                    Ok(false) => return,
                    Err(error) => tracing::warn!(%error, "could not renew a claim's lease"),
                }
            }
        });
        ClaimRenewal { task }
    }
}

impl Drop for ClaimRenewal {
    fn drop(&mut self) {
        self.task.abort();
    }
}
