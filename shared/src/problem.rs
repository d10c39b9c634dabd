//! RFC 9457 `application/problem+json` bodies, with the stable `type` of every refusal.
//!
//! The edge and the backend reply to the same situation with the same body, so a client (or a
//! support engineer) can branch on `type` alone, wherever the request was stopped. A `type` is
//! the path `/problems/{slug}`; the backend serves a short description there, and the README
//! lists them all. `title` is fixed per type; `detail` says what was wrong with this request;
//! `field` names the offending body field where there is one.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::auth::AuthError;
use crate::fingerprint::BodyError;
use crate::key::KeyError;

/// The media type of every error body.
pub const PROBLEM_CONTENT_TYPE: &str = "application/problem+json";

/// Every kind of problem the system replies with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProblemKind {
    /// 401: no bearer token, or one that is expired, malformed or wrongly signed.
    Unauthenticated,
    /// 403: a genuine token that may not do this (a token without the operator role on the
    /// operator API).
    Forbidden,
    /// 400: the operation requires an `Idempotency-Key` and none was sent.
    IdempotencyKeyMissing,
    /// 400: the `Idempotency-Key` header is malformed.
    IdempotencyKeyMalformed,
    /// 422: the key was already used for a different request.
    IdempotencyKeyReused,
    /// 409: the first attempt with this key is still running.
    RequestInProgress,
    /// 503: the bank's reply to the first attempt is unknown and is being looked up.
    OutcomePending,
    /// 503: the bank's reply is still unknown after every status check the rail allows; the
    /// bank's settlement file, due at `settlement_due_at`, will say. No new bank call is made.
    OutcomeAwaitingSettlement,
    /// 400: the body is not JSON.
    BodyNotJson,
    /// 400: the body nests too deeply.
    BodyTooDeep,
    /// 413: the body is over the size limit.
    BodyTooLarge,
    /// 408: the body did not arrive within the read deadline (a trickling client). Nothing was
    /// done.
    BodyTimeout,
    /// 422: a body field is missing or has a wrong value.
    InvalidField,
    /// 402: the bank declined the debit (a final outcome, saved and replayed).
    PaymentDeclined,
    /// 422: the refund is more than what remains of the payment.
    RefundExceedsPayment,
    /// 404: no such resource for this user.
    NotFound,
    /// 405: the route exists but not with this method.
    MethodNotAllowed,
    /// 429: the user or the client address is over the edge's rate limit; nothing was done.
    RateLimited,
    /// 503: a dependency (the database) is unavailable; nothing was done.
    ServiceUnavailable,
    /// 503: the partner bank is failing (the backend's breaker is open); nothing was claimed,
    /// sent or charged. Retry with the same key after `Retry-After`.
    BankUnavailable,
    /// 502: the edge could not reach the backend.
    BackendUnreachable,
    /// 504: the backend did not reply to the edge in time.
    BackendTimeout,
    /// 500: a bug. Details go to the logs, never to the client.
    Internal,
}

impl ProblemKind {
    /// Every kind, for documentation and tests.
    pub const ALL: [ProblemKind; 23] = [
        ProblemKind::Unauthenticated,
        ProblemKind::Forbidden,
        ProblemKind::IdempotencyKeyMissing,
        ProblemKind::IdempotencyKeyMalformed,
        ProblemKind::IdempotencyKeyReused,
        ProblemKind::RequestInProgress,
        ProblemKind::OutcomePending,
        ProblemKind::OutcomeAwaitingSettlement,
        ProblemKind::BodyNotJson,
        ProblemKind::BodyTooDeep,
        ProblemKind::BodyTooLarge,
        ProblemKind::BodyTimeout,
        ProblemKind::InvalidField,
        ProblemKind::PaymentDeclined,
        ProblemKind::RefundExceedsPayment,
        ProblemKind::NotFound,
        ProblemKind::MethodNotAllowed,
        ProblemKind::RateLimited,
        ProblemKind::ServiceUnavailable,
        ProblemKind::BankUnavailable,
        ProblemKind::BackendUnreachable,
        ProblemKind::BackendTimeout,
        ProblemKind::Internal,
    ];

