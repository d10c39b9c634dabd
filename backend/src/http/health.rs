//! Health, readiness and metrics: `GET /healthz` (the process runs), `GET /readyz` (and the
//! database answers), `GET /metrics` (Prometheus/OpenMetrics text).

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use shared::{Problem, ProblemKind};

use crate::error::Error;
use crate::state::AppState;

/// How long readiness waits for the database.
const READINESS_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(800);

/// The operational routes (no authentication).
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(state): State<AppState>) -> Response {
    // Answer within a typical one-second probe timeout, not the pool's acquire timeout.
    let why_not = match tokio::time::timeout(READINESS_TIMEOUT, state.store.ping()).await {
        Ok(Ok(())) => return (StatusCode::OK, "ready").into_response(),
        Ok(Err(error)) => error.to_string(),
        Err(_) => format!("no answer within {READINESS_TIMEOUT:?}"),
    };
    tracing::warn!(why_not, "not ready: the database does not answer");
    Error::from(
        Problem::new(
            ProblemKind::ServiceUnavailable,
            "The database is unreachable.",
        )
        .with_retry_after(std::time::Duration::from_secs(1)),
    )
    .into_response()
}

async fn metrics(State(state): State<AppState>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.render(),
    )
        .into_response()
}
