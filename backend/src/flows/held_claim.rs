//! The claim a request holds on its key, from its claim (or re-claim) until the request ends:
//! the claim's token, its pending movement, the breaker's leave for its one bank call, and the
//! renewal of its lease while the request lives.

use uuid::Uuid;

use crate::bank::{self, MoneyCall};
use crate::state::AppState;
use crate::store::{CLAIM_LEASE_RENEWAL, ClaimToken, KeyRef, SavedMovement};

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
