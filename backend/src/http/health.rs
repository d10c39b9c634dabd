//! The public health routes: `GET /healthz` (the process runs) and `GET /readyz` (the database
//! replied to the last background check, `crate::readiness`, and the replica is not shutting
//! down). Neither touches the database, so a
//! probe, or anyone polling them through the edge, cannot starve the requests that need it. The
//! details and the metrics are on the admin listener (`http::admin`).

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use shared::{Problem, ProblemKind};

use crate::error::Error;
use crate::readiness;
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
    let check = state.readiness.current();
    if check.ready {
        return (StatusCode::OK, "ready").into_response();
    }
    let detail = if check.problem.as_deref() == Some(readiness::DRAINING) {
        "This replica is shutting down."
    } else {
        "The database is unreachable."
    };
    Error::from(
        Problem::new(ProblemKind::ServiceUnavailable, detail)
            .with_retry_after(std::time::Duration::from_secs(1)),
    )
    .into_response()
}
