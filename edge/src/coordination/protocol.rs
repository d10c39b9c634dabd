//! The messages between the Worker and the Durable Object, sent as JSON over the object's
//! `fetch`: `POST /begin` with a [`BeginRequest`], answered with a [`BeginOutcome`] (at once,
//! or after a wait for the first attempt's answer); and `POST /finish` with a
//! [`FinishReport`], answered `204`.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use shared::prefer::{PREFERENCE_APPLIED_HEADER, wait_value};
use shared::{Fingerprint, Problem};

use super::saved_reply::SavedReply;
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
    /// How long the attempt may wait for the first attempt's answer if the key is in flight
    /// (`Prefer: wait`, capped by the policy), in milliseconds; 0 when it does not wait.
    #[serde(default)]
    pub wait_ms: u64,
}

/// The object's answer to a [`BeginRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "outcome",
    rename_all = "snake_case",
    try_from = "BeginOutcomeFields"
)]
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
        answer: SavedReply,
    },
    /// The attempt waited for the first attempt's answer (`Prefer: wait`).
    AfterWait {
        /// How the wait ended.
        end: WaitEnd,
    },
}

/// How an attempt's wait for the first attempt ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "wait", rename_all = "snake_case", try_from = "WaitEndFields")]
pub enum WaitEnd {
    /// The first attempt's answer arrived: replayed if final, passed on as it is if not (an
    /// outcome still pending is the same 503 for every waiter).
    Answered {
        /// The answer.
        answer: SavedReply,
    },
    /// The first attempt ended without an answer the edge could keep, or the wait ran out (or
    /// reached the end of the in-flight mark): 409, as without waiting.
    StillInProgress,
}

/// A [`BeginOutcome`] as read: the `outcome` tag and every variant's fields (flat, for the
/// module's size, as `super::record` explains for the stored record).
#[derive(Deserialize)]
struct BeginOutcomeFields {
    outcome: BeginOutcomeTag,
    answer: Option<SavedReply>,
    end: Option<WaitEnd>,
}

/// The `outcome` tag of a [`BeginOutcome`].
#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum BeginOutcomeTag {
    Forward,
    InProgress,
    Mismatch,
    Replay,
    AfterWait,
}

impl TryFrom<BeginOutcomeFields> for BeginOutcome {
    type Error = &'static str;

    fn try_from(fields: BeginOutcomeFields) -> Result<BeginOutcome, Self::Error> {
        Ok(match fields.outcome {
            BeginOutcomeTag::Forward => BeginOutcome::Forward,
            BeginOutcomeTag::InProgress => BeginOutcome::InProgress,
            BeginOutcomeTag::Mismatch => BeginOutcome::Mismatch,
            BeginOutcomeTag::Replay => BeginOutcome::Replay {
                answer: fields.answer.ok_or("missing field `answer`")?,
            },
            BeginOutcomeTag::AfterWait => BeginOutcome::AfterWait {
                end: fields.end.ok_or("missing field `end`")?,
            },
        })
    }
}

/// A [`WaitEnd`] as read: the `wait` tag and the answer, if any.
#[derive(Deserialize)]
struct WaitEndFields {
    wait: WaitEndTag,
    answer: Option<SavedReply>,
}

/// The `wait` tag of a [`WaitEnd`].
#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum WaitEndTag {
    Answered,
    StillInProgress,
}

impl TryFrom<WaitEndFields> for WaitEnd {
    type Error = &'static str;

    fn try_from(fields: WaitEndFields) -> Result<WaitEnd, Self::Error> {
        Ok(match fields.wait {
            WaitEndTag::Answered => WaitEnd::Answered {
                answer: fields.answer.ok_or("missing field `answer`")?,
            },
            WaitEndTag::StillInProgress => WaitEnd::StillInProgress,
        })
    }
}

/// An attempt's forward ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinishReport {
    /// The attempt, as named in its [`BeginRequest`].
    pub attempt_id: String,
    /// The attempt's fingerprint.
    pub fingerprint: Fingerprint,
    /// The answer the attempt got (the backend's, or the edge's problem for a failed forward),
    /// kept if final and handed to the attempts waiting for it; `None` if its body was not
    /// text.
    pub answer: Option<SavedReply>,
}

