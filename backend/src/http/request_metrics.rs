//! Counts and times every request by route template, method and status, and writes its access
//! log line, so tests (and operators) can see exactly which requests reached the backend and how
//! long they took. Every label comes from a fixed set, so no request can make a new series: a
//! route is its template (or `unmatched`), a method outside the known ones is `other`; the
//! duration's histogram has the status by class.
//!
//! The access log line is at `info` under the target `access` (method, route, status, duration,
//! whether the reply was a replay, the request id): `RUST_LOG=info,access=warn` turns it off.

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;

use crate::domain::RequestId;
use crate::metrics::{DurationLabels, RequestLabels};
use crate::state::AppState;

/// The reply header that marks a replay (SPEC §4).
const REPLAYED_HEADER: &str = "idempotent-replayed";

/// Middleware: counts and times the request once its response is ready, and logs it.
pub async fn count_requests(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |path| path.as_str().to_owned());
    let method = method_label(request.method());
    let request_id = request.extensions().get::<RequestId>().cloned();
    let response = next.run(request).await;
    let took = started.elapsed();
    let status = response.status();
    let replayed = response.headers().contains_key(REPLAYED_HEADER);
    let request_id = request_id.as_ref().map_or("", RequestId::as_str);
    tracing::info!(
        target: "access",
        method,
        route,
        status = status.as_u16(),
        duration_ms = took.as_secs_f64() * 1_000.0,
        replayed,
        request_id,
        "request served"
    );
    let metrics = &state.metrics;
    metrics
        .http_request_duration
        .get_or_create(&DurationLabels {
            route: route.clone(),
            method: method.clone(),
            status_class: status_class(status.as_u16()),
        })
        .observe(took.as_secs_f64());
    metrics
        .http_requests
        .get_or_create(&RequestLabels {
            route,
            method,
            status: status.as_u16(),
        })
        .inc();
    response
}

/// The status's class, as a label.
fn status_class(status: u16) -> &'static str {
    match status {
        200..=299 => "2xx",
        300..=399 => "3xx",
        400..=499 => "4xx",
        500..=599 => "5xx",
        _ => "1xx",
    }
}

/// The method as a label: a known method's name, or `other` (a client may send any token).
fn method_label(method: &Method) -> String {
    const KNOWN: [Method; 7] = [
        Method::GET,
        Method::POST,
        Method::PUT,
        Method::DELETE,
        Method::PATCH,
        Method::HEAD,
        Method::OPTIONS,
    ];
    if KNOWN.contains(method) {
        method.as_str().to_owned()
    } else {
        "other".to_owned()
    }
}
