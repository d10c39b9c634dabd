//! The JSON bodies the bank reads and writes, strictly typed: what the bank simulator serves.
//!
//! An outcome's `status` field says which outcome it is; the HTTP status code says the same
//! thing once more (201, 402, 422). Look-ups reply 200 with whichever outcome was recorded, or
//! the status the original call got (201, 402, 422), as some banks do (SPEC §7; the
//! simulator's [`crate::LookupStatus`] knob). A reference the bank never saw is
//! `404 {"status": "unknown", "reference": …}`; an unknown route is a 404 with another body, so
//! a caller can never mistake a wrong route for "never seen". A client that must also read
//! banks other than the simulator reads these bodies leniently with [`crate::ReplyBody`].

use serde::{Deserialize, Serialize};

/// `POST /debits`: take `amount_paise` from `account`, once per `reference`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DebitRequest {
    /// The caller's unique name for this debit; a repeat replays the first outcome.
    pub reference: String,
    /// How much to take, in paise; must be positive.
    pub amount_paise: u64,
    /// The payer's UPI address (`name@bank`).
    pub account: String,
}

/// `POST /refunds`: give back part or all of an executed debit, once per `reference`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefundRequest {
    /// The caller's unique name for this refund; a repeat replays the first outcome.
    pub reference: String,
    /// The `reference` of the debit being refunded.
    pub debit_reference: String,
    /// How much to give back, in paise; must be positive.
    pub amount_paise: u64,
}

/// What became of a debit: the body of `POST /debits` (201 or 402) and `GET /debits/{reference}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum DebitOutcome {
    /// The money moved.
    Debited {
        /// The bank's name for the movement (the request's `reference`).
        bank_reference: String,
    },
    /// The bank refused; no money moved. Final: a repeat gets the same reply.
    Declined {
        /// Why the bank refused.
        reason: DeclineReason,
    },
}

/// Why a debit was declined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeclineReason {
    /// The account cannot cover the amount (drawn by `decline_rate`, or the sandbox rule).
    InsufficientFunds,
}

/// What became of a refund: the body of `POST /refunds` (201 or 422) and
/// `GET /refunds/{reference}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum RefundOutcome {
    /// The money moved back to the debited account.
    Refunded {
        /// The bank's name for the movement (the request's `reference`).
        bank_reference: String,
    },
    /// The bank refused; no money moved. Final: a repeat gets the same reply.
    Rejected {
        /// Why the bank refused.
        reason: RefundRejection,
    },
}

/// Why a refund was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefundRejection {
    /// No debit with that reference was ever executed.
    UnknownDebit,
    /// This refund plus the earlier ones would give back more than the debit took.
    ExceedsDebit,
}

/// The reply to a look-up of a reference the bank holds but has not decided:
/// `202 {"status": "pending", "reference": …}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename = "pending")]
pub struct PendingReference {
    /// The reference looked up.
    pub reference: String,
}

/// The reply to a look-up of a reference the bank never saw:
/// `{"status": "unknown", "reference": …}` with 404.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename = "unknown")]
pub struct UnknownReference {
    /// The reference asked about.
    pub reference: String,
}

/// The body of every other reply that is not an outcome: an unknown route
/// (`{"status": "not_found"}`), a malformed request, or a simulated failure.
///
/// A reply to a money-moving call that did nothing (`503 error`, or a 4xx `invalid_request`
/// whose body could be read) names the call's `reference`: that is how a client tells the
/// bank's own "not executed" from a gateway's error page in front of it, which may have
/// forwarded the call (SPEC §7, "Not executed").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// Which kind of error.
    pub status: ErrorStatus,
    /// The reference of the call that was not executed, when the bank could read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// What was wrong, for a human; absent on `not_found`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The kinds of [`ErrorBody`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorStatus {
    /// 404: no such route.
    NotFound,
    /// 400/415/422: the request could not be read or has a wrong value; nothing was done.
    InvalidRequest,
    /// 503: a simulated failure (`error_rate`); nothing was done or recorded.
    Error,
    /// 429: a status look-up the rail's rules forbid (sooner than the first-check delay after
    /// the call, or beyond the checks allowed per reference); not replied, and counted.
    StatusCheckRefused,
    /// 409: a money-moving call under a reference the bank already decided, refused rather
    /// than replayed (`refuse_repeats`); nothing more was done.
    DuplicateReference,
}

