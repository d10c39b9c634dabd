//! [`LedgerCheckBounds`]: how much of the bank an operator's ledger checks may take, so that
//! payments keep their bank calls while support staff check customers.
//!
//! A ledger check asks the bank about every reference of a customer; several at once, each with
//! hundreds of references, would otherwise take every one of `MAX_BANK_LOOKUPS` and the
//! reconciler's look-ups would wait. So:
//! - one check per customer at a time (a second is told one is running: 409);
//! - the look-ups of all checks together hold at most a quarter of `MAX_BANK_LOOKUPS` (at least
//!   one), on top of which each look-up still takes its turn in the bank's own bound.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use shared::Operation;
use tokio::sync::Semaphore;

use crate::bank::{Bank, LookUp, LookUpError};
use shared::UserId;

/// The bounds, shared by every ledger check of this process.
#[derive(Debug)]
pub struct LedgerCheckBounds {
    look_ups: Semaphore,
    share: usize,
    running: Mutex<HashSet<UserId>>,
}

/// A customer's check in progress; the customer may be checked again once it is dropped.
#[derive(Debug)]
pub struct RunningCheck {
    bounds: Arc<LedgerCheckBounds>,
    user_id: UserId,
}

impl LedgerCheckBounds {
    /// Bounds for a bank that may have `max_look_ups` look-ups in flight.
    pub fn new(max_look_ups: usize) -> LedgerCheckBounds {
        let share = (max_look_ups / 4).max(1);
        LedgerCheckBounds {
            look_ups: Semaphore::new(share),
            share,
            running: Mutex::default(),
        }
    }

    /// How many look-ups all checks together may have in flight.
    pub fn share(&self) -> usize {
        self.share
    }

    /// Starts a check of `user_id`, or `None` if one is running.
    pub fn begin(self: &Arc<Self>, user_id: UserId) -> Option<RunningCheck> {
        let newly = self
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(user_id.clone());
        newly.then(|| RunningCheck {
            bounds: Arc::clone(self),
            user_id,
        })
    }

    /// Asks the bank about `reference` within the checks' share of its calls.
    pub async fn look_up(
        &self,
        bank: &Bank,
        operation: Operation,
        reference: &str,
    ) -> Result<LookUp, LookUpError> {
        let _turn = self.look_ups.acquire().await;
        bank.look_up(operation, reference).await
    }
}

impl Drop for RunningCheck {
    fn drop(&mut self) {
        self.bounds
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.user_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_check_per_customer_and_a_quarter_of_the_bank() {
        let bounds = Arc::new(LedgerCheckBounds::new(64));
        assert_eq!(bounds.share(), 16);
        assert_eq!(LedgerCheckBounds::new(2).share(), 1, "at least one");
        let first = bounds.begin(UserId::numbered(7)).expect("free");
        assert!(
            bounds.begin(UserId::numbered(7)).is_none(),
            "one at a time per customer"
        );
        assert!(
            bounds.begin(UserId::numbered(8)).is_some(),
            "another customer may be checked"
        );
        drop(first);
        assert!(bounds.begin(UserId::numbered(7)).is_some(), "free again");
    }
}
