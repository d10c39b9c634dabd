//! Load shedding and deadlines on the API (`crate::config::Limits`): more than
//! `MAX_CONCURRENT_REQUESTS` at once are answered `503 service-unavailable` with `Retry-After`
//! after a short wait for a place ([`ADMISSION_WAIT`]), before any work (rather than queued
//! until the pool's timeouts turn them into slow errors), and every request answers within `REQUEST_TIMEOUT_MS`: past it, 503. A payment's
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

/// How long a request may wait for one of the `MAX_CONCURRENT_REQUESTS` places before it is
/// shed. Short next to any client's timeout, so shedding stays prompt; long enough that a
/// place freed a moment later is taken rather than refused, and that a client ignoring
/// `Retry-After` cannot turn the server into a 503 generator (measured: shedding at once, 512
/// such connections drew 25,717 answers a second, 98% of them 503s, and the payments served
/// fell to a quarter; docs/figures.md, "The limits' cost and effect").
pub const ADMISSION_WAIT: Duration = Duration::from_millis(100);

/// Middleware: serves the request once fewer than `MAX_CONCURRENT_REQUESTS` are in flight,
/// waiting at most [`ADMISSION_WAIT`] for that; else answers 503.
pub async fn shed_load(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let place = Arc::clone(&state.requests_in_flight).acquire_owned();
    let Ok(Ok(_in_flight)) = tokio::time::timeout(ADMISSION_WAIT, place).await else {
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