    /// The stable last segment of the `type`.
    pub fn slug(self) -> &'static str {
        match self {
            ProblemKind::Unauthenticated => "unauthenticated",
            ProblemKind::Forbidden => "forbidden",
            ProblemKind::IdempotencyKeyMissing => "idempotency-key-missing",
            ProblemKind::IdempotencyKeyMalformed => "idempotency-key-malformed",
            ProblemKind::IdempotencyKeyReused => "idempotency-key-reused",
            ProblemKind::RequestInProgress => "request-in-progress",
            ProblemKind::OutcomePending => "outcome-pending",
            ProblemKind::OutcomeAwaitingSettlement => "outcome-awaiting-settlement",
            ProblemKind::BodyNotJson => "body-not-json",
            ProblemKind::BodyTooDeep => "body-too-deep",
            ProblemKind::BodyTooLarge => "body-too-large",
            ProblemKind::BodyTimeout => "body-timeout",
            ProblemKind::InvalidField => "invalid-field",
            ProblemKind::PaymentDeclined => "payment-declined",
            ProblemKind::RefundExceedsPayment => "refund-exceeds-payment",
            ProblemKind::NotFound => "not-found",
            ProblemKind::MethodNotAllowed => "method-not-allowed",
            ProblemKind::RateLimited => "rate-limited",
            ProblemKind::ServiceUnavailable => "service-unavailable",
            ProblemKind::BankUnavailable => "bank-unavailable",
            ProblemKind::BackendUnreachable => "backend-unreachable",
            ProblemKind::BackendTimeout => "backend-timeout",
            ProblemKind::Internal => "internal",
        }
    }

    /// The HTTP status code.
    pub fn status(self) -> u16 {
        match self {
            ProblemKind::Unauthenticated => 401,
            ProblemKind::PaymentDeclined => 402,
            ProblemKind::Forbidden => 403,
            ProblemKind::NotFound => 404,
            ProblemKind::MethodNotAllowed => 405,
            ProblemKind::BodyTimeout => 408,
            ProblemKind::RequestInProgress => 409,
            ProblemKind::BodyTooLarge => 413,
            ProblemKind::RateLimited => 429,
            ProblemKind::IdempotencyKeyReused
            | ProblemKind::InvalidField
            | ProblemKind::RefundExceedsPayment => 422,
            ProblemKind::IdempotencyKeyMissing
            | ProblemKind::IdempotencyKeyMalformed
            | ProblemKind::BodyNotJson
            | ProblemKind::BodyTooDeep => 400,
            ProblemKind::Internal => 500,
            ProblemKind::BackendUnreachable => 502,
            ProblemKind::OutcomePending
            | ProblemKind::OutcomeAwaitingSettlement
            | ProblemKind::ServiceUnavailable
            | ProblemKind::BankUnavailable => 503,
            ProblemKind::BackendTimeout => 504,
        }
    }

    /// The short, fixed summary of the type.
    pub fn title(self) -> &'static str {
        match self {
            ProblemKind::Unauthenticated => "A valid bearer token is required",
            ProblemKind::Forbidden => "This token may not do this",
            ProblemKind::IdempotencyKeyMissing => "Idempotency-Key header is missing",
            ProblemKind::IdempotencyKeyMalformed => "Idempotency-Key header is malformed",
            ProblemKind::IdempotencyKeyReused => {
                "Idempotency-Key was already used for a different request"
            }
            ProblemKind::RequestInProgress => "A request with this Idempotency-Key is in progress",
            ProblemKind::OutcomePending => "The outcome of this request is still being confirmed",
            ProblemKind::OutcomeAwaitingSettlement => {
                "The outcome of this request awaits the bank's settlement file"
            }
            ProblemKind::BodyNotJson => "Request body is not valid JSON",
            ProblemKind::BodyTooDeep => "Request body nests too deeply",
            ProblemKind::BodyTooLarge => "Request body is too large",
            ProblemKind::BodyTimeout => "Request body did not arrive in time",
            ProblemKind::InvalidField => "A request field is missing or invalid",
            ProblemKind::PaymentDeclined => "The bank declined the payment",
            ProblemKind::RefundExceedsPayment => "Refund exceeds the refundable amount",
            ProblemKind::NotFound => "Not found",
            ProblemKind::MethodNotAllowed => "Method not allowed",
            ProblemKind::RateLimited => "Too many requests",
            ProblemKind::ServiceUnavailable => "Service temporarily unavailable",
            ProblemKind::BankUnavailable => "The bank is unavailable; nothing was charged",
            ProblemKind::BackendUnreachable => "The payments service could not be reached",
            ProblemKind::BackendTimeout => "The payments service did not reply in time",
            ProblemKind::Internal => "Internal error",
        }
    }

    /// The `type` URI reference: `/problems/{slug}`.
    pub fn type_uri(self) -> String {
        format!("/problems/{}", self.slug())
    }

    /// Looks a kind up by its slug.
    pub fn from_slug(slug: &str) -> Option<ProblemKind> {
        ProblemKind::ALL
            .into_iter()
            .find(|kind| kind.slug() == slug)
    }
}

