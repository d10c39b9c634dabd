//! The edge's span of a request, as a plain value: which request, how the edge replied to it
//! ([`EdgeHandling`]) and when. The runtime fills one in per request and, when spans are
//! exported, hands it to [`super::otlp`].

use super::TraceContext;
use crate::coordination::BeginVerdict;
use crate::forward_rules::ForwardFailure;

/// The span's name; the method, path and handling are its attributes.
pub const EDGE_SPAN_NAME: &str = "edge request";

/// How the edge came to its reply: the span's `edge.handling` attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EdgeHandling {
    /// The backend replied; its reply was passed on (`forwarded`).
    Forwarded,
    /// A key's saved final reply was replayed without the backend (`replayed`).
    Replayed,
    /// An in-flight duplicate waited at its key's object (`Prefer: wait`) and was replied to when
    /// the wait ended (`held`).
    Held,
    /// The edge refused the request itself, before the backend: 404 operator route, 429, the
    /// gate's 401/400/413/422, the key's 409 or 422, a method that cannot be sent on (`refused`).
    Refused,
    /// The forward got no reply: the backend was unreachable (502) or timed out (504)
    /// (`forward_failed`).
    ForwardFailed,
    /// The edge failed itself: misconfigured or an unexpected runtime error (500)
    /// (`edge_error`).
    EdgeError,
}

impl EdgeHandling {
    /// The attribute's value.
    pub fn as_str(self) -> &'static str {
        match self {
            EdgeHandling::Forwarded => "forwarded",
            EdgeHandling::Replayed => "replayed",
            EdgeHandling::Held => "held",
            EdgeHandling::Refused => "refused",
            EdgeHandling::ForwardFailed => "forward_failed",
            EdgeHandling::EdgeError => "edge_error",
        }
    }

    /// The handling of a request its key's object replied to (or, for `Forward`, let through).
    pub fn of_key_object(verdict: &BeginVerdict) -> EdgeHandling {
        match verdict {
            BeginVerdict::Forward => EdgeHandling::Forwarded,
            BeginVerdict::InProgress | BeginVerdict::Mismatch => EdgeHandling::Refused,
            BeginVerdict::Replay { .. } => EdgeHandling::Replayed,
            BeginVerdict::AfterWait { .. } => EdgeHandling::Held,
        }
    }
}

impl From<ForwardFailure> for EdgeHandling {
    fn from(failure: ForwardFailure) -> EdgeHandling {
        match failure {
            ForwardFailure::Unreachable
            | ForwardFailure::TimedOut
            | ForwardFailure::ProxyReplied { .. } => EdgeHandling::ForwardFailed,
            // Nothing was sent: the edge replies 405 as the backend would.
            ForwardFailure::MethodNotForwardable => EdgeHandling::Refused,
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
    /// The reply's status.
    pub status: u16,
    /// How the edge came to the reply.
    pub handling: EdgeHandling,
    /// When the request arrived, in Unix milliseconds.
    pub start_ms: u64,
    /// When the reply was ready, in Unix milliseconds.
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
    fn the_key_objects_replies_are_replayed_held_or_refused() {
        let handling = |begin: BeginVerdict| EdgeHandling::of_key_object(&begin).as_str();
        assert_eq!(handling(BeginVerdict::InProgress), "refused");
        assert_eq!(handling(BeginVerdict::Mismatch), "refused");
        let waited = BeginVerdict::AfterWait {
            end: WaitEnd::StillInProgress,
        };
        assert_eq!(handling(waited), "held");
        let reply = SavedReply {
            status: 201,
            content_type: None,
            location: None,
            retry_after: None,
            expires: None,
            body: String::new(),
        };
        assert_eq!(handling(BeginVerdict::Replay { reply }), "replayed");
        assert_eq!(handling(BeginVerdict::Forward), "forwarded");
    }

    #[test]
    fn a_forward_without_a_reply_failed_but_an_unsendable_method_was_refused() {
        let handling = |failure: ForwardFailure| EdgeHandling::from(failure).as_str();
        assert_eq!(handling(ForwardFailure::Unreachable), "forward_failed");
        assert_eq!(handling(ForwardFailure::TimedOut), "forward_failed");
        assert_eq!(handling(ForwardFailure::MethodNotForwardable), "refused");
    }
}
