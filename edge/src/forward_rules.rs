//! What the edge adds to a forwarded request, and how a failed forward is replied to.
//!
//! A forwarded request keeps the client's method, path, query, headers (`Authorization` and the
//! key among them) and body; the edge adds a fresh request id so the backend's logs can be
//! matched with the edge's, and its own W3C `traceparent` (with the client's `tracestate` when
//! it joined the client's trace, `crate::trace`), so the backend's span is a child of the edge's. When the backend cannot be reached the client gets a 502
//! `backend-unreachable` problem, and when it does not reply within the timeout a 504
//! `backend-timeout`: both say that a retry with the same key is safe, because the backend
//! decides whether anything was done.
//!
//! A browser's CORS preflight (`OPTIONS` with `Origin` and `Access-Control-Request-Method`) is
//! no guarded operation, so it is forwarded like this too, with no token, key or body check: the
//! backend replies to it (`backend/src/http/cors.rs`: allowed for the origins it lists, else as
//! to any other `OPTIONS`, 405 on an API route), and its `Access-Control-*` reply headers, like
//! every header of a forwarded reply, reach the browser as the backend sent them.

use std::time::Duration;

use shared::{Problem, ProblemKind};

use crate::trace::{TRACEPARENT_HEADER, TRACESTATE_HEADER};

/// The header carrying the edge's request id to the backend.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// Incoming headers not passed on: `Host` names the edge, and the runtime sets the backend's;
/// an `Edge-Proof` is the edge's own to make, never a client's to pass through; the trace
/// headers are set from the edge's trace context instead.
pub const NOT_FORWARDED_HEADERS: [&str; 4] = [
    "host",
    shared::edge_proof::PROOF_HEADER,
    TRACEPARENT_HEADER,
    TRACESTATE_HEADER,
];

/// How long a client should wait before retrying after a failed forward.
pub const RETRY_AFTER_FAILED_FORWARD: Duration = Duration::from_secs(1);

/// A fresh request id: a random v4 UUID.
pub fn new_request_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// The path and query of a serialized URL (`http://host/v1/x?y#z` gives `/v1/x?y`): what the
/// edge appends to the backend's base URL. The fragment never leaves the client anyway.
pub fn path_and_query(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |at| at + 3);
    let rest = &url[after_scheme..];
    let from_path = rest.find('/').map_or("/", |at| &rest[at..]);
    from_path.split('#').next().unwrap_or(from_path)
}

/// Whether an incoming header is passed on to the backend.
pub fn is_forwarded_header(name: &str) -> bool {
    !NOT_FORWARDED_HEADERS
        .iter()
        .any(|skipped| skipped.eq_ignore_ascii_case(name))
}

/// Why a forward got no reply from the backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForwardFailure {
    /// The connection failed: refused, reset, or the name did not resolve.
    Unreachable,
    /// No reply within the timeout; the backend may still finish the request.
    TimedOut,
    /// The client's method cannot be sent on (`CONNECT`, `TRACE`): no route of the API takes it,
    /// so it is the 405 the backend gives a method a route lacks; nothing reached the backend.
    MethodNotForwardable,
    /// Something between the edge and the backend (a load balancer with no replica ready, a
    /// gateway) replied this 5xx in the backend's place ([`is_not_the_backends_reply`]): the
    /// request may or may not have reached the backend.
    ProxyReplied {
        /// The status it replied.
        status: u16,
    },
}

/// Whether a reply the edge got is not the backend's own: a 5xx without a problem body. Every
/// error the backend sends is `application/problem+json` (SPEC §4); a load balancer's "no server
/// available" or a gateway's error page is not, and passing it on would give the client a reply
/// no contract documents.
pub fn is_not_the_backends_reply(status: u16, content_type: Option<&str>) -> bool {
    let problem = content_type.is_some_and(|value| {
        value.split(';').next().is_some_and(|media| {
            media
                .trim()
                .eq_ignore_ascii_case("application/problem+json")
        })
    });
    status >= 500 && !problem
}

