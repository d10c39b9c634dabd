//! [`Error`]: the backend's one error type, from the flows to the HTTP layer, and
//! [`Result`]. Handlers and flows pass it on with `?`; `IntoResponse` turns it into an
//! `application/problem+json` reply with a stable `type`, and never leaks internals: a 500's
//! details ride in the response's extensions ([`Failure`]) to the logging middleware
//! (`http::failures`), which is the one place that logs them.
//!
//! None of these is ever saved as a key's reply: a refusal saves nothing by rule, and a
//! failure after a claim leaves the key `started` or `unknown` for reconciliation.

use std::time::Duration;

use axum::response::{IntoResponse, Response};
use shared::{Problem, ProblemKind};

use crate::domain::Reply;
use crate::store::StoreError;

/// A request that ends without the reply it asked for.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Refused with this problem: bad input (400, 401, 404, 409, 413, 422), or a state the
    /// client must wait out. Nothing of ours failed.
    #[error("refused with {}", .0.type_uri)]
    Refused(Problem),
    /// A store operation failed: 503 if the database is away (nothing was done), else 500.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The task running a request's claimed work ended without a reply (it panicked). The
    /// key stays `started` for reconciliation.
    #[error("the request's claimed work stopped without a reply: {0}")]
    WorkAborted(String),
    /// The request's path gave up (`shared::server_path::Step::GiveUp`): every claim found the
    /// key expired, released or vanished again, or a step came out of order. A bug, or a storm
    /// of races.
    #[error("the request's path gave up: its claims ran out, or a step came out of order")]
    PathGaveUp,
    /// A handler ran without what its middleware provides (the user, the request id): a
    /// routing bug.
    #[error("the handler ran without {0}: a route is missing its middleware")]
    Misrouted(&'static str),
}

/// The backend's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<Problem> for Error {
    fn from(problem: Problem) -> Error {
        Error::Refused(problem)
    }
}

/// What went wrong behind a 5xx, for the logs only: put in the response's extensions by
/// [`Error`]'s `IntoResponse`, read by the logging middleware.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The error, as its `Display` says it.
    pub description: String,
    /// Whether it is a passing outage (503) rather than a bug (500).
    pub transient: bool,
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let problem = match &self {
            Error::Refused(problem) => return Reply::problem(problem.clone()).into_response(),
            Error::Store(StoreError::Unavailable(_)) => Problem::new(
                ProblemKind::ServiceUnavailable,
                "The payments database is unavailable; nothing was done. Retry shortly.",
            )
            .with_retry_after(Duration::from_secs(1)),
            Error::Store(_) | Error::WorkAborted(_) | Error::PathGaveUp | Error::Misrouted(_) => {
                Problem::new(
                    ProblemKind::Internal,
                    "An internal error occurred; it has been logged.",
                )
            }
        };
        let transient = problem.status == 503;
        let mut response = Reply::problem(problem).into_response();
        response.extensions_mut().insert(Failure {
            description: self.to_string(),
            transient,
        });
        response
    }
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;

    use super::*;

    fn failure_of(response: &Response) -> Option<Failure> {
        response.extensions().get::<Failure>().cloned()
    }

    #[test]
    fn a_refusal_is_its_problem_and_nothing_to_log() {
        let response =
            Error::from(Problem::new(ProblemKind::NotFound, "no such thing")).into_response();
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        assert!(failure_of(&response).is_none());
    }

    #[test]
    fn an_unavailable_database_is_a_503_to_retry_and_a_warning_to_log() {
        let response =
            Error::from(StoreError::Unavailable(sqlx::Error::PoolTimedOut)).into_response();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            response.headers().get("retry-after").map(|v| v.as_bytes()),
            Some(b"1".as_slice())
        );
        assert!(failure_of(&response).is_some_and(|failure| failure.transient));
    }

    #[tokio::test]
    async fn a_bug_is_a_500_whose_details_go_to_the_log_not_the_body() {
        for error in [
            Error::from(StoreError::Corrupt(
                "fingerprint is not 32 bytes".to_owned(),
            )),
            Error::WorkAborted("task 7 panicked".to_owned()),
            Error::PathGaveUp,
        ] {
            let description = error.to_string();
            let response = error.into_response();
            assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
            let failure = failure_of(&response).expect("the failure rides along for the log");
            assert_eq!(failure.description, description);
            assert!(!failure.transient);
            let body = axum::body::to_bytes(response.into_body(), 4096)
                .await
                .expect("body");
            let body = String::from_utf8_lossy(&body);
            assert!(body.contains("/problems/internal"), "{body}");
            assert!(!body.contains(&description), "internals leaked: {body}");
        }
    }
}