impl BeginOutcome {
    /// The answer the edge gives without the backend, or `None` when the attempt goes on. An
    /// answer after a wait names the wait the attempt was given, `wait`, in
    /// `Preference-Applied`.
    pub fn edge_reply(&self, wait: Option<Duration>) -> Option<Reply> {
        let in_progress = || {
            Reply::problem(&Problem::request_in_progress(
                shared::decision::IN_PROGRESS_RETRY_AFTER,
            ))
        };
        let reply = match self {
            BeginOutcome::Forward => return None,
            BeginOutcome::InProgress => in_progress(),
            BeginOutcome::Mismatch => Reply::problem(&Problem::idempotency_key_reused()),
            BeginOutcome::Replay { answer } => Reply::replay(answer),
            BeginOutcome::AfterWait { end } => {
                let mut reply = match end {
                    WaitEnd::Answered { answer } if answer.is_final() => Reply::replay(answer),
                    WaitEnd::Answered { answer } => Reply::relay(answer),
                    WaitEnd::StillInProgress => in_progress(),
                };
                if let Some(wait) = wait {
                    reply
                        .headers
                        .push((PREFERENCE_APPLIED_HEADER, wait_value(wait)));
                }
                reply
            }
        };
        Some(reply)
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
        let replay = BeginOutcome::Replay { answer: created() };
        let waited = BeginOutcome::AfterWait {
            end: WaitEnd::Answered { answer: created() },
        };
        let ran_out = BeginOutcome::AfterWait {
            end: WaitEnd::StillInProgress,
        };
        for outcome in [
            BeginOutcome::Forward,
            BeginOutcome::InProgress,
            BeginOutcome::Mismatch,
            replay,
            waited,
            ran_out,
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
    fn outcomes_read_back_with_the_tag_anywhere_and_refused_without_their_fields() {
        assert_eq!(
            serde_json::from_str::<BeginOutcome>(
                r#"{"end":{"answer":{"status":201,"content_type":null,"location":null,"body":"{}"},"wait":"answered"},"outcome":"after_wait"}"#
            )
            .expect("parses"),
            BeginOutcome::AfterWait {
                end: WaitEnd::Answered { answer: created() }
            }
        );
        for broken in [
            r#"{"outcome":"replay"}"#,
            r#"{"outcome":"after_wait"}"#,
            r#"{"outcome":"after_wait","end":{"wait":"answered"}}"#,
            r#"{"outcome":"later"}"#,
            r#"{"answer":null}"#,
        ] {
            assert!(
                serde_json::from_str::<BeginOutcome>(broken).is_err(),
                "{broken}"
            );
        }
    }

    fn created() -> SavedReply {
        SavedReply {
            status: 201,
            content_type: None,
            location: None,
            retry_after: None,
            expires: None,
            body: "{}".to_owned(),
        }
    }

    #[test]
    fn an_attempt_in_progress_gets_409_with_retry_after() {
        let reply = BeginOutcome::InProgress
            .edge_reply(None)
            .expect("answered here");
        assert_eq!(reply.status, 409);
        assert_eq!(reply.header("retry-after"), Some("1"));
        let body: serde_json::Value = serde_json::from_slice(&reply.body).expect("json");
        assert_eq!(body["type"], "/problems/request-in-progress");
    }

    #[test]
    fn a_mismatch_gets_422_key_reused() {
        let reply = BeginOutcome::Mismatch
            .edge_reply(None)
            .expect("answered here");
        assert_eq!(reply.status, 422);
        let body: serde_json::Value = serde_json::from_slice(&reply.body).expect("json");
        assert_eq!(body["type"], "/problems/idempotency-key-reused");
    }

    #[test]
    fn forward_is_not_answered_at_the_edge() {
        assert_eq!(BeginOutcome::Forward.edge_reply(None), None);
    }

    #[test]
    fn after_a_wait_the_answer_names_the_wait_it_was_given() {
        let wait = Some(Duration::from_secs(10));
        let replayed = BeginOutcome::AfterWait {
            end: WaitEnd::Answered { answer: created() },
        }
        .edge_reply(wait)
        .expect("answered here");
        assert_eq!(replayed.status, 201);
        assert_eq!(replayed.header("idempotent-replayed"), Some("true"));
        assert_eq!(replayed.header("preference-applied"), Some("wait=10"));

        let pending = SavedReply {
            status: 503,
            content_type: Some("application/problem+json".to_owned()),
            retry_after: Some("5".to_owned()),
            expires: None,
            body: r#"{"type":"/problems/outcome-pending"}"#.to_owned(),
            ..created()
        };
        let relayed = BeginOutcome::AfterWait {
            end: WaitEnd::Answered { answer: pending },
        }
        .edge_reply(wait)
        .expect("answered here");
        assert_eq!(relayed.status, 503);
        assert_eq!(relayed.header("retry-after"), Some("5"));
        assert_eq!(relayed.header("idempotent-replayed"), None);
        assert_eq!(relayed.header("preference-applied"), Some("wait=10"));

        let ran_out = BeginOutcome::AfterWait {
            end: WaitEnd::StillInProgress,
        }
        .edge_reply(wait)
        .expect("answered here");
        assert_eq!(ran_out.status, 409);
        assert_eq!(ran_out.header("retry-after"), Some("1"));
        assert_eq!(ran_out.header("preference-applied"), Some("wait=10"));
    }
}