impl ForwardFailure {
    /// The problem the client gets; `timeout` is the bound the edge waited.
    pub fn problem(self, timeout: Duration) -> Problem {
        let problem = match self {
            ForwardFailure::MethodNotForwardable => return Problem::method_not_allowed(),
            ForwardFailure::Unreachable => Problem::new(
                ProblemKind::BackendUnreachable,
                "The edge could not reach the payments service. Retrying is safe: a payment or \
                 refund retried with the same Idempotency-Key and body is never done twice.",
            ),
            ForwardFailure::ProxyReplied { status } => Problem::new(
                ProblemKind::BackendUnreachable,
                format!(
                    "A proxy in front of the payments service replied {status} in its place; the \
                     request may not have reached it. Retrying is safe: a payment or refund \
                     retried with the same Idempotency-Key and body is never done twice."
                ),
            ),
            ForwardFailure::TimedOut => Problem::new(
                ProblemKind::BackendTimeout,
                format!(
                    "The payments service did not reply within {} ms; the request may still \
                     complete. Retrying is safe: a payment or refund retried with the same \
                     Idempotency-Key and body is never done twice.",
                    timeout.as_millis()
                ),
            ),
        };
        problem.with_retry_after(RETRY_AFTER_FAILED_FORWARD)
    }
}

#[cfg(test)]
mod tests {
    // Under wasm32 the same tests run in Node through wasm-bindgen-test (`.cargo/config.toml`).
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn request_ids_are_fresh_uuids() {
        let (a, b) = (new_request_id(), new_request_id());
        assert_ne!(a, b);
        assert_eq!(
            uuid::Uuid::parse_str(&a).map(|u| u.get_version_num()),
            Ok(4)
        );
    }

    #[test]
    fn path_and_query_keep_everything_after_the_host_but_the_fragment() {
        assert_eq!(
            path_and_query("http://edge.test/v1/bills/a%20b/pay?x=1&y=2#top"),
            "/v1/bills/a%20b/pay?x=1&y=2"
        );
        assert_eq!(path_and_query("https://edge.test/"), "/");
        assert_eq!(path_and_query("https://edge.test"), "/");
    }

    #[test]
    fn host_a_clients_edge_proof_and_its_trace_headers_are_not_passed_on_as_sent() {
        for name in ["Host", "Edge-Proof", "traceparent", "TraceState"] {
            assert!(!is_forwarded_header(name), "{name}");
        }
        for name in [
            "authorization",
            "Idempotency-Key",
            "content-type",
            "x-request-id",
        ] {
            assert!(is_forwarded_header(name), "{name}");
        }
    }

    #[test]
    fn a_cors_preflight_is_no_guarded_operation_and_keeps_its_headers() {
        let gate = crate::gate::Gate::new(crate::config::compiled_policy());
        for path in ["/v1/bills/elec-1/pay", "/v1/payments/p-1/refunds"] {
            assert!(gate.route("OPTIONS", path).is_none(), "{path}");
            assert!(gate.route("POST", path).is_some(), "{path}");
        }
        for name in [
            "Origin",
            "Access-Control-Request-Method",
            "Access-Control-Request-Headers",
        ] {
            assert!(is_forwarded_header(name), "{name}");
        }
    }

    #[test]
    fn failures_become_502_and_504_problems_with_retry_after() {
        let unreachable = ForwardFailure::Unreachable.problem(Duration::from_secs(15));
        assert_eq!(unreachable.kind(), Some(ProblemKind::BackendUnreachable));
        assert_eq!(unreachable.status, 502);
        let timed_out = ForwardFailure::TimedOut.problem(Duration::from_millis(1500));
        assert_eq!(timed_out.status, 504);
        assert!(
            timed_out
                .detail
                .as_deref()
                .is_some_and(|d| d.contains("1500 ms"))
        );
        assert_eq!(timed_out.retry_after_header().as_deref(), Some("1"));
        let proxy = ForwardFailure::ProxyReplied { status: 503 }.problem(Duration::from_secs(15));
        assert_eq!(
            (proxy.kind(), proxy.status),
            (Some(ProblemKind::BackendUnreachable), 502)
        );
        assert!(proxy.detail.as_deref().is_some_and(|d| d.contains("503")));
    }

    #[test]
    fn only_a_5xx_without_a_problem_body_is_a_proxys_reply() {
        // HAProxy's "no server available", a gateway's error page, no body at all.
        assert!(is_not_the_backends_reply(503, Some("text/html")));
        assert!(is_not_the_backends_reply(502, None));
        assert!(is_not_the_backends_reply(504, Some("application/json")));
        // The backend's own: problems, whatever their parameters or case.
        assert!(!is_not_the_backends_reply(
            503,
            Some("application/problem+json")
        ));
        assert!(!is_not_the_backends_reply(
            500,
            Some("Application/Problem+JSON; charset=utf-8")
        ));
        // Below 500 the status is the backend's to give (a 2xx, 402, 409, 422…).
        assert!(!is_not_the_backends_reply(201, Some("application/json")));
        assert!(!is_not_the_backends_reply(404, None));
    }
}
