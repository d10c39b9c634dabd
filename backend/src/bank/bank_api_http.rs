//! [`BankApiHttp`]: the bank port's adapter for the `bank-api` wire contract over HTTP (SPEC §7;
//! the bank simulator serves it), with the timeout, TLS roots, proxy and redirect rules of
//! [`crate::transport_security::bank_http_client`].
//!
//! Replies are read by what they say, not by one bank's habits (docs/design.md, "Reading the
//! bank's replies"):
//! - a call: any 2xx is judged by the body's `status`; 402, or a 4xx whose body says `declined`
//!   or `rejected`, is a decline. The bank says "not executed" ([`NOT_EXECUTED`]) with 503
//!   `error` or a 4xx `invalid_request` whose body names the call's reference; a connection that
//!   could not be made (refused, or its TLS handshake failed) sent nothing either. Everything
//!   else may be in flight: a timeout, a dropped connection, a 5xx or 429 without the bank's
//!   own body (a load balancer's, a WAF's: it may have forwarded the call), a redirect (never
//!   followed: it would send the debit's body to another host), a reply longer than
//!   [`MAX_REPLY_BYTES`], and a reply naming another reference than ours.
//! - a look-up: any 2xx is judged by the body's `status`; 402 (and for refunds 422 with
//!   `rejected`) is a decline; only `404 {"status": "unknown"}` (naming our reference, if it
//!   names one) means the bank never saw it. Anything else, a 404 from a wrong route or a proxy,
//!   a reply naming another reference, or one too long, is a failed look-up
//!   ([`LookUpError`]): never "never seen".
//!
//! Every call carries the trace (`traceparent`) of its span, when traces are exported.

use async_trait::async_trait;
use bank_api::{DebitRequest, ErrorStatus, RefundRequest, ReplyBody, StatusWord};
use serde::Serialize;
use shared::Operation;
use tracing::Instrument;

use super::port::{BankPort, CallOutcome, LookUp, LookUpError, MoneyCall};
use crate::telemetry::traces::carry_to_callee;

/// The longest reply read from the bank: its replies are a few hundred bytes; a longer one is
/// not the bank's (and is not read into memory whole).
pub const MAX_REPLY_BYTES: usize = 64 * 1024;

/// The replies by which a `bank-api` bank says it did nothing with a call: the HTTP status and
/// the body's `status` word, with the body naming the call's `reference` (SPEC §7, "Not
/// executed"). The simulator's `error_rate` sends the first; a request it could not accept,
/// the others.
pub const NOT_EXECUTED: [(u16, ErrorStatus); 4] = [
    (503, ErrorStatus::Error),
    (400, ErrorStatus::InvalidRequest),
    (415, ErrorStatus::InvalidRequest),
    (422, ErrorStatus::InvalidRequest),
];

/// A partner bank speaking the `bank-api` contract over HTTP.
#[derive(Debug, Clone)]
pub struct BankApiHttp {
    http: reqwest::Client,
    base_url: String,
}

impl BankApiHttp {
    /// The bank at `base_url` (e.g. `https://bank.example`), called over `http`.
    pub fn new(base_url: &str, http: reqwest::Client) -> BankApiHttp {
        BankApiHttp {
            http,
            base_url: base_url.trim_end_matches('/').to_owned(),
        }
    }

    /// Sends `call` as the contract's request.
    async fn send(&self, call: MoneyCall<'_>) -> CallOutcome {
        let (reference, amount) = (call.reference(), call.amount_paise());
        let Ok(amount_paise) = u64::try_from(amount) else {
            return negative_amount(amount);
        };
        match call {
            MoneyCall::Debit { account, .. } => {
                let body = DebitRequest {
                    reference: reference.to_owned(),
                    amount_paise,
                    account: account.to_owned(),
                };
                self.post("debits", &body, reference).await
            }
            MoneyCall::Refund {
                debit_reference, ..
            } => {
                let body = RefundRequest {
                    reference: reference.to_owned(),
                    debit_reference: debit_reference.to_owned(),
                    amount_paise,
                };
                self.post("refunds", &body, reference).await
            }
        }
    }

