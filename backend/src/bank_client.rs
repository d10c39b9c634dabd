//! [`BankClient`]: the backend's HTTP client for the partner bank (the bank simulator in
//! development and tests), with a timeout from configuration.
//!
//! A money-moving call has three outcomes, and the third is the one the article is about: the
//! bank moved the money ([`BankOutcome::Succeeded`]), refused ([`BankOutcome::Declined`], a final
//! business answer), or we cannot know ([`BankOutcome::Unknown`]). Unknown is never treated as
//! failure: the key moves to `unknown` and reconciliation asks the bank by reference
//! ([`BankClient::look_up`]).
//!
//! Answers are read by what they say, not by one bank's habits (SPEC §7; docs/design.md,
//! "Reading the bank's answers"):
//! - a call: any 2xx is judged by the body's `status`; 402, or a 4xx whose body says `declined`
//!   or `rejected`, is a decline. A definite error (500, 501, 503, 505 and up, 429, any other
//!   4xx) ended the call: unknown, but with nothing of it still on its way
//!   ([`BankOutcome::Unknown::call_ended`]); so did a connection that could not be made (refused,
//!   or its TLS handshake failed), which sent nothing. A 502 or 504 (a gateway may still be
//!   delivering the call), a timeout, a dropped connection or an unreadable answer is unknown
//!   with the call possibly still in flight.
//! - a look-up: any 2xx is judged by the body's `status`; 402 (and for refunds 422 with
//!   `rejected`) is a decline; only `404 {"status": "unknown"}` (naming our reference, if it
//!   names one) means the bank never saw it. Anything else, a 404 from a wrong route or a proxy
//!   included, is a failed look-up ([`LookUpError`]): never "never seen".
//!
//! Every call carries the trace (`traceparent`) of its span, when traces are exported.
//!
//! The request bodies and the status words are the bank's wire contract, from the `bank-api`
//! crate ([`bank_api::DebitRequest`], [`bank_api::StatusWord`], read leniently as
//! [`bank_api::AnswerBody`]); the reading rules above are this module's own.

use std::sync::Arc;
use std::time::Duration;

use bank_api::{AnswerBody, DebitRequest, RefundRequest, StatusWord};
use serde::Serialize;
use shared::Operation;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::telemetry::traces::carry_to_callee;

/// A client for the bank's HTTP API.
#[derive(Debug, Clone)]
pub struct BankClient {
    http: reqwest::Client,
    base_url: String,
    /// `MAX_BANK_CALLS`.
    max_calls: usize,
    /// Calls in flight are bounded (`MAX_BANK_CALLS`): a money-moving call needs a
    /// [`CallPermit`]; a look-up waits for one.
    calls: Arc<Semaphore>,
}

/// Leave to make one money-moving call to the bank, taken by [`BankClient::reserve_call`] and
/// held until the call ends.
#[derive(Debug)]
pub struct CallPermit {
    /// Given back when the permit drops.
    _held: OwnedSemaphorePermit,
}

/// The outcome of a debit or refund call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BankOutcome {
    /// The money moved.
    Succeeded,
    /// The bank refused; no money moved. Final.
    Declined {
        /// The bank's reason.
        reason: String,
    },
    /// No readable outcome: the money may or may not have moved.
    Unknown {
        /// What went wrong, for the logs.
        reason: String,
        /// Whether the call ended with a definite answer (a 500, say), so nothing of it is
        /// still on its way to the bank: a look-up that finds nothing may release the claim
        /// at once. `false` for a timeout, a dropped connection, a 502/504 or an unreadable
        /// answer, where the call may still reach the bank.
        call_ended: bool,
    },
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
    /// The bank never executed this reference: nothing moved.
    NeverSeen,
}

/// A status look-up that got no usable answer; try again later.
#[derive(Debug, thiserror::Error)]
#[error("bank look-up failed: {0}")]
pub struct LookUpError(String);

