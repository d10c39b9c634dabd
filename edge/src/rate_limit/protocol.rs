//! The message between the Worker and a rate limiter object, as JSON over the object's `fetch`:
//! `POST /take` with a [`TakeRequest`], which gets a [`TakeVerdict`].

use std::time::Duration;

use serde::{Deserialize, Serialize};
use shared::Problem;

use super::bucket::{Admission, Limit, TokenBucket};
use crate::reply::Reply;

/// The path of the "a request wants a token" message.
pub const TAKE_PATH: &str = "/take";

/// A request wants a token from its requester's bucket, under this limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TakeRequest {
    /// The limit the Worker is configured with.
    pub limit: Limit,
}

/// The object's reply to a [`TakeRequest`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "verdict",
    rename_all = "snake_case",
    try_from = "TakeVerdictFields"
)]
pub enum TakeVerdict {
    /// A token was taken: the request goes on.
    Allowed,
    /// Over the limit: 429.
    Limited {
        /// Until the next token, in milliseconds.
        retry_after_ms: u64,
    },
}

/// A [`TakeVerdict`] as read: the `verdict` tag and the wait, if any. Flat rather than serde's
/// internally tagged enum, for the Wasm module's size (`crate::coordination` reads its
/// messages the same way); the JSON is the same.
#[derive(Deserialize)]
struct TakeVerdictFields {
    /// A limiter of the previous version says `outcome`.
    #[serde(alias = "outcome")]
    verdict: TakeVerdictTag,
    retry_after_ms: Option<u64>,
}

/// The `verdict` tag of a [`TakeVerdict`].
#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum TakeVerdictTag {
    Allowed,
    Limited,
}

impl TryFrom<TakeVerdictFields> for TakeVerdict {
    type Error = &'static str;

    fn try_from(fields: TakeVerdictFields) -> Result<TakeVerdict, Self::Error> {
        Ok(match fields.verdict {
            TakeVerdictTag::Allowed => TakeVerdict::Allowed,
            TakeVerdictTag::Limited => TakeVerdict::Limited {
                retry_after_ms: fields
                    .retry_after_ms
                    .ok_or("missing field `retry_after_ms`")?,
            },
        })
    }
}

impl TakeRequest {
    /// Applies the request to the object's bucket (a full one for a requester seen first) at
    /// `now_ms`, and says what to reply.
    pub fn apply(self, bucket: &mut Option<TokenBucket>, now_ms: u64) -> TakeVerdict {
        let bucket = bucket.get_or_insert_with(|| TokenBucket::full(self.limit, now_ms));
        match bucket.take(self.limit, now_ms) {
            Admission::Allowed => TakeVerdict::Allowed,
            Admission::Limited { retry_after } => TakeVerdict::Limited {
                retry_after_ms: u64::try_from(retry_after.as_millis()).unwrap_or(u64::MAX),
            },
        }
    }
}

impl TakeVerdict {
    /// The 429 the edge sends, or `None` when the request goes on.
    pub fn edge_reply(self) -> Option<Reply> {
        match self {
            TakeVerdict::Allowed => None,
            TakeVerdict::Limited { retry_after_ms } => Some(Reply::problem(
                &Problem::rate_limited(Duration::from_millis(retry_after_ms)),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    // Under wasm32 the same tests run in Node through wasm-bindgen-test (`.cargo/config.toml`).
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    const T0: u64 = 1_800_000_000_000;

    fn take(per_minute: u32, burst: u32) -> TakeRequest {
        TakeRequest {
            limit: Limit { per_minute, burst },
        }
    }

    #[test]
    fn a_requester_seen_first_gets_a_full_bucket() {
        let mut bucket = None;
        for _ in 0..3 {
            assert_eq!(take(60, 3).apply(&mut bucket, T0), TakeVerdict::Allowed);
        }
        assert_eq!(
            take(60, 3).apply(&mut bucket, T0 + 250),
            TakeVerdict::Limited {
                retry_after_ms: 750
            }
        );
    }

    #[test]
    fn messages_travel_as_tagged_json() {
        assert_eq!(
            serde_json::to_string(&take(120, 10)).expect("serialises"),
            r#"{"limit":{"per_minute":120,"burst":10}}"#
        );
        for verdict in [
            TakeVerdict::Allowed,
            TakeVerdict::Limited {
                retry_after_ms: 1500,
            },
        ] {
            let json = serde_json::to_string(&verdict).expect("serialises");
            assert_eq!(
                serde_json::from_str::<TakeVerdict>(&json).expect("parses"),
                verdict
            );
        }
        assert_eq!(
            serde_json::from_str::<TakeVerdict>(r#"{"retry_after_ms":5,"verdict":"limited"}"#)
                .expect("parses"),
            TakeVerdict::Limited { retry_after_ms: 5 }
        );
        assert_eq!(
            serde_json::from_str::<TakeVerdict>(r#"{"outcome":"limited","retry_after_ms":5}"#)
                .expect("a limiter of the previous version"),
            TakeVerdict::Limited { retry_after_ms: 5 }
        );
        for broken in [r#"{"verdict":"limited"}"#, r#"{"verdict":"maybe"}"#, "{}"] {
            assert!(
                serde_json::from_str::<TakeVerdict>(broken).is_err(),
                "{broken}"
            );
        }
    }

    #[test]
    fn over_the_limit_is_a_429_problem_with_retry_after_in_whole_seconds() {
        assert_eq!(TakeVerdict::Allowed.edge_reply(), None);
        let reply = TakeVerdict::Limited {
            retry_after_ms: 1200,
        }
        .edge_reply()
        .expect("replied here");
        assert_eq!(reply.status, 429);
        assert_eq!(reply.header("retry-after"), Some("2"));
        assert_eq!(
            reply.header("content-type"),
            Some("application/problem+json")
        );
        let body: serde_json::Value = serde_json::from_slice(&reply.body).expect("json");
        assert_eq!(body["type"], "/problems/rate-limited");
        assert_eq!(body["status"], 429);
    }
}
