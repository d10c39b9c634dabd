//! Counts every request by route template, method and status, so tests (and operators) can see
//! exactly which requests reached the backend.

use axum::extract::{MatchedPath, Request, State};
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
    let method = request.method().to_string();
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
