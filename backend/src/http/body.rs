//! Reading a request body under the size limit, so a 10 MB body costs at most the limit and is
//! answered with the `body-too-large` problem rather than axum's plain-text rejection.

use axum::body::{Body, Bytes};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use shared::Problem;

/// Reads at most `limit` bytes; more is a 413 problem.
pub async fn read_limited(body: Body, limit: usize) -> Result<Bytes, Problem> {
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(error) if error.is::<LengthLimitError>() => Err(Problem::body_too_large(limit)),
        Err(_) => Err(Problem::body_unreadable()),
    }
}
