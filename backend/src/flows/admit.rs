//! The checks every idempotent request passes before any database work, in a fixed order that
//! the edge follows too: the body's size, depth and JSON syntax (413/400), then the key (400,
//! via [`shared::decide`]), then the body's fields (422). Nothing here is saved.

use shared::decision::Attempt;
use shared::fingerprint::{CheckedBody, SentBytes, fingerprint};
use shared::{Decision, IdempotencyKey, KeyError, Operation, Problem, decide};

use crate::state::AppState;
use crate::telemetry::traces;

/// A payment or refund request as it arrived, unchecked: the values of its key header, its
/// path parameter (the bill, or the payment refunded) and its body.
pub struct Submitted<'a> {
    /// Every value of the policy's key header, raw (a repeated header is refused).
    pub key_header_values: Vec<&'a [u8]>,
    /// The path parameter, percent-decoded.
    pub path_parameter: &'a str,
    /// The body, as sent.
    pub body: &'a [u8],
}

/// A request that passed the checks.
pub(super) struct Admitted {
    /// The key: the client's, or one minted here when the policy does not require a key and
    /// none was sent (so the work is still claimed and crash-safe, just not replayable).
    pub key: IdempotencyKey,
    /// The attempt, for later decisions against a stored key.
    pub attempt: Attempt,
    /// The parsed body.
    pub body: serde_json::Value,
    /// The request's bytes, for the replay cache to know them again.
    pub sent: SentBytes,
}

/// Checks the body and the key of a request, in a span of its own (`checks`) when traces are
/// exported: no log line is written in it, and on a replay every span is a measurable share of
/// the work (docs/figures.md).
/// Records the key on the operation's span once known.
pub(super) fn admit(
    state: &AppState,
    operation: Operation,
    submitted: &Submitted<'_>,
) -> Result<Admitted, Problem> {
    let operation_span = tracing::Span::current();
    let _checks = traces::exporting().then(|| tracing::info_span!("checks").entered());
    let Submitted {
        key_header_values,
        path_parameter,
        body,
    } = submitted;
    let CheckedBody { value, fingerprint } =
        fingerprint(operation, path_parameter, body, state.body_limits)
            .map_err(|error| Problem::from(&error))?;
    let key_header_values = key_header_values.iter().copied();
    let attempt = Attempt {
        key: state.policy.parse_key_header(operation, key_header_values),
        fingerprint,
    };
    let now = time::OffsetDateTime::now_utc();
    let key = match decide(&state.policy, &attempt, None, now) {
        Decision::RejectMissingKey => return Err(Problem::from(&KeyError::Missing)),
        Decision::RejectMalformedKey(error) => return Err(Problem::from(&error)),
        // With no stored record the only other decision is `Claim`, whose key is present.
        _ => attempt
            .key
            .clone()
            .ok()
            .flatten()
            .unwrap_or_else(IdempotencyKey::mint),
    };
    operation_span.record("key", tracing::field::display(&key));
    Ok(Admitted {
        key,
        attempt,
        body: value,
        sent: SentBytes::of(operation, path_parameter, body),
    })
}
