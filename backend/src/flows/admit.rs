//! The checks every idempotent request passes before any database work: the body's size,
//! depth and JSON syntax (413/400), then the key (400), then the fields (422), in the order
//! [`shared::admission::admit`] keeps for the edge and the backend alike. Nothing here is saved.

use shared::admission::{Admission, Fields};
use shared::decision::Attempt;
use shared::fingerprint::SentBytes;
use shared::{IdempotencyKey, Operation, Problem};

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
    /// The request's bytes, for the replay cache to know them again.
    pub sent: SentBytes,
}

/// Checks the body, the key and the fields of a request, in a span of its own (`checks`) when
/// traces are exported: no log line is written in it, and on a replay every span is a
/// measurable share of the work (docs/figures.md). Records the key on the operation's span once
/// known.
pub(super) fn admit(
    state: &AppState,
    operation: Operation,
    submitted: &Submitted<'_>,
) -> Result<(Admitted, Fields), Problem> {
    let operation_span = tracing::Span::current();
    let _checks = traces::exporting().then(|| tracing::info_span!("checks").entered());
    let Submitted {
        key_header_values,
        path_parameter,
        body,
    } = submitted;
    let Admission {
        key,
        fingerprint,
        fields,
    } = shared::admission::admit(
        (&state.policy, state.body_limits),
        (operation, path_parameter),
        key_header_values.iter().copied(),
        body,
    )?;
    let attempt = Attempt {
        key: Ok(key.clone()),
        fingerprint,
    };
    let key = key.unwrap_or_else(IdempotencyKey::mint);
    operation_span.record("key", tracing::field::display(&key));
    let admitted = Admitted {
        key,
        attempt,
        sent: SentBytes::of(operation, path_parameter, body),
    };
    Ok((admitted, fields))
}