impl ErrorStatus {
    /// The word as it appears on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorStatus::NotFound => "not_found",
            ErrorStatus::InvalidRequest => "invalid_request",
            ErrorStatus::Error => "error",
            ErrorStatus::StatusCheckRefused => "status_check_refused",
            ErrorStatus::DuplicateReference => "duplicate_reference",
        }
    }
}

/// A request field with a value the bank refuses; nothing was done.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// A text field that must not be empty is.
    #[error("{0} must not be empty")]
    EmptyField(&'static str),
    /// An amount of zero paise.
    #[error("amount_paise must be positive")]
    ZeroAmount,
}

impl DebitRequest {
    /// Checks what the types alone do not: non-empty text and a positive amount.
    pub fn validate(&self) -> Result<(), RequestError> {
        require_text("reference", &self.reference)?;
        require_text("account", &self.account)?;
        require_positive(self.amount_paise)
    }
}

impl RefundRequest {
    /// Checks what the types alone do not: non-empty references and a positive amount.
    pub fn validate(&self) -> Result<(), RequestError> {
        require_text("reference", &self.reference)?;
        require_text("debit_reference", &self.debit_reference)?;
        require_positive(self.amount_paise)
    }
}

fn require_text(field: &'static str, value: &str) -> Result<(), RequestError> {
    if value.trim().is_empty() {
        return Err(RequestError::EmptyField(field));
    }
    Ok(())
}

fn require_positive(amount_paise: u64) -> Result<(), RequestError> {
    if amount_paise == 0 {
        return Err(RequestError::ZeroAmount);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn outcomes_serialize_as_the_wire_contract_says() {
        let debited = DebitOutcome::Debited {
            bank_reference: "pay-1-k".into(),
        };
        assert_eq!(
            serde_json::to_value(debited).expect("serializes"),
            json!({"status": "debited", "bank_reference": "pay-1-k"})
        );
        let declined = DebitOutcome::Declined {
            reason: DeclineReason::InsufficientFunds,
        };
        assert_eq!(
            serde_json::to_value(declined).expect("serializes"),
            json!({"status": "declined", "reason": "insufficient_funds"})
        );
        let rejected = RefundOutcome::Rejected {
            reason: RefundRejection::ExceedsDebit,
        };
        assert_eq!(
            serde_json::to_value(rejected).expect("serializes"),
            json!({"status": "rejected", "reason": "exceeds_debit"})
        );
        let not_found = ErrorBody {
            status: ErrorStatus::NotFound,
            reference: None,
            message: None,
        };
        assert_eq!(
            serde_json::to_value(not_found).expect("serializes"),
            json!({"status": "not_found"})
        );
        let never_seen = UnknownReference {
            reference: "pay-x".into(),
        };
        assert_eq!(
            serde_json::to_value(never_seen).expect("serializes"),
            json!({"status": "unknown", "reference": "pay-x"})
        );
    }

    #[test]
    fn empty_text_and_zero_amounts_are_refused() {
        let debit = DebitRequest {
            reference: "r".into(),
            amount_paise: 1,
            account: "a@bank".into(),
        };
        assert_eq!(debit.validate(), Ok(()));
        let zero = DebitRequest {
            amount_paise: 0,
            ..debit.clone()
        };
        assert_eq!(zero.validate(), Err(RequestError::ZeroAmount));
        let blank = DebitRequest {
            account: " ".into(),
            ..debit
        };
        assert_eq!(blank.validate(), Err(RequestError::EmptyField("account")));

        let refund = RefundRequest {
            reference: "f".into(),
            debit_reference: String::new(),
            amount_paise: 1,
        };
        assert_eq!(
            refund.validate(),
            Err(RequestError::EmptyField("debit_reference"))
        );
    }
}
