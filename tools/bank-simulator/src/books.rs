//! The bank's books: the ledger plus the memory of every outcome, changed only under one lock.
//!
//! [`Books`] is plain data with no clock, lock or I/O; the simulator holds it in a `Mutex` and
//! makes each check-and-record one call sequence under one guard, so two concurrent requests
//! with the same reference cannot both execute while dedupe is on.

use std::collections::HashMap;

use bank_api::{
    DebitOutcome, DebitRequest, DeclineReason, Ledger, LedgerEntry, RefundOutcome, RefundRejection,
    RefundRequest,
};
use time::OffsetDateTime;

/// Executed movements and the outcome recorded for every reference.
#[derive(Debug, Default)]
pub(crate) struct Books {
    ledger: Ledger,
    /// The outcome per debit reference: what dedupe replays and lookups report. With dedupe
    /// off a repeat overwrites it, so a lookup reports the latest execution.
    debit_outcomes: HashMap<String, DebitOutcome>,
    /// The same for refunds.
    refund_outcomes: HashMap<String, RefundOutcome>,
}

impl Books {
    /// The outcome recorded for a debit reference, if the bank ever decided it.
    pub(crate) fn debit_outcome(&self, reference: &str) -> Option<DebitOutcome> {
        self.debit_outcomes.get(reference).cloned()
    }

    /// The outcome recorded for a refund reference, if the bank ever decided it.
    pub(crate) fn refund_outcome(&self, reference: &str) -> Option<RefundOutcome> {
        self.refund_outcomes.get(reference).cloned()
    }

    /// Moves the money and records the outcome.
    pub(crate) fn execute_debit(
        &mut self,
        request: &DebitRequest,
        at: OffsetDateTime,
    ) -> DebitOutcome {
        self.ledger.debits.push(LedgerEntry {
            reference: request.reference.clone(),
            amount_paise: request.amount_paise,
            account: request.account.clone(),
            debit_reference: None,
            at,
        });
        let outcome = DebitOutcome::Debited {
            bank_reference: request.reference.clone(),
        };
        self.debit_outcomes
            .insert(request.reference.clone(), outcome.clone());
        outcome
    }

    /// Records a decline; no money moves.
    pub(crate) fn decline_debit(&mut self, request: &DebitRequest) -> DebitOutcome {
        let outcome = DebitOutcome::Declined {
            reason: DeclineReason::InsufficientFunds,
        };
        self.debit_outcomes
            .insert(request.reference.clone(), outcome.clone());
        outcome
    }

    /// Moves the money back if the debit was executed and has enough left unrefunded, else
    /// records the rejection. Either way the outcome is remembered.
    pub(crate) fn execute_refund(
        &mut self,
        request: &RefundRequest,
        at: OffsetDateTime,
    ) -> RefundOutcome {
        let outcome = match self.check_refund(request) {
            Ok(account) => {
                self.ledger.refunds.push(LedgerEntry {
                    reference: request.reference.clone(),
                    amount_paise: request.amount_paise,
                    account,
                    debit_reference: Some(request.debit_reference.clone()),
                    at,
                });
                RefundOutcome::Refunded {
                    bank_reference: request.reference.clone(),
                }
            }
            Err(reason) => RefundOutcome::Rejected { reason },
        };
        self.refund_outcomes
            .insert(request.reference.clone(), outcome.clone());
        outcome
    }

    /// The account to refund to, or why the refund is refused. A debit executed twice (dedupe
    /// off) can be refunded up to what both took.
    fn check_refund(&self, request: &RefundRequest) -> Result<String, RefundRejection> {
        let mut debits = self.ledger.debits_for(&request.debit_reference).peekable();
        let account = debits
            .peek()
            .map(|debit| debit.account.clone())
            .ok_or(RefundRejection::UnknownDebit)?;
        let debited: u64 = debits
            .map(|debit| debit.amount_paise)
            .fold(0, u64::saturating_add);
        let refunded: u64 = self
            .ledger
            .refunds_of(&request.debit_reference)
            .map(|refund| refund.amount_paise)
            .fold(0, u64::saturating_add);
        if refunded.saturating_add(request.amount_paise) > debited {
            return Err(RefundRejection::ExceedsDebit);
        }
        Ok(account)
    }

    /// A copy of the ledger.
    pub(crate) fn ledger(&self) -> Ledger {
        self.ledger.clone()
    }

    /// Forgets every movement and outcome.
    pub(crate) fn clear(&mut self) {
        *self = Self::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn debit(reference: &str, amount_paise: u64) -> DebitRequest {
        DebitRequest {
            reference: reference.into(),
            amount_paise,
            account: "asha@okbank".into(),
        }
    }

    fn refund(reference: &str, debit_reference: &str, amount_paise: u64) -> RefundRequest {
        RefundRequest {
            reference: reference.into(),
            debit_reference: debit_reference.into(),
            amount_paise,
        }
    }

    #[test]
    fn refunds_are_limited_to_what_the_debit_took() {
        let now = OffsetDateTime::now_utc();
        let mut books = Books::default();
        books.execute_debit(&debit("d", 1_000), now);

        assert!(matches!(
            books.execute_refund(&refund("f1", "d", 600), now),
            RefundOutcome::Refunded { .. }
        ));
        assert_eq!(
            books.execute_refund(&refund("f2", "d", 401), now),
            RefundOutcome::Rejected {
                reason: RefundRejection::ExceedsDebit
            }
        );
        assert!(matches!(
            books.execute_refund(&refund("f3", "d", 400), now),
            RefundOutcome::Refunded { .. }
        ));

        let ledger = books.ledger();
        assert_eq!(ledger.refunds.len(), 2);
        assert!(
            ledger
                .refunds
                .iter()
                .all(|entry| entry.account == "asha@okbank")
        );
    }

    #[test]
    fn declined_debits_cannot_be_refunded() {
        let now = OffsetDateTime::now_utc();
        let mut books = Books::default();
        books.decline_debit(&debit("d", 1_000));
        assert_eq!(
            books.execute_refund(&refund("f", "d", 1), now),
            RefundOutcome::Rejected {
                reason: RefundRejection::UnknownDebit
            }
        );
        assert!(books.ledger().debits.is_empty());
    }

    #[test]
    fn a_debit_executed_twice_can_be_refunded_twice_over() {
        let now = OffsetDateTime::now_utc();
        let mut books = Books::default();
        books.execute_debit(&debit("d", 500), now);
        books.execute_debit(&debit("d", 500), now);
        assert!(matches!(
            books.execute_refund(&refund("f", "d", 1_000), now),
            RefundOutcome::Refunded { .. }
        ));
    }
}
