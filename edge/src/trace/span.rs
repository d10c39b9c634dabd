//! The edge's span of a request, as a plain value: which request, how the edge answered it
//! ([`EdgeOutcome`]) and when. The runtime fills one in per request and, when spans are
//! exported, hands it to [`super::otlp`].

use super::TraceContext;
use crate::coordination::BeginOutcome;
use crate::forward_rules::ForwardFailure;

/// The span's name; the method, path and outcome are its attributes.
pub const EDGE_SPAN_NAME: &str = "edge request";

/// How the edge came to its answer: the span's `edge.outcome` attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EdgeOutcome {
    /// The backend answered; its answer was passed on (`forwarded`).
    Forwarded,
    /// A key's saved final answer was replayed without the backend (`replayed`).
    Replayed,
    /// An in-flight duplicate waited at its key's object (`Prefer: wait`) and was answered when
    /// the wait ended (`held`).
    Held,
    /// The edge refused the request itself, before the backend: 404 operator route, 429, the
    /// gate's 401/400/413/422, the key's 409 or 422, a method that cannot be sent on (`refused`).
    Refused,
    /// The forward got no answer: the backend was unreachable (502) or timed out (504)
    /// (`forward_failed`).
    ForwardFailed,
    /// The edge failed itself: misconfigured or an unexpected runtime error (500)
    /// (`edge_error`).
    EdgeError,
}

impl EdgeOutcome {
    /// The attribute's value.
    pub fn as_str(self) -> &'static str {
        match self {
            EdgeOutcome::Forwarded => "forwarded",
            EdgeOutcome::Replayed => "replayed",
            EdgeOutcome::Held => "held",
            EdgeOutcome::Refused => "refused",
            EdgeOutcome::ForwardFailed => "forward_failed",
            EdgeOutcome::EdgeError => "edge_error",
        }
    }

    /// The outcome of a request its key's object answered (or, for `Forward`, let through).
    pub fn of_key_object(outcome: &BeginOutcome) -> EdgeOutcome {
        match outcome {
            BeginOutcome::Forward => EdgeOutcome::Forwarded,
            BeginOutcome::InProgress | BeginOutcome::Mismatch => EdgeOutcome::Refused,
            BeginOutcome::Replay { .. } => EdgeOutcome::Replayed,
            BeginOutcome::AfterWait { .. } => EdgeOutcome::Held,
        }
    }
}

impl From<ForwardFailure> for EdgeOutcome {
    fn from(failure: ForwardFailure) -> EdgeOutcome {
        match failure {
            ForwardFailure::Unreachable | ForwardFailure::TimedOut => EdgeOutcome::ForwardFailed,
            // Nothing was sent: the edge answers 405 as the backend would.
            ForwardFailure::MethodNotForwardable => EdgeOutcome::Refused,
        }
    }
}

/// One request as the edge served it.
#[derive(Debug, Clone, Copy)]
pub struct EdgeSpan<'a> {
    /// The trace, the edge's span id and its parent.
    pub trace: &'a TraceContext,
    /// The request's method.
    pub method: &'a str,
    /// The request's path, without its query.
    pub path: &'a str,
    /// The answer's status.
    pub status: u16,
    /// How the edge came to the answer.
    pub outcome: EdgeOutcome,
    /// When the request arrived, in Unix milliseconds.
    pub start_ms: u64,
    /// When the answer was ready, in Unix milliseconds.
    pub end_ms: u64,
}

#[cfg(test)]
mod tests {
    // Under wasm32 the same tests run in Node through wasm-bindgen-test (`.cargo/config.toml`).
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::coordination::{SavedReply, WaitEnd};

    #[test]
    fn the_key_objects_answers_are_replayed_held_or_refused() {
        let outcome = |begin: BeginOutcome| EdgeOutcome::of_key_object(&begin).as_str();
        assert_eq!(outcome(BeginOutcome::InProgress), "refused");
        assert_eq!(outcome(BeginOutcome::Mismatch), "refused");
        let waited = BeginOutcome::AfterWait {
            end: WaitEnd::StillInProgress,
        };
        assert_eq!(outcome(waited), "held");
        let answer = SavedReply {
            status: 201,
            content_type: None,
            location: None,
            retry_after: None,
            expires: None,
            body: String::new(),
        };
        assert_eq!(outcome(BeginOutcome::Replay { answer }), "replayed");
        assert_eq!(outcome(BeginOutcome::Forward), "forwarded");
    }

    #[test]
    fn a_forward_without_an_answer_failed_but_an_unsendable_method_was_refused() {
        let outcome = |failure: ForwardFailure| EdgeOutcome::from(failure).as_str();
        assert_eq!(outcome(ForwardFailure::Unreachable), "forward_failed");
        assert_eq!(outcome(ForwardFailure::TimedOut), "forward_failed");
        assert_eq!(outcome(ForwardFailure::MethodNotForwardable), "refused");
    }
}
