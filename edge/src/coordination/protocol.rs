//! The messages between the Worker and the Durable Object, sent as JSON over the object's
//! `fetch`: `POST /begin` with a [`BeginRequest`], which gets a [`BeginVerdict`] (at once, or
//! after a wait for the first attempt's reply); and `POST /finish` with a [`FinishReport`],
//! which gets `204`. An object or Worker of the previous version says `outcome` for `verdict`,
//! `answer` for `reply` and `answered` for `replied`: both are read.

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
    /// How long the attempt may wait for the first attempt's reply if the key is in flight
    /// (`Prefer: wait`, capped by the policy), in milliseconds; 0 when it does not wait.
    #[serde(default)]
    pub wait_ms: u64,
}

/// The object's reply to a [`BeginRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "verdict",
    rename_all = "snake_case",
    try_from = "BeginVerdictFields"
)]
pub enum BeginVerdict {
    /// Forward the attempt; it holds the in-flight mark until it reports.
    Forward,
    /// Another attempt with the same fingerprint is being forwarded: 409.
    InProgress,
    /// The key is held by a request with another fingerprint: 422.
    Mismatch,
    /// The key's final reply is known: replay it.
    Replay {
        /// The reply to replay.
        reply: SavedReply,
    },
    /// The attempt waited for the first attempt's reply (`Prefer: wait`).
    AfterWait {
        /// How the wait ended.
        end: WaitEnd,
    },
}

/// How an attempt's wait for the first attempt ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "wait", rename_all = "snake_case", try_from = "WaitEndFields")]
pub enum WaitEnd {
    /// The first attempt's reply arrived: replayed if final, passed on as it is if not (an
    /// outcome still pending is the same 503 for every waiter).
    Replied {
        /// The reply.
        reply: SavedReply,
    },
    /// The first attempt ended without a reply the edge could keep, or the wait ran out (or
    /// reached the end of the in-flight mark): 409, as without waiting.
    StillInProgress,
}

/// A [`BeginVerdict`] as read: the `verdict` tag and every variant's fields (flat, for the
/// module's size, as `super::record` explains for the stored record).
#[derive(Deserialize)]
struct BeginVerdictFields {
    #[serde(alias = "outcome")]
    verdict: BeginVerdictTag,
    #[serde(alias = "answer")]
    reply: Option<SavedReply>,
    end: Option<WaitEnd>,
}

/// The `verdict` tag of a [`BeginVerdict`].
#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum BeginVerdictTag {
    Forward,
    InProgress,
    Mismatch,
    Replay,
    AfterWait,
}

impl TryFrom<BeginVerdictFields> for BeginVerdict {
    type Error = &'static str;

    fn try_from(fields: BeginVerdictFields) -> Result<BeginVerdict, Self::Error> {
        Ok(match fields.verdict {
            BeginVerdictTag::Forward => BeginVerdict::Forward,
            BeginVerdictTag::InProgress => BeginVerdict::InProgress,
            BeginVerdictTag::Mismatch => BeginVerdict::Mismatch,
            BeginVerdictTag::Replay => BeginVerdict::Replay {
                reply: fields.reply.ok_or("missing field `reply`")?,
            },
            BeginVerdictTag::AfterWait => BeginVerdict::AfterWait {
                end: fields.end.ok_or("missing field `end`")?,
            },
        })
    }
}

/// A [`WaitEnd`] as read: the `wait` tag and the reply, if any.
#[derive(Deserialize)]
struct WaitEndFields {
    wait: WaitEndTag,
    #[serde(alias = "answer")]
    reply: Option<SavedReply>,
}

/// The `wait` tag of a [`WaitEnd`].
#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum WaitEndTag {
    #[serde(alias = "answered")]
    Replied,
    StillInProgress,
}

impl TryFrom<WaitEndFields> for WaitEnd {
    type Error = &'static str;