/// What a body's `status` word says about a movement.
enum Meaning {
    Moved,
    Refused,
    NeverSeen,
    Other,
}

/// Reads the word of a body that may be missing: an absent or unexpected word says nothing.
fn meaning(answer: Option<&AnswerBody>) -> Meaning {
    match answer.and_then(AnswerBody::word) {
        Some(StatusWord::Debited | StatusWord::Refunded) => Meaning::Moved,
        Some(StatusWord::Declined | StatusWord::Rejected) => Meaning::Refused,
        Some(StatusWord::Unknown) => Meaning::NeverSeen,
        None => Meaning::Other,
    }
}

impl BankClient {
    /// A client for the bank at `base_url` (e.g. `https://bank.example`) over `http` (its
    /// timeout and TLS roots: [`crate::transport_security::bank_http_client`]); at most
    /// `max_calls` are in flight at once.
    pub fn new(base_url: &str, http: reqwest::Client, max_calls: usize) -> BankClient {
        BankClient {
            http,
            base_url: base_url.trim_end_matches('/').to_owned(),
            max_calls,
            calls: Arc::new(Semaphore::new(max_calls)),
        }
    }

    /// How many calls (money-moving and look-ups) are in flight now.
    pub fn calls_in_flight(&self) -> usize {
        self.max_calls
            .saturating_sub(self.calls.available_permits())
    }

    /// Leave for one money-moving call, waiting at most `wait` for a call in flight to end;
    /// `None` if none did (the bank has all the calls it may have).
    pub async fn reserve_call(&self, wait: Duration) -> Option<CallPermit> {
        let permit = Arc::clone(&self.calls).acquire_owned();
        match tokio::time::timeout(wait, permit).await {
            Ok(Ok(permit)) => Some(CallPermit { _held: permit }),
            _ => None,
        }
    }

    /// Debits `account` under `reference`.
    #[tracing::instrument(skip(self, _permit), fields(otel.kind = "client"))]
    pub async fn debit(
        &self,
        _permit: &CallPermit,
        reference: &str,
        amount_paise: i64,
        account: &str,
    ) -> BankOutcome {
        let Ok(amount_paise) = u64::try_from(amount_paise) else {
            return negative_amount(amount_paise);
        };
        let call = DebitRequest {
            reference: reference.to_owned(),
            amount_paise,
            account: account.to_owned(),
        };
        self.move_money("debits", &call).await
    }

    /// Refunds part of the debit `debit_reference` under `reference`.
    #[tracing::instrument(skip(self, _permit), fields(otel.kind = "client"))]
    pub async fn refund(
        &self,
        _permit: &CallPermit,
        reference: &str,
        debit_reference: &str,
        amount_paise: i64,
    ) -> BankOutcome {
        let Ok(amount_paise) = u64::try_from(amount_paise) else {
            return negative_amount(amount_paise);
        };
        let call = RefundRequest {
            reference: reference.to_owned(),
            debit_reference: debit_reference.to_owned(),
            amount_paise,
        };
        self.move_money("refunds", &call).await
    }

    /// Asks the bank what became of `reference`.
    #[tracing::instrument(skip(self), fields(otel.kind = "client"))]
    pub async fn look_up(
        &self,
        operation: Operation,
        reference: &str,
    ) -> Result<LookUp, LookUpError> {
        // Waits its turn: look-ups count against the bound on calls in flight too.
        let _permit = Arc::clone(&self.calls)
            .acquire_owned()
            .await
            .map_err(|error| LookUpError(error.to_string()))?;
        let url = format!("{}/{}/{reference}", self.base_url, collection(operation));
        let response = self
            .http
            .get(url)
            .headers(trace_context())
            .send()
            .await
            .map_err(|error| LookUpError(with_causes(&error)))?;
        let status = response.status().as_u16();
        let answer: Option<AnswerBody> = response.json().await.ok();
        read_look_up(status, answer, reference)
    }

