//! CORS on the public listener, for the origins `CORS_ALLOWED_ORIGINS` lists
//! (`config::cors`): a request whose `Origin` is listed is handed to tower-http's
//! [`CorsLayer`], which replies to a preflight (`OPTIONS`) itself, before the `/v1` gate (a
//! preflight carries no token or edge proof), and marks every other reply readable by that
//! page. Every other request, with no `Origin` or another one, passes by unchanged: no CORS
//! header, so a browser keeps that page from reading the reply (or, after a preflight that
//! got a 405, from sending the request at all). The admin listener has no CORS.
//!
//! A page may send the headers our clients send (SPEC §7: the token, the key, `Prefer`, the
//! trace headers) and read those a retrying client needs: `Idempotent-Replayed`,
//! `Idempotency-Expires`, `Location`, `Retry-After`, `Preference-Applied`.

use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::Method;
use axum::http::header::{self, HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use shared::cors::EXPOSED_HEADERS;
use shared::prefer::PREFER_HEADER;
use shared::trace_context::{TRACEPARENT_HEADER, TRACESTATE_HEADER};
use tower::{Layer, ServiceExt};
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::config::AllowedOrigins;

/// How long a browser may reuse a preflight's reply for the same request shape.
const PREFLIGHT_MAX_AGE: Duration = Duration::from_secs(600);

/// The listed origins and the CORS replies for them; see the module's documentation.
#[derive(Clone)]
pub struct CrossOrigin {
    /// The origins, as a browser sends them in `Origin`.
    allowed: Vec<HeaderValue>,
    /// What is said to them.
    cors: CorsLayer,
}

impl CrossOrigin {
    /// CORS for `origins`, whose pages send the key in `key_header` (the policy's); `None` when
    /// no origin is listed (CORS off).
    pub fn for_origins(origins: &AllowedOrigins, key_header: &str) -> Option<CrossOrigin> {
        if origins.is_empty() {
            return None;
        }
        let allowed: Vec<HeaderValue> = origins
            .iter()
            .map(|origin| {
                HeaderValue::from_str(origin).expect("config::cors admits only ASCII origins")
            })
            .collect();
        let key_header = HeaderName::try_from(key_header)
            .expect("the policy admits only a header name that is an HTTP token");
        let cors = CorsLayer::new()
            .allow_origin(AllowOrigin::list(allowed.clone()))
            .allow_methods([Method::GET, Method::POST])
            .allow_headers([
                header::AUTHORIZATION,
                header::CONTENT_TYPE,
                header::USER_AGENT,
                key_header,
                HeaderName::from_static(PREFER_HEADER),
                HeaderName::from_static(TRACEPARENT_HEADER),
                HeaderName::from_static(TRACESTATE_HEADER),
            ])
            .expose_headers(EXPOSED_HEADERS.map(HeaderName::from_static))
            .max_age(PREFLIGHT_MAX_AGE);
        Some(CrossOrigin { allowed, cors })
    }

    /// Whether `request` comes from a page on a listed origin.
    fn is_from_listed_origin(&self, request: &Request) -> bool {
        request
            .headers()
            .get(header::ORIGIN)
            .is_some_and(|origin| self.allowed.contains(origin))
    }
}

/// Middleware: CORS for a request from a listed origin (a preflight is replied to here); any
/// other request passes by unchanged.
pub async fn allow_listed_origins(
    State(cross_origin): State<CrossOrigin>,
    request: Request,
    next: Next,
) -> Response {
    if !cross_origin.is_from_listed_origin(&request) {
        return next.run(request).await;
    }
    match cross_origin.cors.layer(next).oneshot(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
}
