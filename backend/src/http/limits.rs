//! Load shedding and deadlines on the API (`crate::config::Limits`): more than
//! `MAX_CONCURRENT_REQUESTS` at once are answered `503 service-unavailable` with `Retry-After`
//! at once, before any work (rather than queued until the pool's timeouts turn them into slow
//! errors), and every request answers within `REQUEST_TIMEOUT_MS`: past it, 503. A payment's
//! claimed work is not cut off by that: it runs in a task of its own
//! (`flows::bank_call::run_to_completion`), and the retry finds its answer.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use shared::{Problem, ProblemKind};

use crate::error::Error;
use crate::state::AppState;

/// Middleware: serves the request if fewer than `MAX_CONCURRENT_REQUESTS` are in flight, else
/// answers 503 at once.
pub async fn shed_load(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Ok(_in_flight) = Arc::clone(&state.requests_in_flight).try_acquire_owned() else {
        state.metrics.requests_shed.inc();
        return overloaded();
    };
    next.run(request).await
}

/// Middleware: answers 503 if the request has not been answered within `REQUEST_TIMEOUT_MS`.
pub async fn deadline(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let limit = state.limits.request_timeout;
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => Error::from(
            Problem::new(
                ProblemKind::ServiceUnavailable,
                format!(
                    "No answer within {} ms. Retry with the same Idempotency-Key and body: work \
                     that started goes on, and is never done twice.",
                    limit.as_millis()
                ),
            )
            .with_retry_after(Duration::from_secs(1)),
        )
        .into_response(),
    }
}

fn overloaded() -> Response {
    Error::from(
        Problem::new(
            ProblemKind::ServiceUnavailable,
            "The service is at capacity; nothing was done. Retry shortly.",
        )
        .with_retry_after(Duration::from_secs(1)),
    )
    .into_response()
}