    /// Posts `body` to `collection` and reads the reply as the call under `reference`.
    async fn post(&self, collection: &str, body: &impl Serialize, reference: &str) -> CallOutcome {
        let url = format!("{}/{collection}", self.base_url);
        let sent = self.http.post(url).headers(trace_context()).json(body);
        let response = match sent.send().await {
            Ok(response) => response,
            // A refused connection or a failed TLS handshake: the call never left.
            Err(error) if error.is_connect() => {
                let reason = format!("not sent: {}", with_causes(&error));
                return CallOutcome::NotExecuted { reason };
            }
            Err(error) => {
                let reason = format!("no reply: {}", with_causes(&error));
                return CallOutcome::MayBeInFlight { reason };
            }
        };
        let status = response.status().as_u16();
        match read_bounded(response).await {
            Ok(body) => read_call(status, serde_json::from_slice(&body).ok(), reference),
            // Cut off mid-way, or too long to be the bank's: the call may have moved money.
            Err(reason) => CallOutcome::MayBeInFlight {
                reason: format!("HTTP {status}: {reason}"),
            },
        }
    }
}

#[async_trait]
impl BankPort for BankApiHttp {
    /// In a client span named for the call (`debit`, `refund`), whose `traceparent` the bank
    /// receives.
    async fn move_money(&self, call: MoneyCall<'_>) -> CallOutcome {
        let reference = call.reference();
        let span = match call {
            MoneyCall::Debit { .. } => {
                tracing::info_span!("debit", otel.kind = "client", reference)
            }
            MoneyCall::Refund { .. } => {
                tracing::info_span!("refund", otel.kind = "client", reference)
            }
        };
        self.send(call).instrument(span).await
    }

    #[tracing::instrument(skip(self), fields(otel.kind = "client"))]
    async fn look_up(&self, operation: Operation, reference: &str) -> Result<LookUp, LookUpError> {
        let url = format!("{}/{}/{reference}", self.base_url, collection(operation));
        let response = self
            .http
            .get(url)
            .headers(trace_context())
            .send()
            .await
            .map_err(|error| LookUpError::Failed(with_causes(&error)))?;
        let status = response.status().as_u16();
        let body = read_bounded(response)
            .await
            .map_err(|reason| LookUpError::Failed(format!("HTTP {status}: {reason}")))?;
        read_look_up(status, serde_json::from_slice(&body).ok(), reference)
    }
}

/// The reply's body, at most [`MAX_REPLY_BYTES`] of it: an error if it is longer (counted
/// as it arrives, whatever `Content-Length` says) or cut off.
async fn read_bounded(mut response: reqwest::Response) -> Result<Vec<u8>, String> {
    let too_long = || format!("reply longer than {MAX_REPLY_BYTES} bytes");
    if response
        .content_length()
        .is_some_and(|length| length > MAX_REPLY_BYTES as u64)
    {
        return Err(too_long());
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|error| format!("reply cut off: {}", with_causes(&error)))?
    {
        if body.len() + chunk.len() > MAX_REPLY_BYTES {
            return Err(too_long());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
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

/// What a body's `status` word says about a movement.
enum Meaning {
    Moved,
    Refused,
    NeverSeen,
    Pending,
    Other,
}

/// Reads the word of a body that may be missing: an absent or unexpected word says nothing.
fn meaning(reply: Option<&ReplyBody>) -> Meaning {
    match reply.and_then(ReplyBody::word) {
        Some(StatusWord::Debited | StatusWord::Refunded) => Meaning::Moved,
        Some(StatusWord::Declined | StatusWord::Rejected) => Meaning::Refused,
        Some(StatusWord::Unknown) => Meaning::NeverSeen,
        Some(StatusWord::Pending) => Meaning::Pending,
        None => Meaning::Other,
    }
}

/// The reference `reply` names that is not `ours`, if any.
fn names_another<'a>(reply: Option<&'a ReplyBody>, ours: &str) -> Option<&'a str> {
    reply?.named_references().find(|named| *named != ours)
}

/// Whether the reply is one of [`NOT_EXECUTED`], naming `reference`.
fn says_not_executed(status: u16, reply: Option<&ReplyBody>, reference: &str) -> bool {
    reply.is_some_and(|reply| {
        reply.reference.as_deref() == Some(reference)
            && NOT_EXECUTED
                .iter()
                .any(|&(code, word)| code == status && reply.status == word.as_str())
    })
}

/// Reads the reply to the debit or refund call under `reference`.
fn read_call(status: u16, reply: Option<ReplyBody>, reference: &str) -> CallOutcome {
    if let Some(other) = names_another(reply.as_ref(), reference) {
        let reason = format!("HTTP {status} naming another reference ({other:?})");
        return CallOutcome::MayBeInFlight { reason };
    }
    if says_not_executed(status, reply.as_ref(), reference) {
        let reason = format!("HTTP {status}: the bank did not execute the call");
        return CallOutcome::NotExecuted { reason };
    }
    match (status, meaning(reply.as_ref()), reply) {
        (200..=299, Meaning::Moved, _) => CallOutcome::Succeeded,
        (200..=299 | 400..=499, Meaning::Refused, Some(reply)) => CallOutcome::Declined {
            reason: reply.into_reason(),
        },
        (402, _, reply) => CallOutcome::Declined {
            reason: reply.map_or_else(declined, ReplyBody::into_reason),
        },
        (status, _, reply) => CallOutcome::MayBeInFlight {
            reason: format!(
                "HTTP {status} with status {:?}",
                reply.map(|reply| reply.status)
            ),
        },
    }
}

/// Reads the reply to a status look-up of `reference`.
fn read_look_up(
    status: u16,
    reply: Option<ReplyBody>,
    reference: &str,
) -> Result<LookUp, LookUpError> {
    if let Some(other) = names_another(reply.as_ref(), reference) {
        let failed = format!("HTTP {status} naming another reference ({other:?})");
        return Err(LookUpError::Failed(failed));
    }
    match (status, meaning(reply.as_ref()), reply) {
        (200..=299, Meaning::Moved, _) => Ok(LookUp::Succeeded),
        (200..=299 | 402 | 422, Meaning::Refused, Some(reply)) => Ok(LookUp::Declined {
            reason: reply.into_reason(),
        }),
        (402, _, reply) => Ok(LookUp::Declined {
            reason: reply.map_or_else(declined, ReplyBody::into_reason),
        }),
        (404, Meaning::NeverSeen, Some(_)) => Ok(LookUp::NeverSeen),
        (200..=299, Meaning::Pending, Some(reply)) if reply.reference.is_some() => {
            Ok(LookUp::Pending)
        }
        (429, _, Some(reply)) if reply.status == ErrorStatus::StatusCheckRefused.as_str() => Err(
            LookUpError::RefusedByRules(reply.reason.unwrap_or(reply.status)),
        ),
        (status, _, reply) => Err(LookUpError::Failed(format!(
            "HTTP {status} with status {:?}",
            reply.map(|reply| reply.status)
        ))),
    }
}

fn collection(operation: Operation) -> &'static str {
    match operation {
        Operation::PayBill => "debits",
        Operation::RefundPayment => "refunds",
    }
}

