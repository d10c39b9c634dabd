//! Reading a request body under the size limit and the read deadline, so a 10 MB body costs at
//! most the limit and is answered with the `body-too-large` problem rather than axum's
//! plain-text rejection, and a client that trickles its body holds a task no longer than
//! `BODY_READ_TIMEOUT_MS` (408 `body-timeout`). Either way nothing has been claimed yet.

use std::time::Duration;

use axum::body::{Body, Bytes};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use shared::Problem;

/// Reads at most `limit` bytes within `deadline`; more is a 413 problem, later a 408.
pub async fn read_limited(body: Body, limit: usize, deadline: Duration) -> Result<Bytes, Problem> {
    let collected = tokio::time::timeout(deadline, Limited::new(body, limit).collect()).await;
    match collected {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(error)) if error.is::<LengthLimitError>() => Err(Problem::body_too_large(limit)),
        Ok(Err(_)) => Err(Problem::body_unreadable()),
        Err(_) => Err(Problem::body_timeout(deadline)),
    }
}