    async fn move_money(&self, collection: &str, call: &impl Serialize) -> BankOutcome {
        let url = format!("{}/{collection}", self.base_url);
        let sent = self.http.post(url).headers(trace_context()).json(call);
        let response = match sent.send().await {
            Ok(response) => response,
            // A refused connection or a failed TLS handshake: the call never left, so nothing
            // of it is on its way to the bank.
            Err(error) if error.is_connect() => {
                let reason = format!("not sent: {}", with_causes(&error));
                return unknown(reason, true);
            }
            Err(error) => return unknown(format!("no answer: {}", with_causes(&error)), false),
        };
        let status = response.status().as_u16();
        match response.json::<AnswerBody>().await {
            Ok(answer) => read_call(status, Some(answer)),
            // A body that cannot be read may have been cut off mid-way (a dropped connection).
            Err(error) if (200..300).contains(&status) => unknown(
                format!("HTTP {status} with an unreadable body: {error}"),
                false,
            ),
            Err(_) => read_call(status, None),
        }
    }
}

/// The current span's `traceparent`, so the bank joins the trace (none without the exporter).
fn trace_context() -> reqwest::header::HeaderMap {
    let mut headers = reqwest::header::HeaderMap::new();
    carry_to_callee(&mut headers);
    headers
}

/// `error` and its causes, outermost first: reqwest's own message ("error sending request")
/// leaves out why (a refused connection, a certificate the bank's CA did not sign).
fn with_causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        cause = inner.source();
    }
    text
}

/// Reads the answer to a debit or refund call.
fn read_call(status: u16, answer: Option<AnswerBody>) -> BankOutcome {
    match (status, meaning(answer.as_ref()), answer) {
        (200..=299, Meaning::Moved, _) => BankOutcome::Succeeded,
        (200..=299 | 400..=499, Meaning::Refused, Some(answer)) => BankOutcome::Declined {
            reason: answer.into_reason(),
        },
        (402, _, answer) => BankOutcome::Declined {
            reason: answer.map_or_else(declined, AnswerBody::into_reason),
        },
        (200..=299, _, answer) => unknown(
            format!("HTTP {status} with status {:?}", answer.map(|a| a.status)),
            false,
        ),
        // A gateway's 502 or 504: the call may still be on its way to the bank.
        (502 | 504, _, _) => unknown(format!("HTTP {status} from a gateway"), false),
        // Any other error answer ended the call without moving money, as far as we know; the
        // look-up that follows at once checks.
        (_, _, _) => unknown(format!("HTTP {status}"), true),
    }
}

/// Reads the answer to a status look-up of `reference`.
fn read_look_up(
    status: u16,
    answer: Option<AnswerBody>,
    reference: &str,
) -> Result<LookUp, LookUpError> {
    match (status, meaning(answer.as_ref()), answer) {
        (200..=299, Meaning::Moved, _) => Ok(LookUp::Succeeded),
        (200..=299 | 402 | 422, Meaning::Refused, Some(answer)) => Ok(LookUp::Declined {
            reason: answer.into_reason(),
        }),
        (402, _, answer) => Ok(LookUp::Declined {
            reason: answer.map_or_else(declined, AnswerBody::into_reason),
        }),
        (404, Meaning::NeverSeen, Some(answer))
            if answer
                .reference
                .as_deref()
                .is_none_or(|named| named == reference) =>
        {
            Ok(LookUp::NeverSeen)
        }
        (status, _, answer) => Err(LookUpError(format!(
            "HTTP {status} with status {:?}",
            answer.map(|a| a.status)
        ))),
    }
}

fn collection(operation: Operation) -> &'static str {
    match operation {
        Operation::PayBill => "debits",
        Operation::RefundPayment => "refunds",
    }
}

fn unknown(reason: String, call_ended: bool) -> BankOutcome {
    BankOutcome::Unknown { reason, call_ended }
}

