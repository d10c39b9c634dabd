//! The `/v1` API replies only to requests the edge forwarded (a step of `http::gate`): where
//! `REQUIRE_EDGE_PROOF` is on (production's default), a request without the edge's proof
//! (`shared::edge_proof`, over the method, path, token, key and body), with a forged or stale
//! one, or with one already used at this replica, is refused 403 before its token is looked
//! at, so a client that calls the backend directly cannot skip the edge's rate limits and early
//! refusals. The proof covers the body, so the body is read here (within the usual limits) and
//! handed on to the handler as read.

use axum::body::Body;
use axum::extract::Request;
use axum::http::HeaderValue;
use axum::http::header::AUTHORIZATION;
use axum::response::{IntoResponse, Response};
use shared::edge_proof::{PROOF_HEADER, ProofError, ProvedRequest};
use shared::{Problem, ProblemKind};

use super::auth::unix_now;
use super::body::read_request_body;
use crate::error::Error;
use crate::state::AppState;

/// The request, to pass on, if it has a good edge proof or proofs are not required; else the
/// 403 (or the body's problem) to reply.
pub async fn proved(state: &AppState, request: Request) -> Result<Request, Response> {
    let Some(proofs) = state.edge_proofs.as_deref() else {
        return Ok(request);
    };
    let header = request
        .headers()
        .get(PROOF_HEADER)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    if header.is_none() {
        return Err(refused(ProofError::Missing));
    }
    let (parts, body) = request.into_parts();
    let body = read_request_body(state, body)
        .await
        .map_err(|problem| Error::from(problem).into_response())?;
    let path_and_query = parts
        .uri
        .path_and_query()
        .map_or(parts.uri.path(), |path| path.as_str());
    let header_bytes = |name: &str| parts.headers.get(name).map(HeaderValue::as_bytes);
    let proved = ProvedRequest {
        method: parts.method.as_str(),
        path_and_query,
        authorization: header_bytes(AUTHORIZATION.as_str()),
        idempotency_key: header_bytes(state.policy.header.as_str()),
        body: &body,
    };
    if let Err(refusal) = proofs.check(header.as_deref(), proved, unix_now()) {
        return Err(refused(refusal));
    }
    Ok(Request::from_parts(parts, Body::from(body)))
}

fn refused(reason: ProofError) -> Response {
    tracing::warn!(%reason, "request refused: not through the edge");
    Error::from(Problem::new(
        ProblemKind::Forbidden,
        "This API is reached through the edge only.",
    ))
    .into_response()
}
