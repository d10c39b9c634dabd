//! The replies the edge makes itself, as plain values (status, headers, body) that the runtime
//! copies into a response: problems (every refusal, with the headers the backend adds),
//! replays of a saved final reply, and replies passed on to attempts that waited for them.

use shared::Problem;
use shared::problem::PROBLEM_CONTENT_TYPE;

use crate::coordination::SavedReply;

/// The header that marks a replayed reply, as the backend sends it.
pub const IDEMPOTENT_REPLAYED: &str = "idempotent-replayed";

/// A response the edge makes without the backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// Header names (lower case) and values.
    pub headers: Vec<(&'static str, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Reply {
    /// A problem, with `Retry-After` when it suggests a wait and `WWW-Authenticate: Bearer` on a
    /// 401, as the backend sends it.
    pub fn problem(problem: &Problem) -> Reply {
        let mut headers = vec![("content-type", PROBLEM_CONTENT_TYPE.to_owned())];
        if let Some(seconds) = problem.retry_after_header() {
            headers.push(("retry-after", seconds));
        }
        if problem.status == 401 {
            headers.push(("www-authenticate", "Bearer".to_owned()));
        }
        Reply {
            status: problem.status,
            headers,
            body: problem.to_json(),
        }
    }

    /// A saved final reply replayed: its status, body, `Content-Type`, `Location` and the key's
    /// `Idempotency-Expires`, plus `Idempotent-Replayed: true`.
    pub fn replay(saved: &SavedReply) -> Reply {
        let mut headers = Vec::with_capacity(4);
        if let Some(content_type) = &saved.content_type {
            headers.push(("content-type", content_type.clone()));
        }
        if let Some(location) = &saved.location {
            headers.push(("location", location.clone()));
        }
        if let Some(expires) = &saved.expires {
            headers.push((shared::expiry::EXPIRES_HEADER, expires.clone()));
        }
        headers.push((IDEMPOTENT_REPLAYED, "true".to_owned()));
        Reply {
            status: saved.status,
            headers,
            body: saved.body.clone().into_bytes(),
        }
    }

    /// A reply that is not final, passed on to an attempt that waited for it as the first
    /// attempt got it: its status, body, `Content-Type` and `Retry-After`; not a replay.
    pub fn relay(saved: &SavedReply) -> Reply {
        let mut headers = Vec::with_capacity(2);
        if let Some(content_type) = &saved.content_type {
            headers.push(("content-type", content_type.clone()));
        }
        if let Some(retry_after) = &saved.retry_after {
            headers.push(("retry-after", retry_after.clone()));
        }
        Reply {
            status: saved.status,
            headers,
            body: saved.body.clone().into_bytes(),
        }
    }

    /// The reply the edge gave itself, as an object keeps it for the attempts waiting on it.
    pub fn to_saved_reply(&self) -> SavedReply {
        let header = |name| self.header(name).map(str::to_owned);
        SavedReply {
            status: self.status,
            content_type: header("content-type"),
            location: header("location"),
            retry_after: header("retry-after"),
            expires: header(shared::expiry::EXPIRES_HEADER),
            body: String::from_utf8_lossy(&self.body).into_owned(),
        }
    }

    /// The value of a header, if set.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(header, _)| header.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

#[cfg(test)]
mod tests {
    // Under wasm32 the same tests run in Node through wasm-bindgen-test (`.cargo/config.toml`).
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use std::time::Duration;

    use shared::ProblemKind;
    use shared::auth::AuthError;

    use super::*;

    #[test]
    fn a_problem_carries_its_type_and_content_type() {
        let reply = Reply::problem(&Problem::invalid_field("amount_paise", "must be whole"));
        assert_eq!(reply.status, 422);
        assert_eq!(
            reply.header("content-type"),
            Some("application/problem+json")
        );
        assert_eq!(reply.header("retry-after"), None);
        let body: serde_json::Value = serde_json::from_slice(&reply.body).expect("json");
        assert_eq!(body["field"], "amount_paise");
    }

    #[test]
    fn a_401_asks_for_a_bearer_token() {
        let reply = Reply::problem(&Problem::from(&AuthError::Missing));
        assert_eq!(reply.status, 401);
        assert_eq!(reply.header("www-authenticate"), Some("Bearer"));
    }

    #[test]
    fn a_suggested_wait_becomes_retry_after() {
        let problem = Problem::new(ProblemKind::BackendTimeout, "slow")
            .with_retry_after(Duration::from_secs(1));
        assert_eq!(Reply::problem(&problem).header("retry-after"), Some("1"));
    }

    #[test]
    fn a_replay_keeps_status_body_and_location_and_says_it_is_a_replay() {
        let saved = SavedReply {
            status: 201,
            content_type: Some("application/json".to_owned()),
            location: Some("/v1/payments/p".to_owned()),
            retry_after: None,
            expires: None,
            body: r#"{"payment_id":"p"}"#.to_owned(),
        };
        let reply = Reply::replay(&saved);
        assert_eq!(reply.status, 201);
        assert_eq!(reply.body, saved.body.as_bytes());
        assert_eq!(reply.header("content-type"), Some("application/json"));
        assert_eq!(reply.header("location"), Some("/v1/payments/p"));
        assert_eq!(reply.header("Idempotent-Replayed"), Some("true"));
    }
}