/// An RFC 9457 problem details body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemas", derive(schemars::JsonSchema))]
pub struct Problem {
    /// `/problems/{slug}`, stable.
    #[serde(rename = "type")]
    #[cfg_attr(
        feature = "schemas",
        schemars(schema_with = "crate::api::problem_type_schema")
    )]
    pub type_uri: String,
    /// The type's fixed summary.
    pub title: String,
    /// The HTTP status code, repeated for clients that lose it.
    pub status: u16,
    /// What was wrong with this request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The body field at fault, for `invalid-field`; a boxed `str`, two words not three, so
    /// a problem stays small enough to return by value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schemas",
        schemars(description = "The body field at fault (invalid-field)")
    )]
    pub field: Option<Box<str>>,
    /// For `outcome-awaiting-settlement`: when the bank's settlement file is due (RFC 3339).
    /// Boxed, so the rare field costs every problem one pointer, not a string's three words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schemas", schemars(extend("format" = "date-time"), description = "When the bank's settlement file is due (outcome-awaiting-settlement)"))]
    pub settlement_due_at: Option<Box<String>>,
    /// For `outcome-pending`: when the rail's rules let the bank be asked about it next
    /// (RFC 3339), when the server knows; boxed like `settlement_due_at`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schemas", schemars(extend("format" = "date-time"), description = "When the rail's rules let the bank be asked about it next, where known (outcome-pending)"))]
    pub next_check_at: Option<Box<String>>,
    /// The wait to suggest, in whole seconds (rounded up): the HTTP layer sends it as
    /// `Retry-After`, never in the body.
    #[serde(skip)]
    pub retry_after: Option<u32>,
}

impl Problem {
    /// A problem of `kind` with a detail message.
    pub fn new(kind: ProblemKind, detail: impl Into<String>) -> Problem {
        Problem {
            type_uri: kind.type_uri(),
            title: kind.title().to_owned(),
            status: kind.status(),
            detail: Some(detail.into()),
            field: None,
            settlement_due_at: None,
            next_check_at: None,
            retry_after: None,
        }
    }

    /// `invalid-field` naming `field`.
    pub fn invalid_field(field: &str, detail: impl Into<String>) -> Problem {
        Problem {
            field: Some(field.into()),
            ..Problem::new(ProblemKind::InvalidField, detail)
        }
    }

    /// Adds the `Retry-After` wait.
    pub fn with_retry_after(mut self, wait: Duration) -> Problem {
        let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        self.retry_after = Some(u32::try_from(seconds).unwrap_or(u32::MAX));
        self
    }

