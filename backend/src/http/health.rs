//! Health, readiness and metrics: `GET /healthz` (the process runs), `GET /readyz` (and the
//! database answers), `GET /metrics` (Prometheus/OpenMetrics text).

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use shared::{Problem, ProblemKind};

use super::problem_response::problem_response;
use crate::state::AppState;
use crate::store::StoreError;

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
    let ping = tokio::time::timeout(READINESS_TIMEOUT, state.store.ping()).await;
    match ping.unwrap_or_else(|_| Err(StoreError::Unavailable(sqlx::Error::PoolTimedOut))) {
        Ok(()) => (StatusCode::OK, "ready").into_response(),
        Err(error) => {
            tracing::warn!(%error, "not ready: database unreachable");
            problem_response(
                Problem::new(
                    ProblemKind::ServiceUnavailable,
                    "The database is unreachable.",
                )
                .with_retry_after(std::time::Duration::from_secs(1)),
            )
        }
    }
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