/// The reason of a 402 without a readable body: the status word a decline carries.
fn declined() -> String {
    StatusWord::Declined.to_string()
}

/// A negative amount, which the bank's API cannot carry. Stored amounts are positive (a `CHECK`
/// on the tables), so this never happens; if it did, nothing is sent.
fn negative_amount(amount_paise: i64) -> CallOutcome {
    let reason = format!("amount {amount_paise} is negative; not sent");
    CallOutcome::NotExecuted { reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(json: &str) -> Option<ReplyBody> {
        Some(serde_json::from_str(json).expect("test bodies are JSON"))
    }

    fn may_be_in_flight(outcome: &CallOutcome) -> bool {
        matches!(outcome, CallOutcome::MayBeInFlight { .. })
    }

    #[test]
    fn a_call_is_judged_by_its_body_on_any_2xx() {
        for status in [200, 201, 202] {
            let moved = read_call(
                status,
                reply(r#"{"status":"debited","bank_reference":"pay-1"}"#),
                "pay-1",
            );
            assert_eq!(moved, CallOutcome::Succeeded, "{status}");
        }
        let refused = read_call(
            200,
            reply(r#"{"status":"declined","reason":"limit"}"#),
            "pay-1",
        );
        let limit = "limit".to_owned();
        assert_eq!(refused, CallOutcome::Declined { reason: limit });
        let odd = read_call(201, reply(r#"{"status":"queued"}"#), "pay-1");
        assert!(
            may_be_in_flight(&odd),
            "an unknown word may still move money"
        );
    }

    #[test]
    fn a_402_or_a_refusal_body_is_a_decline() {
        assert!(matches!(
            read_call(402, None, "pay-1"),
            CallOutcome::Declined { .. }
        ));
        let exceeds = reply(r#"{"status":"rejected","reason":"exceeds_debit"}"#);
        assert!(matches!(
            read_call(422, exceeds, "refund-1"),
            CallOutcome::Declined { reason } if reason == "exceeds_debit"
        ));
    }

    #[test]
    fn only_the_banks_own_reply_naming_our_reference_is_not_executed() {
        let own = r#"{"status":"error","reference":"pay-1"}"#;
        let invalid = r#"{"status":"invalid_request","reference":"pay-1"}"#;
        for (status, body) in [(503, own), (400, invalid), (415, invalid), (422, invalid)] {
            let outcome = read_call(status, reply(body), "pay-1");
            assert!(
                matches!(outcome, CallOutcome::NotExecuted { .. }),
                "{status} {body}"
            );
        }
        for (status, body) in [
            // A gateway's error page, or a bank error that does not say whose call it was.
            (503, None),
            (503, reply(r#"{"status":"error"}"#)),
            (500, reply(own)),
            (429, None),
            (502, None),
            (504, None),
            (400, reply(r#"{"status":"error","reference":"pay-1"}"#)),
            (
                503,
                reply(r#"{"status":"invalid_request","reference":"pay-1"}"#),
            ),
            // A redirect is never followed, nor believed.
            (307, None),
            // A bank that refuses a repeated reference has the call: a look-up tells its fate.
            (
                409,
                reply(r#"{"status":"duplicate_reference","reference":"pay-1"}"#),
            ),
        ] {
            let outcome = read_call(status, body.clone(), "pay-1");
            assert!(may_be_in_flight(&outcome), "{status} {body:?}");
        }
    }

    #[test]
    fn a_reply_naming_another_reference_is_not_believed() {
        for (status, body) in [
            (201, r#"{"status":"debited","bank_reference":"pay-2"}"#),
            (402, r#"{"status":"declined","reference":"pay-2"}"#),
            (503, r#"{"status":"error","reference":"pay-2"}"#),
        ] {
            let outcome = read_call(status, reply(body), "pay-1");
            assert!(may_be_in_flight(&outcome), "{status} {body}");
        }
        let debited = reply(r#"{"status":"debited","bank_reference":"pay-2"}"#);
        assert!(read_look_up(200, debited, "pay-1").is_err());
    }

    #[test]
    fn a_look_up_is_judged_by_its_body_whatever_the_2xx() {
        for status in [200, 201] {
            let found = read_look_up(status, reply(r#"{"status":"debited"}"#), "pay-1");
            assert_eq!(found.expect("read"), LookUp::Succeeded, "{status}");
        }
        let declined = read_look_up(402, reply(r#"{"status":"declined"}"#), "pay-1");
        assert!(matches!(declined, Ok(LookUp::Declined { .. })));
        let rejected = read_look_up(422, reply(r#"{"status":"rejected"}"#), "refund-1");
        assert!(matches!(rejected, Ok(LookUp::Declined { .. })));
    }

    #[test]
    fn pending_needs_a_2xx_naming_our_reference_and_a_rules_refusal_is_told_apart() {
        let pending = reply(r#"{"status":"pending","reference":"pay-1"}"#);
        assert_eq!(
            read_look_up(202, pending, "pay-1").expect("read"),
            LookUp::Pending
        );
        for (status, body) in [
            (202, r#"{"status":"pending"}"#),
            (202, r#"{"status":"pending","reference":"pay-2"}"#),
            (503, r#"{"status":"pending","reference":"pay-1"}"#),
        ] {
            assert!(matches!(
                read_look_up(status, reply(body), "pay-1"),
                Err(LookUpError::Failed(_))
            ));
        }
        let refused = reply(r#"{"status":"status_check_refused","reference":"pay-1"}"#);
        assert!(matches!(
            read_look_up(429, refused, "pay-1"),
            Err(LookUpError::RefusedByRules(_))
        ));
        let busy = reply(r#"{"status":"error"}"#);
        assert!(matches!(
            read_look_up(429, busy, "pay-1"),
            Err(LookUpError::Failed(_))
        ));
    }

    #[test]
    fn only_a_404_saying_unknown_is_never_seen() {
        let unknown = r#"{"status":"unknown","reference":"pay-1"}"#;
        assert_eq!(
            read_look_up(404, reply(unknown), "pay-1").expect("read"),
            LookUp::NeverSeen
        );
        let unnamed = read_look_up(404, reply(r#"{"status":"unknown"}"#), "pay-1");
        assert_eq!(unnamed.expect("read"), LookUp::NeverSeen);
        for (status, body) in [
            (404, None),
            (404, reply(r#"{"status":"not_found"}"#)),
            (404, reply(r#"{"status":"unknown","reference":"pay-2"}"#)),
            (200, reply(r#"{"status":"unknown"}"#)),
            (503, reply(r#"{"status":"error"}"#)),
            (503, None),
        ] {
            assert!(
                read_look_up(status, body, "pay-1").is_err(),
                "{status} must be a failed look-up"
            );
        }
    }
}
