//! The bank port: what the payment flows and the reconciler need from a partner bank, and the
//! replies they act on, whatever the bank's API looks like.
//!
//! A partner bank (or a PSP in front of one) is reached through one [`BankPort`]: move money
//! once under a reference, and look a reference up. An adapter turns its bank's wire format
//! into these replies; the first is `super::bank_api_http` (the `bank-api` contract of SPEC §7,
//! which the bank simulator serves). A second bank is one new file implementing the trait.
//!
//! The rule every adapter follows (SPEC §7, "Not executed"; docs/design.md, "The bank port"): a
//! call's reply is [`CallOutcome::Succeeded`] or [`CallOutcome::Declined`] only when the bank
//! said so; [`CallOutcome::NotExecuted`] only for what the adapter *declares* its bank uses to
//! say "I did nothing with this call" (and for a call that provably never left: the connection
//! was refused, the TLS handshake failed); everything else, a gateway's 503 included, is
//! [`CallOutcome::MayBeInFlight`]: the money may have moved or may still move, so the claim is
//! kept and nothing is released until the call cannot still land.

use async_trait::async_trait;
use shared::Operation;

/// One money-moving call, as the flows ask for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MoneyCall<'a> {
    /// Take `amount_paise` from `account`, once per `reference`.
    Debit {
        /// The claim's reference (SPEC §7: one reference per claim).
        reference: &'a str,
        /// How much, in paise; positive.
        amount_paise: i64,
        /// The payer's UPI address.
        account: &'a str,
    },
    /// Give back `amount_paise` of the debit `debit_reference`, once per `reference`.
    Refund {
        /// The claim's reference.
        reference: &'a str,
        /// The reference of the debit refunded.
        debit_reference: &'a str,
        /// How much, in paise; positive.
        amount_paise: i64,
    },
}

impl MoneyCall<'_> {
    /// The reference the call is made under.
    pub fn reference(&self) -> &str {
        match self {
            MoneyCall::Debit { reference, .. } | MoneyCall::Refund { reference, .. } => reference,
        }
    }

    /// How much the call moves, in paise.
    pub fn amount_paise(&self) -> i64 {
        match self {
            MoneyCall::Debit { amount_paise, .. } | MoneyCall::Refund { amount_paise, .. } => {
                *amount_paise
            }
        }
    }

    /// The operation the call carries out.
    pub fn operation(&self) -> Operation {
        match self {
            MoneyCall::Debit { .. } => Operation::PayBill,
            MoneyCall::Refund { .. } => Operation::RefundPayment,
        }
    }

    /// The call's name in metrics and logs: `debit` or `refund`.
    pub fn name(&self) -> &'static str {
        match self {
            MoneyCall::Debit { .. } => "debit",
            MoneyCall::Refund { .. } => "refund",
        }
    }
}

/// How a money-moving call ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallOutcome {
    /// The money moved. Final.
    Succeeded,
    /// The bank refused; no money moved. Final.
    Declined {
        /// The bank's reason.
        reason: String,
    },
    /// The bank itself said it did nothing with the call, or the call never left: nothing moved
    /// and nothing of it is on its way. The claim may be released after a look-up agrees.
    NotExecuted {
        /// What the bank (or the connection) said, for the logs.
        reason: String,
    },
    /// No final reply: the money may have moved, or the call may still reach the bank (a
    /// timeout, a dropped connection, a gateway's error, a reply that cannot be believed).
    MayBeInFlight {
        /// What went wrong, for the logs.
        reason: String,
    },
}

impl CallOutcome {
    /// Whether the bank gave a final reply (moved or refused): a healthy bank, for the
    /// breaker, however it replied.
    pub fn is_final(&self) -> bool {
        matches!(self, CallOutcome::Succeeded | CallOutcome::Declined { .. })
    }
}

/// The bank's record of a reference, from a status look-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LookUp {
    /// The money moved under this reference.
    Succeeded,
    /// The bank refused this reference.
    Declined {
        /// The bank's reason.
        reason: String,
    },
    /// The bank never executed this reference: nothing moved (yet: a call still on its way may
    /// land later, which is why the reconciler believes this only once none can).
    NeverSeen,
    /// The bank holds the reference and has not decided it (the rail's "deemed" or in-progress
    /// state): not final, not released, asked again within the rail's rules.
    Pending,
}

/// A status look-up that got no usable reply; asked again later, within the rail's rules.
#[derive(Debug, thiserror::Error)]
pub enum LookUpError {
    /// No usable reply: the bank was unreachable, slow, or said something unreadable.
    #[error("bank look-up failed: {0}")]
    Failed(String),
    /// The bank refused the check as breaking the rail's rules (too soon, too many): a defect
    /// in our pacing, counted and alerted on.
    #[error("the bank refused the status check under the rail's rules: {0}")]
    RefusedByRules(String),
}

/// A partner bank, as the flows and the reconciler use it. Implementations are adapters for one
/// bank's API each; bounds, the breaker and metrics are the caller's ([`super::Bank`]), not the
/// adapter's.
#[async_trait]
pub trait BankPort: Send + Sync {
    /// Sends `call` once and reads its reply. Never retries: a retry is the client's, under the
    /// same reference.
    async fn move_money(&self, call: MoneyCall<'_>) -> CallOutcome;

    /// Asks what became of `reference`, a movement of `operation`.
    async fn look_up(&self, operation: Operation, reference: &str) -> Result<LookUp, LookUpError>;
}
