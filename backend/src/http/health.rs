//! The public health routes: `GET /healthz` (the process runs) and `GET /readyz` (the database
//! answered the last background check, `crate::readiness`). Neither touches the database, so a
//! probe, or anyone polling them through the edge, cannot starve the requests that need it. The
//! details and the metrics are on the admin listener (`http::admin`).

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use shared::{Problem, ProblemKind};

use crate::error::Error;
use crate::state::AppState;

/// The public operational routes (no authentication).
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(state): State<AppState>) -> Response {
    if state.readiness.current().ready {
        return (StatusCode::OK, "ready").into_response();
    }
    Error::from(
        Problem::new(
            ProblemKind::ServiceUnavailable,
            "The database is unreachable.",
        )
        .with_retry_after(std::time::Duration::from_secs(1)),
    )
    .into_response()
}
