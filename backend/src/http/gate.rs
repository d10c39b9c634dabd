//! The `/v1` API's gate: one middleware that runs, from the outside in, the reply deadline,
//! load shedding, the edge's proof and authentication (`http::limits`, `http::edge_proof`,
//! `http::auth`), so a request is refused by the first check it fails, before its handler runs.
//!
//! One layer, not four: axum's `from_fn` layer clones and boxes the service beneath it for every
//! request, and with the layers stacked each clone reached down through the ones below it; a
//! measurable share of a replay's CPU (docs/figures.md, "The `/v1` gate").

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

use super::{auth, edge_proof, limits};
use crate::state::AppState;

/// Middleware: serves the request if every check passes within the deadline, else replies with the
/// first refusal (503 past the deadline or at capacity, 403 without the edge's proof, 401
/// without a valid token).
pub async fn guard_api(State(state): State<AppState>, request: Request, next: Next) -> Response {
    limits::within_deadline(&state, async {
        let _place = match limits::take_place(&state).await {
            Ok(place) => place,
            Err(refusal) => return refusal,
        };
        let request = match edge_proof::proved(&state, request).await {
            Ok(request) => request,
            Err(refusal) => return refusal,
        };
        match auth::authenticated(&state, request).await {
            Ok(request) => next.run(request).await,
            Err(refusal) => refusal,
        }
    })
    .await
}
