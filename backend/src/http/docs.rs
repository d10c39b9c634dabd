//! Public documents: the idempotency policy as the IETF draft asks servers to publish it
//! (`GET /idempotency-policy`), and a page per problem `type` (`GET /problems/{slug}`), so every
//! `type` URI in an error body resolves.

use axum::Router;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;
use shared::{Problem, ProblemKind};

use crate::error::Error;
use crate::state::AppState;

/// The documentation routes (no authentication).
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/idempotency-policy", get(published_policy))
        .route("/problems/{slug}", get(problem_type))
}

async fn published_policy(State(state): State<AppState>) -> Response {
    let policy = &state.policy;
    axum::Json(json!({
        "header": policy.header,
        "required_for": policy.required_for.iter().map(|op| json!({
            "operation": op.name(),
            "method": op.method(),
            "route": op.route_template(),
        })).collect::<Vec<_>>(),
        "key_format": policy.key_format,
        "key_max_length": shared::key::MAX_KEY_LEN,
        "unique_per": "user",
        "keep_keys_for_hours": policy.keep_keys_for.as_secs() / 3600,
        "fingerprint": "SHA-256 of the operation, its path parameter and the RFC 8785 canonical JSON body",
        "replay_header": "Idempotent-Replayed",
        "max_wait_seconds": policy.max_wait.as_secs(),
    }))
    .into_response()
}

async fn problem_type(Path(slug): Path<String>) -> Result<Response, Error> {
    let kind = ProblemKind::from_slug(&slug)
        .ok_or_else(|| Problem::new(ProblemKind::NotFound, "No such problem type."))?;
    Ok(axum::Json(json!({
        "type": kind.type_uri(),
        "title": kind.title(),
        "status": kind.status(),
    }))
    .into_response())
}