    fn try_from(fields: WaitEndFields) -> Result<WaitEnd, Self::Error> {
        Ok(match fields.wait {
            WaitEndTag::Replied => WaitEnd::Replied {
                reply: fields.reply.ok_or("missing field `reply`")?,
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
    /// The reply the attempt got (the backend's, or the edge's problem for a failed forward),
    /// kept if final and handed to the attempts waiting for it; `None` if its body was not
    /// text.
    #[serde(alias = "answer")]
    pub reply: Option<SavedReply>,
    /// Whether the object may store a final reply (`EDGE_KEEPS_REPLIES`); if not, it stores
    /// only the fingerprint and the expiry. Reports from Workers before the setting keep it.
    #[serde(default = "kept")]
    pub keep_reply: bool,
}

fn kept() -> bool {
    true
}

impl BeginVerdict {
    /// The reply the edge gives without the backend, or `None` when the attempt goes on. An
    /// reply after a wait names the wait the attempt was given, `wait`, in
    /// `Preference-Applied`.
    pub fn edge_reply(&self, wait: Option<Duration>) -> Option<Reply> {
        let in_progress = || {
            Reply::problem(&Problem::request_in_progress(
                shared::decision::IN_PROGRESS_RETRY_AFTER,
            ))
        };
        let reply = match self {
            BeginVerdict::Forward => return None,
            BeginVerdict::InProgress => in_progress(),
            BeginVerdict::Mismatch => Reply::problem(&Problem::idempotency_key_reused()),
            BeginVerdict::Replay { reply: saved } => Reply::replay(saved),
            BeginVerdict::AfterWait { end } => {
                let mut reply = match end {
                    WaitEnd::Replied { reply: saved } if saved.is_final() => Reply::replay(saved),
                    WaitEnd::Replied { reply: saved } => Reply::relay(saved),
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
    fn verdicts_travel_as_tagged_json() {
        let replay = BeginVerdict::Replay { reply: created() };
        let waited = BeginVerdict::AfterWait {
            end: WaitEnd::Replied { reply: created() },
        };
        let ran_out = BeginVerdict::AfterWait {
            end: WaitEnd::StillInProgress,
        };
        for verdict in [
            BeginVerdict::Forward,
            BeginVerdict::InProgress,
            BeginVerdict::Mismatch,
            replay,
            waited,
            ran_out,
        ] {
            let json = serde_json::to_string(&verdict).expect("serialises");
            assert_eq!(
                serde_json::from_str::<BeginVerdict>(&json).expect("parses"),
                verdict
            );
        }
        assert_eq!(
            serde_json::to_string(&BeginVerdict::InProgress).expect("serialises"),
            r#"{"verdict":"in_progress"}"#
        );
    }

    #[test]
    fn verdicts_read_back_with_the_tag_anywhere_and_refused_without_their_fields() {
        assert_eq!(
            serde_json::from_str::<BeginVerdict>(
                r#"{"end":{"reply":{"status":201,"content_type":null,"location":null,"body":"{}"},"wait":"replied"},"verdict":"after_wait"}"#
            )
            .expect("parses"),
            BeginVerdict::AfterWait {
                end: WaitEnd::Replied { reply: created() }
            }
        );
        // As a Worker of the previous version writes them.
        assert_eq!(
            serde_json::from_str::<BeginVerdict>(
                r#"{"outcome":"after_wait","end":{"wait":"answered","answer":{"status":201,"content_type":null,"location":null,"body":"{}"}}}"#
            )
            .expect("parses"),
            BeginVerdict::AfterWait {
                end: WaitEnd::Replied { reply: created() }
            }
        );
        let report = FinishReport {
            attempt_id: "a".to_owned(),
            fingerprint: Fingerprint::from_slice(&[7; 32]).expect("32 bytes"),
            reply: Some(created()),
            keep_reply: true,
        };
        let json = serde_json::to_string(&report).expect("serialises");
        let old_report = json.replace(r#""reply":"#, r#""answer":"#);
        assert_ne!(old_report, json);
        assert_eq!(
            serde_json::from_str::<FinishReport>(&old_report).expect("parses"),
            report
        );
        for broken in [
            r#"{"verdict":"replay"}"#,
            r#"{"verdict":"after_wait"}"#,
            r#"{"verdict":"after_wait","end":{"wait":"replied"}}"#,
            r#"{"verdict":"later"}"#,
            r#"{"reply":null}"#,
        ] {
            assert!(
                serde_json::from_str::<BeginVerdict>(broken).is_err(),
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
        let reply = BeginVerdict::InProgress
            .edge_reply(None)
            .expect("replied here");
        assert_eq!(reply.status, 409);
        assert_eq!(reply.header("retry-after"), Some("1"));
        let body: serde_json::Value = serde_json::from_slice(&reply.body).expect("json");
        assert_eq!(body["type"], "/problems/request-in-progress");
    }

    #[test]
    fn a_mismatch_gets_422_key_reused() {
        let reply = BeginVerdict::Mismatch
            .edge_reply(None)
            .expect("replied here");
        assert_eq!(reply.status, 422);
        let body: serde_json::Value = serde_json::from_slice(&reply.body).expect("json");
        assert_eq!(body["type"], "/problems/idempotency-key-reused");
    }

    #[test]
    fn forward_is_not_replied_to_at_the_edge() {
        assert_eq!(BeginVerdict::Forward.edge_reply(None), None);
    }

    #[test]
    fn after_a_wait_the_reply_names_the_wait_it_was_given() {
        let wait = Some(Duration::from_secs(10));
        let replayed = BeginVerdict::AfterWait {
            end: WaitEnd::Replied { reply: created() },
        }
        .edge_reply(wait)
        .expect("replied here");
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
        let relayed = BeginVerdict::AfterWait {
            end: WaitEnd::Replied { reply: pending },
        }
        .edge_reply(wait)
        .expect("replied here");
        assert_eq!(relayed.status, 503);
        assert_eq!(relayed.header("retry-after"), Some("5"));
        assert_eq!(relayed.header("idempotent-replayed"), None);
        assert_eq!(relayed.header("preference-applied"), Some("wait=10"));

        let ran_out = BeginVerdict::AfterWait {
            end: WaitEnd::StillInProgress,
        }
        .edge_reply(wait)
        .expect("replied here");
        assert_eq!(ran_out.status, 409);
        assert_eq!(ran_out.header("retry-after"), Some("1"));
        assert_eq!(ran_out.header("preference-applied"), Some("wait=10"));
    }
}