    /// The `Retry-After` wait, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
            .map(|seconds| Duration::from_secs(u64::from(seconds)))
    }

    /// The kind, recovered from the `type` (for clients reading a body).
    pub fn kind(&self) -> Option<ProblemKind> {
        self.type_uri
            .strip_prefix("/problems/")
            .and_then(ProblemKind::from_slug)
    }

    /// The `Retry-After` header value in whole seconds (rounded up), if any.
    pub fn retry_after_header(&self) -> Option<String> {
        self.retry_after.map(|seconds| seconds.to_string())
    }

    /// The body as JSON bytes.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a problem always serialises")
    }

    /// 413 `body-too-large`, found while reading the body off the connection (before parsing,
    /// so the length past the limit is never known).
    pub fn body_too_large(limit_bytes: usize) -> Problem {
        Problem::new(
            ProblemKind::BodyTooLarge,
            format!("The request body is larger than the {limit_bytes} bytes accepted."),
        )
    }

    /// 408 `body-timeout`: the body took longer than `deadline` to arrive.
    pub fn body_timeout(deadline: std::time::Duration) -> Problem {
        Problem::new(
            ProblemKind::BodyTimeout,
            format!(
                "The request body did not arrive within {} ms; nothing was done.",
                deadline.as_millis()
            ),
        )
    }

    /// 400 `body-not-json` for a body that could not be read off the connection at all.
    pub fn body_unreadable() -> Problem {
        Problem::new(
            ProblemKind::BodyNotJson,
            "The request body could not be read.",
        )
    }

    /// 409 `request-in-progress`: the first attempt with this key is still running.
    pub fn request_in_progress(retry_after: Duration) -> Problem {
        Problem::new(
            ProblemKind::RequestInProgress,
            "The first request with this Idempotency-Key is still being processed; retry after the indicated time.",
        )
        .with_retry_after(retry_after)
    }

    /// 429 `rate-limited`: the user or the client address sent more requests than the edge's
    /// rate limit allows. The request was not looked at further, so its key is untouched and
    /// the same request sent after `retry_after` is handled as usual.
    pub fn rate_limited(retry_after: Duration) -> Problem {
        Problem::new(
            ProblemKind::RateLimited,
            "Too many requests; retry after the indicated time. Nothing was done with this \
             request: retrying it with the same Idempotency-Key and body is safe.",
        )
        .with_retry_after(retry_after)
    }

    /// 405 `method-not-allowed`: the route exists, but not with this method (at the edge also a
    /// method that cannot be sent on at all, which no route takes).
    pub fn method_not_allowed() -> Problem {
        Problem::new(
            ProblemKind::MethodNotAllowed,
            "This route does not accept this method.",
        )
    }

    /// 422 `idempotency-key-reused`: the key was used for a request with another fingerprint.
    pub fn idempotency_key_reused() -> Problem {
        Problem::new(
            ProblemKind::IdempotencyKeyReused,
            "This Idempotency-Key was already used for a different request; \
             send a new key for a new action.",
        )
    }
}

/// The `detail` of a 401: one fixed text, so a refusal never tells a caller which check its
/// token failed (a forger learns nothing); the reason is the [`AuthError`], for the log.
pub const UNAUTHENTICATED_DETAIL: &str =
    "This request needs a valid bearer token in the Authorization header.";

/// The wait a 503 for an unreachable identity provider suggests: a provider's outage is not
/// over in a second, and every retry costs it a fetch.
const PROVIDER_RETRY_AFTER: std::time::Duration = std::time::Duration::from_secs(30);

impl From<&AuthError> for Problem {
    /// 401 `unauthenticated`, the same for every reason but two: a token that passed every check
    /// but names no usable user (its issuer signed it, so saying why tells a forger nothing) is
    /// told what is wrong with its user claim; and while the identity provider's keys are too old
    /// to trust (it has been unreachable too long), a 503 that says so, to be retried.
    fn from(reason: &AuthError) -> Problem {
        match reason {
            AuthError::BadSubject(_) => {
                Problem::new(ProblemKind::Unauthenticated, reason.to_string())
            }
            AuthError::ProviderKeysTooOld => {
                Problem::new(ProblemKind::ServiceUnavailable, reason.to_string())
                    .with_retry_after(PROVIDER_RETRY_AFTER)
            }
            _ => Problem::new(ProblemKind::Unauthenticated, UNAUTHENTICATED_DETAIL),
        }
    }
}

impl From<&KeyError> for Problem {
    fn from(error: &KeyError) -> Problem {
        let kind = match error {
            KeyError::Missing => ProblemKind::IdempotencyKeyMissing,
            _ => ProblemKind::IdempotencyKeyMalformed,
        };
        Problem::new(kind, error.to_string())
    }
}

impl From<&BodyError> for Problem {
    fn from(error: &BodyError) -> Problem {
        let kind = match error {
            BodyError::TooLarge { .. } => ProblemKind::BodyTooLarge,
            BodyError::TooDeep { .. } => ProblemKind::BodyTooDeep,
            BodyError::NotJson { .. } => ProblemKind::BodyNotJson,
        };
        Problem::new(kind, error.to_string())
    }
}

#[cfg(test)]
mod tests {
    // Under wasm32 the same tests run through wasm-bindgen-test (see `.cargo/config.toml`).
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use std::collections::HashSet;

    #[test]
    fn slugs_are_unique_and_round_trip() {
        let slugs: HashSet<_> = ProblemKind::ALL.iter().map(|k| k.slug()).collect();
        assert_eq!(slugs.len(), ProblemKind::ALL.len());
        for kind in ProblemKind::ALL {
            assert_eq!(ProblemKind::from_slug(kind.slug()), Some(kind));
        }
    }

