//! The bank's ledger as callers see it: one entry per money movement actually executed.
//!
//! This is what "exactly once" is counted against: a debit deduplicated by the bank adds
//! nothing, a debit executed twice (dedupe off) shows as two entries. Served at `GET /ledger`
//! by the bank simulator (and returned in-process by its `ledger()`), read by tests and tools.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

/// A snapshot of every executed movement, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ledger {
    /// Executed debits (declines are not movements and are not here).
    pub debits: Vec<LedgerEntry>,
    /// Executed refunds (rejections are not here).
    pub refunds: Vec<LedgerEntry>,
}

/// One executed movement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerEntry {
    /// The request's reference.
    pub reference: String,
    /// How much moved, in paise.
    pub amount_paise: u64,
    /// The account debited, or for a refund the account of the refunded debit.
    pub account: String,
    /// For a refund, the reference of the refunded debit; absent on debits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debit_reference: Option<String>,
    /// When the movement was executed (RFC 3339, UTC).
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
}

impl Ledger {
    /// The executed debits with this reference (two or more only when dedupe was off).
    pub fn debits_for<'a>(&'a self, reference: &'a str) -> impl Iterator<Item = &'a LedgerEntry> {
        self.debits
            .iter()
            .filter(move |entry| entry.reference == reference)
    }

    /// The executed refunds of the debit with this reference.
    pub fn refunds_of<'a>(
        &'a self,
        debit_reference: &'a str,
    ) -> impl Iterator<Item = &'a LedgerEntry> {
        self.refunds
            .iter()
            .filter(move |entry| entry.debit_reference.as_deref() == Some(debit_reference))
    }
}