/// The reason of a 402 without a readable body: the status word a decline carries.
fn declined() -> String {
    StatusWord::Declined.to_string()
}

/// A negative amount, which the bank's API cannot carry. Stored amounts are positive (a `CHECK`
/// on the tables), so this never happens; if it did, the bank would refuse the call without
/// moving money, so it is not sent and ends like a refused call: a definite error.
fn negative_amount(amount_paise: i64) -> BankOutcome {
    unknown(format!("amount {amount_paise} is negative; not sent"), true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(json: &str) -> Option<AnswerBody> {
        Some(serde_json::from_str(json).expect("test bodies are JSON"))
    }

    fn ended(outcome: &BankOutcome) -> Option<bool> {
        match outcome {
            BankOutcome::Unknown { call_ended, .. } => Some(*call_ended),
            _ => None,
        }
    }

    #[test]
    fn a_call_is_judged_by_its_body_on_any_2xx() {
        for status in [200, 201, 202] {
            let moved = read_call(status, answer(r#"{"status":"debited"}"#));
            assert_eq!(moved, BankOutcome::Succeeded, "{status}");
        }
        let refused = read_call(200, answer(r#"{"status":"declined","reason":"limit"}"#));
        assert_eq!(
            refused,
            BankOutcome::Declined {
                reason: "limit".to_owned()
            }
        );
        let odd = read_call(201, answer(r#"{"status":"queued"}"#));
        assert_eq!(
            ended(&odd),
            Some(false),
            "an unknown word may still move money"
        );
    }

    #[test]
    fn a_402_or_a_refusal_body_is_a_decline() {
        assert!(matches!(read_call(402, None), BankOutcome::Declined { .. }));
        assert!(matches!(
            read_call(422, answer(r#"{"status":"rejected","reason":"exceeds_debit"}"#)),
            BankOutcome::Declined { reason } if reason == "exceeds_debit"
        ));
    }

    #[test]
    fn definite_errors_end_the_call_and_gateway_errors_do_not() {
        for status in [500, 501, 503, 505, 429, 400, 404] {
            let outcome = read_call(status, answer(r#"{"status":"error"}"#));
            assert_eq!(ended(&outcome), Some(true), "{status}");
        }
        for status in [502, 504] {
            assert_eq!(ended(&read_call(status, None)), Some(false), "{status}");
        }
    }

    #[test]
    fn a_look_up_is_judged_by_its_body_whatever_the_2xx() {
        for status in [200, 201] {
            let found = read_look_up(status, answer(r#"{"status":"debited"}"#), "pay-1");
            assert_eq!(found.expect("read"), LookUp::Succeeded, "{status}");
        }
        let declined = read_look_up(402, answer(r#"{"status":"declined"}"#), "pay-1");
        assert!(matches!(declined, Ok(LookUp::Declined { .. })));
        let rejected = read_look_up(422, answer(r#"{"status":"rejected"}"#), "refund-1");
        assert!(matches!(rejected, Ok(LookUp::Declined { .. })));
    }

    #[test]
    fn only_a_404_saying_unknown_is_never_seen() {
        let unknown = r#"{"status":"unknown","reference":"pay-1"}"#;
        assert_eq!(
            read_look_up(404, answer(unknown), "pay-1").expect("read"),
            LookUp::NeverSeen
        );
        let unnamed = read_look_up(404, answer(r#"{"status":"unknown"}"#), "pay-1");
        assert_eq!(unnamed.expect("read"), LookUp::NeverSeen);
        for (status, body) in [
            (404, None),
            (404, answer(r#"{"status":"not_found"}"#)),
            (404, answer(r#"{"status":"unknown","reference":"pay-2"}"#)),
            (200, answer(r#"{"status":"unknown"}"#)),
            (500, answer(r#"{"status":"error"}"#)),
            (503, None),
        ] {
            assert!(
                read_look_up(status, body, "pay-1").is_err(),
                "{status} must be a failed look-up"
            );
        }
    }
}
