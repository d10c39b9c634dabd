//! Routes for operators, never for phones: the backend's `/metrics` and everything under
//! `/admin` (reserved for the admin surface of SPEC §8). The edge replies `404 not-found` to them,
//! the body the backend gives a route it does not have, and never forwards them, so they are
//! reachable only from the backend's own network. `/healthz` and the other public routes pass.
//!
//! The path is compared after percent-decoding, so `/%6Detrics` is refused like `/metrics`
//! even if something behind the edge decodes it.

use percent_encoding::percent_decode_str;
use shared::{Problem, ProblemKind};

/// The paths refused at the edge, each with everything beneath it.
pub const OPERATOR_PATHS: [&str; 2] = ["/metrics", "/admin"];

/// Whether `path` (the request's path, without the query) is an operator route.
pub fn is_operator_route(path: &str) -> bool {
    let decoded = percent_decode_str(path).decode_utf8_lossy();
    OPERATOR_PATHS.iter().any(|operator| {
        decoded
            .strip_prefix(operator)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    })
}

/// The reply to an operator route: the backend's 404 for a route it does not have.
pub fn not_found() -> Problem {
    Problem::new(ProblemKind::NotFound, "No such route.")
}

#[cfg(test)]
mod tests {
    // Under wasm32 the same tests run in Node through wasm-bindgen-test (`.cargo/config.toml`).
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn metrics_and_everything_under_admin_are_operator_routes() {
        for path in [
            "/metrics",
            "/metrics/",
            "/metrics/anything",
            "/admin",
            "/admin/",
            "/admin/keys/7",
            "/%6Detrics",
            "/%61dmin/console",
        ] {
            assert!(is_operator_route(path), "{path}");
        }
    }

    #[test]
    fn public_routes_are_not() {
        for path in [
            "/healthz",
            "/readyz",
            "/idempotency-policy",
            "/openapi.json",
            "/problems/not-found",
            "/v1/payments/7",
            "/v1/bills/metrics/pay",
            "/metricsz",
            "/administrator",
            "/",
        ] {
            assert!(!is_operator_route(path), "{path}");
        }
    }

    #[test]
    fn the_reply_is_the_backends_unknown_route_problem() {
        let problem = not_found();
        assert_eq!(problem.status, 404);
        assert_eq!(problem.kind(), Some(ProblemKind::NotFound));
        assert_eq!(problem.detail.as_deref(), Some("No such route."));
    }
}
