//! [`Reply`]: what the service replies to a request, shared by the flows that make it, the
//! replay cache that keeps finished ones, the error type that turns failures into problems, and
//! the HTTP layer that sends it.

use std::time::Duration;

use shared::Problem;
use shared::problem::PROBLEM_CONTENT_TYPE;
use time::OffsetDateTime;

/// What the service replies to a request, in domain terms: status, content type, body and the
/// headers that matter. Rendered to HTTP by the `http` layer; kept by the replay cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// `application/json` or `application/problem+json`.
    pub content_type: &'static str,
    /// The body.
    pub body: Vec<u8>,
    /// The `Location` header, for a created payment.
    pub location: Option<String>,
    /// The `Retry-After` header.
    pub retry_after: Option<Duration>,
    /// Whether this is a replay of a saved reply (`Idempotent-Replayed: true`).
    pub replayed: bool,
    /// The wait the request was given for its key's first attempt, when it waited
    /// (`Preference-Applied: wait=N`).
    pub waited: Option<Duration>,
    /// The expiry of the request's key, as its row says, on every reply to a request whose
    /// key is stored (`Idempotency-Expires`, SPEC §4).
    pub expires_at: Option<OffsetDateTime>,
}

impl Reply {
    /// A problem reply.
    pub fn problem(problem: Problem) -> Reply {
        Reply {
            status: problem.status,
            content_type: PROBLEM_CONTENT_TYPE,
            retry_after: problem.retry_after(),
            body: problem.to_json(),
            location: None,
            replayed: false,
            waited: None,
            expires_at: None,
        }
    }

    /// Marks the reply as a replay.
    pub fn replayed(self) -> Reply {
        Reply {
            replayed: true,
            ..self
        }
    }

    /// Marks the reply as one about a key that expires at `at` (its row's expiry).
    pub fn expiring(self, at: OffsetDateTime) -> Reply {
        Reply {
            expires_at: Some(at),
            ..self
        }
    }

    /// Marks the reply as given after waiting (up to `allowed`) for the key's first attempt.
    pub fn after_waiting(self, allowed: Duration) -> Reply {
        Reply {
            waited: Some(allowed),
            ..self
        }
    }
}