    #[test]
    fn client_errors_are_4xx_and_never_500() {
        for kind in ProblemKind::ALL {
            let status = kind.status();
            assert!((400..600).contains(&status), "{kind:?}");
            assert_eq!(status == 500, kind == ProblemKind::Internal, "{kind:?}");
        }
    }

    #[test]
    fn body_follows_rfc_9457_and_omits_empty_members() {
        let problem = Problem::new(ProblemKind::RequestInProgress, "try again")
            .with_retry_after(Duration::from_millis(1500));
        let json: serde_json::Value =
            serde_json::from_slice(&problem.to_json()).expect("valid json");
        assert_eq!(
            json,
            serde_json::json!({
                "type": "/problems/request-in-progress",
                "title": "A request with this Idempotency-Key is in progress",
                "status": 409,
                "detail": "try again",
            })
        );
        assert_eq!(problem.retry_after_header().as_deref(), Some("2"));
        assert_eq!(problem.kind(), Some(ProblemKind::RequestInProgress));
    }

    #[test]
    fn key_and_body_errors_map_to_their_types() {
        assert_eq!(
            Problem::from(&KeyError::Missing).kind(),
            Some(ProblemKind::IdempotencyKeyMissing)
        );
        assert_eq!(
            Problem::from(&KeyError::NotUuid).kind(),
            Some(ProblemKind::IdempotencyKeyMalformed)
        );
        let too_large = BodyError::TooLarge {
            length: 2,
            limit: 1,
        };
        assert_eq!(Problem::from(&too_large).status, 413);
    }

    #[test]
    fn refusals_made_by_edge_and_backend_alike_have_their_types() {
        let unauthenticated = Problem::from(&AuthError::Expired);
        assert_eq!(unauthenticated.kind(), Some(ProblemKind::Unauthenticated));
        assert_eq!(
            unauthenticated.detail.as_deref(),
            Some(UNAUTHENTICATED_DETAIL)
        );
        assert_eq!(Problem::body_too_large(16).status, 413);
        assert_eq!(
            Problem::body_unreadable().kind(),
            Some(ProblemKind::BodyNotJson)
        );
        let in_progress = Problem::request_in_progress(Duration::from_secs(1));
        assert_eq!(in_progress.status, 409);
        assert_eq!(in_progress.retry_after_header().as_deref(), Some("1"));
        assert_eq!(Problem::idempotency_key_reused().status, 422);
        let limited = Problem::rate_limited(Duration::from_millis(2500));
        assert_eq!(limited.kind(), Some(ProblemKind::RateLimited));
        assert_eq!(limited.status, 429);
        assert_eq!(limited.retry_after_header().as_deref(), Some("3"));
    }

    #[test]
    fn every_token_refusal_is_the_same_401_body() {
        let reasons = [
            AuthError::Missing,
            AuthError::NotBearer,
            AuthError::Malformed,
            AuthError::WrongAlgorithm,
            AuthError::BadSignature,
            AuthError::Expired,
            AuthError::NotYetValid,
            AuthError::IssuedInFuture,
            AuthError::WrongIssuer,
            AuthError::WrongAudience,
        ];
        let bodies: HashSet<Vec<u8>> = reasons
            .iter()
            .map(|reason| Problem::from(reason).to_json())
            .collect();
        assert_eq!(bodies.len(), 1);
        for reason in &reasons {
            let detail = Problem::from(reason).detail.unwrap_or_default();
            assert!(!detail.contains(&reason.to_string()), "{reason:?}");
        }
    }

    #[test]
    fn a_token_naming_no_usable_user_is_told_why() {
        let reason = AuthError::BadSubject(crate::auth::SubjectError::TooLong);
        let problem = Problem::from(&reason);
        assert_eq!(problem.status, 401);
        assert_eq!(
            problem.detail.as_deref(),
            Some(
                "the token's user claim is not a user id: the user claim is longer than 255 characters"
            )
        );
    }

    #[test]
    fn invalid_field_names_the_field() {
        let problem = Problem::invalid_field("amount_paise", "must be a positive integer");
        let json: serde_json::Value =
            serde_json::from_slice(&problem.to_json()).expect("valid json");
        assert_eq!(json["field"], "amount_paise");
        assert_eq!(json["status"], 422);
    }
}
