//! Load shedding and deadlines on the API, the first steps of `http::gate`
//! (`crate::config::Limits`): more than `MAX_CONCURRENT_REQUESTS` at once get
//! `503 service-unavailable` with `Retry-After` after a short wait for a place
//! ([`ADMISSION_WAIT`]), before any work (rather than queued until the pool's timeouts turn them
//! into slow errors), and every request replies within `REQUEST_TIMEOUT_MS`: past it, 503. A
//! payment's claimed work is not cut off by that: it runs in a task of its own
//! (`flows::path`, `run_to_completion`), and the retry finds its reply.

use std::sync::Arc;
use std::time::Duration;

use axum::response::{IntoResponse, Response};
use shared::{Problem, ProblemKind};
use tokio::sync::OwnedSemaphorePermit;

use crate::error::Error;
use crate::state::AppState;

/// How long a request may wait for one of the `MAX_CONCURRENT_REQUESTS` places before it is
/// shed. Short next to any client's timeout, so shedding stays prompt; long enough that a
/// place freed a moment later is taken rather than refused, and that a client ignoring
/// `Retry-After` cannot turn the server into a 503 generator (measured: shedding at once, 512
/// such connections drew 25,717 replies a second, 98% of them 503s, and the payments served
/// fell to a quarter; docs/figures.md, "The limits' cost and effect").
pub const ADMISSION_WAIT: Duration = Duration::from_millis(100);

/// One of the `MAX_CONCURRENT_REQUESTS` places, held while the request is served: taken at
/// once or within [`ADMISSION_WAIT`]; else the 503 to reply.
pub async fn take_place(state: &AppState) -> Result<OwnedSemaphorePermit, Response> {
    let place = Arc::clone(&state.requests_in_flight).acquire_owned();
    match tokio::time::timeout(ADMISSION_WAIT, place).await {
        Ok(Ok(in_flight)) => Ok(in_flight),
        _ => {
            state.metrics.requests_shed.inc();
            Err(overloaded())
        }
    }
}

/// `serving`'s reply, or 503 if it has not replied within `REQUEST_TIMEOUT_MS`.
pub async fn within_deadline(
    state: &AppState,
    serving: impl Future<Output = Response>,
) -> Response {
    let limit = state.limits.request_timeout;
    match tokio::time::timeout(limit, serving).await {
        Ok(response) => response,
        Err(_) => Error::from(
            Problem::new(
                ProblemKind::ServiceUnavailable,
                format!(
                    "No reply within {} ms. Retry with the same Idempotency-Key and body: work \
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
