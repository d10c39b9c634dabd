//! The messages between the Worker and the Durable Object, sent as JSON over the object's
//! `fetch`: `POST /begin` with a [`BeginRequest`], answered with a [`BeginOutcome`]; and
//! `POST /finish` with a [`FinishReport`], answered `204`.

use serde::{Deserialize, Serialize};
use shared::{Fingerprint, Problem};

use super::answer::SavedAnswer;
use crate::reply::Reply;

/// The path of the "an attempt wants to go to the backend" message.
pub const BEGIN_PATH: &str = "/begin";

/// The path of the "the attempt's forward ended" message.
pub const FINISH_PATH: &str = "/finish";

/// An attempt asks to be forwarded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BeginRequest {
    /// Names this attempt, so only its own report clears its mark (the request id).
    pub attempt_id: String,
    /// The fingerprint of the attempt's operation and body.
    pub fingerprint: Fingerprint,
    /// How long the in-flight mark holds if nobody clears it, in milliseconds.
    pub mark_for_ms: u64,
}

/// The object's answer to a [`BeginRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum BeginOutcome {
    /// Forward the attempt; it holds the in-flight mark until it reports.
    Forward,
    /// Another attempt with the same fingerprint is being forwarded: 409.
    InProgress,
    /// The key is held by a request with another fingerprint: 422.
    Mismatch,
    /// The key's final answer is known: replay it.
    Replay {
        /// The answer to replay.
        answer: SavedAnswer,
    },
}

/// An attempt's forward ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinishReport {
    /// The attempt, as named in its [`BeginRequest`].
    pub attempt_id: String,
    /// The attempt's fingerprint.
    pub fingerprint: Fingerprint,
    /// When the attempt began (Unix milliseconds): the key's expiry counts from here, never
    /// later than the backend's own claim.
    pub began_at_ms: u64,
    /// The backend's answer when it is final; `None` for any other outcome.
    pub final_answer: Option<SavedAnswer>,
}

impl BeginOutcome {
    /// The answer the edge gives without the backend, or `None` when the attempt goes on.
    pub fn edge_reply(&self) -> Option<Reply> {
        match self {
            BeginOutcome::Forward => None,
            BeginOutcome::InProgress => Some(Reply::problem(&Problem::request_in_progress(
                shared::decision::IN_PROGRESS_RETRY_AFTER,
            ))),
            BeginOutcome::Mismatch => Some(Reply::problem(&Problem::idempotency_key_reused())),
            BeginOutcome::Replay { answer } => Some(Reply::replay(answer)),
        }
    }
}

#[cfg(test)]
mod tests {
    // Under wasm32 the same tests run in Node through wasm-bindgen-test (`.cargo/config.toml`).
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn outcomes_travel_as_tagged_json() {
        let replay = BeginOutcome::Replay {
            answer: SavedAnswer {
                status: 201,
                content_type: None,
                location: None,
                body: "{}".to_owned(),
            },
        };
        for outcome in [
            BeginOutcome::Forward,
            BeginOutcome::InProgress,
            BeginOutcome::Mismatch,
            replay,
        ] {
            let json = serde_json::to_string(&outcome).expect("serialises");
            assert_eq!(
                serde_json::from_str::<BeginOutcome>(&json).expect("parses"),
                outcome
            );
        }
        assert_eq!(
            serde_json::to_string(&BeginOutcome::InProgress).expect("serialises"),
            r#"{"outcome":"in_progress"}"#
        );
    }

    #[test]
    fn an_attempt_in_progress_gets_409_with_retry_after() {
        let reply = BeginOutcome::InProgress
            .edge_reply()
            .expect("answered here");
        assert_eq!(reply.status, 409);
        assert_eq!(reply.header("retry-after"), Some("1"));
        let body: serde_json::Value = serde_json::from_slice(&reply.body).expect("json");
        assert_eq!(body["type"], "/problems/request-in-progress");
    }

    #[test]
    fn a_mismatch_gets_422_key_reused() {
        let reply = BeginOutcome::Mismatch.edge_reply().expect("answered here");
        assert_eq!(reply.status, 422);
        let body: serde_json::Value = serde_json::from_slice(&reply.body).expect("json");
        assert_eq!(body["type"], "/problems/idempotency-key-reused");
    }

    #[test]
    fn forward_is_not_answered_at_the_edge() {
        assert_eq!(BeginOutcome::Forward.edge_reply(), None);
    }
}
