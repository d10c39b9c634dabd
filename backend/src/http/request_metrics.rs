//! Counts every request by route template, method and status, so tests (and operators) can see
//! exactly which requests reached the backend. Every label comes from a fixed set, so no request
//! can make a new series: a route is its template (or `unmatched`), a method outside the known
//! ones is `other`.

use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;

use crate::metrics::RequestLabels;
use crate::state::AppState;

/// Middleware: counts the request once its response is ready.
pub async fn count_requests(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |path| path.as_str().to_owned());
    let method = method_label(request.method());
    let response = next.run(request).await;
    state
        .metrics
        .http_requests
        .get_or_create(&RequestLabels {
            route,
            method,
            status: response.status().as_u16(),
        })
        .inc();
    response
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
