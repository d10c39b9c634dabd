//! Reading any bank's reply leniently: the `status` words of SPEC §7 and a body that holds
//! only what a client acts on.
//!
//! Banks differ in the HTTP status they reply with and in the fields they add, but SPEC §7 has a
//! client judge every reply by its body's `status`: `debited` / `refunded` (the money moved),
//! `declined` / `rejected` (refused; no money moved), `unknown` (a look-up of a reference the
//! bank never saw), `pending` (a look-up of a reference the bank holds undecided). [`ReplyBody`] reads that word, a refusal's `reason` and the `reference` a
//! "never seen" reply names, and ignores everything else; [`StatusWord`] parses the word. What
//! a reply *means* (which HTTP statuses count, what a missing body says) is the client's
//! reading rule, not this crate's: the backend's is `backend/src/bank/bank_api_http.rs`.

use serde::Deserialize;

/// A `status` word a client acts on. Any other word (`not_found`, `error`, a bank's own
/// `queued`) parses to nothing: the client must not guess what it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StatusWord {
    /// A debit moved the money.
    Debited,
    /// A refund moved the money back.
    Refunded,
    /// A debit was refused; no money moved.
    Declined,
    /// A refund was refused; no money moved.
    Rejected,
    /// A look-up of a reference the bank never saw (with 404).
    Unknown,
    /// A look-up of a reference the bank holds but has not decided (with 202): the rail's
    /// "deemed" or in-progress state. Neither moved nor refused, and not "never seen".
    Pending,
}

impl StatusWord {
    /// Every word, for tests and documentation.
    pub const ALL: [StatusWord; 6] = [
        StatusWord::Debited,
        StatusWord::Refunded,
        StatusWord::Declined,
        StatusWord::Rejected,
        StatusWord::Unknown,
        StatusWord::Pending,
    ];

    /// The word as it appears on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            StatusWord::Debited => "debited",
            StatusWord::Refunded => "refunded",
            StatusWord::Declined => "declined",
            StatusWord::Rejected => "rejected",
            StatusWord::Unknown => "unknown",
            StatusWord::Pending => "pending",
        }
    }

    /// The word `status` names, if it is one of these (exact, lower case, as the bank writes
    /// it).
    pub fn parse(status: &str) -> Option<StatusWord> {
        StatusWord::ALL
            .into_iter()
            .find(|word| word.as_str() == status)
    }
}

impl std::fmt::Display for StatusWord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The body of any bank reply, as far as a client reads it: every field but `status` may be
/// missing, and fields it does not name are ignored.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ReplyBody {
    /// The status word, kept as sent so an unexpected one can be reported.
    pub status: String,
    /// Why the bank refused, when it says.
    #[serde(default)]
    pub reason: Option<String>,
    /// The reference a look-up's reply names (a "never seen" reply names the one asked about),
    /// or a "not executed" error names (the call's).
    #[serde(default)]
    pub reference: Option<String>,
    /// The reference an outcome names (`debited`, `refunded`: the bank's name for the movement,
    /// which is the call's reference).
    #[serde(default)]
    pub bank_reference: Option<String>,
}

impl ReplyBody {
    /// The status word, if it is one a client acts on.
    pub fn word(&self) -> Option<StatusWord> {
        StatusWord::parse(&self.status)
    }

    /// Every reference the body names (`reference`, `bank_reference`): a client checks each is
    /// its own before it believes the reply.
    pub fn named_references(&self) -> impl Iterator<Item = &str> {
        [self.reference.as_deref(), self.bank_reference.as_deref()]
            .into_iter()
            .flatten()
    }

    /// The bank's reason for a refusal, or the status word itself when it gave none.
    pub fn into_reason(self) -> String {
        self.reason.unwrap_or(self.status)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{DebitOutcome, DeclineReason, RefundOutcome, RefundRejection, UnknownReference};

    fn word_of(body: &impl serde::Serialize) -> Option<StatusWord> {
        let value = serde_json::to_value(body).expect("serializes");
        let reply: ReplyBody = serde_json::from_value(value).expect("reads leniently");
        reply.word()
    }

    #[test]
    fn every_word_parses_back_and_nothing_else_does() {
        for word in StatusWord::ALL {
            assert_eq!(StatusWord::parse(word.as_str()), Some(word));
        }
        for other in [
            "not_found",
            "error",
            "invalid_request",
            "queued",
            "Debited",
            "",
        ] {
            assert_eq!(StatusWord::parse(other), None, "{other}");
        }
    }

    #[test]
    fn the_strict_bodies_carry_the_status_words() {
        let debited = DebitOutcome::Debited {
            bank_reference: "pay-1".into(),
        };
        assert_eq!(word_of(&debited), Some(StatusWord::Debited));
        let declined = DebitOutcome::Declined {
            reason: DeclineReason::InsufficientFunds,
        };
        assert_eq!(word_of(&declined), Some(StatusWord::Declined));
        let refunded = RefundOutcome::Refunded {
            bank_reference: "refund-1".into(),
        };
        assert_eq!(word_of(&refunded), Some(StatusWord::Refunded));
        let rejected = RefundOutcome::Rejected {
            reason: RefundRejection::UnknownDebit,
        };
        assert_eq!(word_of(&rejected), Some(StatusWord::Rejected));
        let never_seen = UnknownReference {
            reference: "pay-1".into(),
        };
        assert_eq!(word_of(&never_seen), Some(StatusWord::Unknown));
    }

    #[test]
    fn a_body_is_read_leniently() {
        let sparse: ReplyBody =
            serde_json::from_value(json!({"status": "declined"})).expect("status alone reads");
        assert_eq!(sparse.word(), Some(StatusWord::Declined));
        assert_eq!(sparse.into_reason(), "declined");

        let rich: ReplyBody = serde_json::from_value(json!({
            "status": "unknown", "reference": "pay-1", "bank_id": 7, "reason": null
        }))
        .expect("extra fields and nulls read");
        assert_eq!(rich.word(), Some(StatusWord::Unknown));
        assert_eq!(rich.reference.as_deref(), Some("pay-1"));

        let refused: ReplyBody =
            serde_json::from_value(json!({"status": "rejected", "reason": "exceeds_debit"}))
                .expect("reads");
        assert_eq!(refused.into_reason(), "exceeds_debit");

        assert!(serde_json::from_value::<ReplyBody>(json!({"reason": "x"})).is_err());
    }
}
