//! The `/v1` API answers only requests the edge forwarded: where `REQUIRE_EDGE_PROOF` is on
//! (production's default), a request without the edge's proof (`shared::edge_proof`), with a
//! forged or stale one, or with one already used, is refused 403 before its token is looked
//! at, so a client that calls the backend directly cannot skip the edge's rate limits and early
//! refusals. The proof covers the body, so the body is read here (within the usual limits) and
//! handed on to the handler as read.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use shared::edge_proof::{PROOF_HEADER, ProofError, ProvedRequest};
use shared::{Problem, ProblemKind};

use super::auth::unix_now;
use super::body::read_request_body;
use crate::error::Error;
use crate::state::AppState;

/// Middleware: passes a request on only with a good edge proof, when proofs are required.
pub async fn require_edge_proof(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let Some(proofs) = state.edge_proofs.clone() else {
        return next.run(request).await;
    };
    let header = request
        .headers()
        .get(PROOF_HEADER)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    if header.is_none() {
        return refused(ProofError::Missing);
    }
    let (parts, body) = request.into_parts();
    let body = match read_request_body(&state, body).await {
        Ok(body) => body,
        Err(problem) => return Error::from(problem).into_response(),
    };
    let path_and_query = parts
        .uri
        .path_and_query()
        .map_or(parts.uri.path(), |path| path.as_str());
    let proved = ProvedRequest {
        method: parts.method.as_str(),
        path_and_query,
        body: &body,
    };
    if let Err(refusal) = proofs.check(header.as_deref(), proved, unix_now()) {
        return refused(refusal);
    }
    next.run(Request::from_parts(parts, Body::from(body))).await
}

fn refused(reason: ProofError) -> Response {
    tracing::warn!(%reason, "request refused: not through the edge");
    Error::from(Problem::new(
        ProblemKind::Forbidden,
        "This API is reached through the edge only.",
    ))
    .into_response()
}
