//! Reading a request body under the size limit and the read deadline, so a 10 MB body costs at
//! most the limit and gets the `body-too-large` problem rather than axum's
//! plain-text rejection, and a client that trickles its body holds a task no longer than
//! `BODY_READ_TIMEOUT_MS` (408 `body-timeout`). Either way nothing has been claimed yet.

use std::time::Duration;

use axum::body::{Body, Bytes};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use shared::Problem;

use crate::state::AppState;

/// Reads a request body under the server's limits (`state.body_limits`, `state.limits`).
pub async fn read_request_body(state: &AppState, body: Body) -> Result<Bytes, Problem> {
    read_limited(
        body,
        state.body_limits.max_bytes,
        state.limits.body_read_timeout,
    )
    .await
}

/// Reads at most `limit` bytes within `deadline`; more is a 413 problem, later a 408.
async fn read_limited(body: Body, limit: usize, deadline: Duration) -> Result<Bytes, Problem> {
    let collected = tokio::time::timeout(deadline, Limited::new(body, limit).collect()).await;
    match collected {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(error)) if error.is::<LengthLimitError>() => Err(Problem::body_too_large(limit)),
        Ok(Err(_)) => Err(Problem::body_unreadable()),
        Err(_) => Err(Problem::body_timeout(deadline)),
    }
}
