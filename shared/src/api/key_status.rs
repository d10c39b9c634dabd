//! `GET /v1/idempotency-keys/{key}`: where one of the caller's keys stands (SPEC §6). A client
//! that has stopped retrying (its deadline passed, or it restarted) reads this instead of paying
//! again.
//!
//! On the wire it is one flat object: `state` names where the key stands, `operation` what it
//! was used for and `expires_at` (RFC 3339, UTC) when it stops being replayed; a `done` key adds
//! the saved reply's `status` and its body as `reply`, byte for byte the body a retry with the
//! key is replayed:
//!
//! ```json
//! {"state":"done","operation":"pay_bill","status":201,"reply":{...},"answer":{...},"expires_at":"2026-12-03T10:00:00Z"}
//! ```
//!
//! `answer` is the deprecated first name of `reply`: sent beside it, the same bytes, for the
//! clients already deployed, and read when a body has no `reply` (SPEC §7 says until when).
//!
//! An `unknown` key adds, when known, `next_check_at` (when the rail's rules allow the bank to be
//! asked about it next) or `settlement_due_at` (its checks ran out: when the bank's settlement
//! file is due), so an app can say "we will know by …".

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use time::OffsetDateTime;

use crate::operation::Operation;

/// Where one key stands.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(into = "KeyStatusWire", try_from = "KeyStatusWire")]
pub struct KeyStatusResponse {
    /// The operation the key was used for.
    pub operation: Operation,
    /// When the key expires: its saved reply is replayed until then, and after it the key is a
    /// new request.
    pub expires_at: OffsetDateTime,
    /// How far the key's work has come.
    pub progress: KeyProgress,
}

/// How far a key's work has come.
#[derive(Debug, Clone)]
pub enum KeyProgress {
    /// Claimed; the first attempt is still running.
    Started,
    /// The bank's reply is unknown; the bank is asked by reference, as the rail allows.
    Unknown {
        /// When the bank may be asked next, if it may be asked again.
        next_check_at: Option<OffsetDateTime>,
        /// When the bank's settlement file is due, once every check the rail allows was made.
        settlement_due_at: Option<OffsetDateTime>,
    },
    /// The bank never saw the key's claim: nothing was charged. Sending the same request with
    /// the key again claims it again (under the same bank reference).
    Released,
    /// Finished: the saved reply, exactly as a retry with the key would replay it.
    Done {
        /// The saved reply's status: 201, or 402 for a bank decline.
        status: u16,
        /// The saved reply's body, the same bytes a replay carries: the payment or refund, or
        /// the decline problem.
        reply: Box<RawValue>,
    },
}

impl KeyProgress {
    /// The `state` word of this progress.
    pub fn state(&self) -> &'static str {
        match self {
            KeyProgress::Started => "started",
            KeyProgress::Unknown { .. } => "unknown",
            KeyProgress::Released => "released",
            KeyProgress::Done { .. } => "done",
        }
    }
}

/// The flat wire form; its derived schema is the published `KeyStatus`.
#[derive(Serialize, Deserialize)]
#[cfg_attr(
    feature = "schemas",
    derive(schemars::JsonSchema),
    schemars(
        rename = "KeyStatus",
        description = "Where one of the caller's keys stands"
    )
)]
struct KeyStatusWire {
    /// Where the key stands.
    #[cfg_attr(feature = "schemas", schemars(extend("enum" = ["started", "unknown", "released", "done"])))]
    state: String,
    /// The operation the key was used for.
    operation: Operation,
    /// done only: the saved reply's status (201, or 402 for a bank decline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    status: Option<u16>,
    /// done only: the saved reply's body, byte for byte as a replay carries it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schemas",
        schemars(schema_with = "super::schemas::saved_reply")
    )]
    reply: Option<Box<RawValue>>,
    /// done only: the deprecated alias of `reply`, the same bytes; sent until the second release
    /// after the first with `reply`, and read only without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schemas", schemars(schema_with = "super::schemas::saved_reply", extend("deprecated" = true)))]
    answer: Option<Box<RawValue>>,
    /// When the key expires: replayed until then, a new request after.
    #[serde(with = "time::serde::rfc3339")]
    #[cfg_attr(feature = "schemas", schemars(with = "String", extend("format" = "date-time")))]
    expires_at: OffsetDateTime,
    /// unknown only: when the rail's rules let the bank be asked about it next.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "time::serde::rfc3339::option"
    )]
    #[cfg_attr(feature = "schemas", schemars(with = "String", extend("format" = "date-time")))]
    next_check_at: Option<OffsetDateTime>,
    /// unknown only, once every status check the rail allows was made: when the bank's
    /// settlement file is due.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "time::serde::rfc3339::option"
    )]
    #[cfg_attr(feature = "schemas", schemars(with = "String", extend("format" = "date-time")))]
    settlement_due_at: Option<OffsetDateTime>,
}

/// The published schema of a key status is its wire form's.
#[cfg(feature = "schemas")]
impl schemars::JsonSchema for KeyStatusResponse {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        KeyStatusWire::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        KeyStatusWire::json_schema(generator)
    }
}

impl From<KeyStatusResponse> for KeyStatusWire {
    fn from(response: KeyStatusResponse) -> KeyStatusWire {
        let state = response.progress.state().to_owned();
        let (mut status, mut reply, mut next_check_at, mut settlement_due_at) =
            (None, None, None, None);
        match response.progress {
            KeyProgress::Done {
                status: saved,
                reply: body,
            } => (status, reply) = (Some(saved), Some(body)),
            KeyProgress::Unknown {
                next_check_at: next,
                settlement_due_at: due,
            } => (next_check_at, settlement_due_at) = (next, due),
            KeyProgress::Started | KeyProgress::Released => {}
        }
        KeyStatusWire {
            state,
            operation: response.operation,
            status,
            answer: reply.clone(),
            reply,
            expires_at: response.expires_at,
            next_check_at,
            settlement_due_at,
        }
    }
}

impl TryFrom<KeyStatusWire> for KeyStatusResponse {
    type Error = String;

    fn try_from(wire: KeyStatusWire) -> Result<KeyStatusResponse, String> {
        let progress = match (wire.state.as_str(), wire.status, wire.reply.or(wire.answer)) {
            ("started", ..) => KeyProgress::Started,
            ("unknown", ..) => KeyProgress::Unknown {
                next_check_at: wire.next_check_at,
                settlement_due_at: wire.settlement_due_at,
            },
            ("released", ..) => KeyProgress::Released,
            ("done", Some(status), Some(reply)) => KeyProgress::Done { status, reply },
            ("done", ..) => return Err("a done key's status lacks `status` or `reply`".into()),
            (other, ..) => return Err(format!("unknown key state {other:?}")),
        };
        Ok(KeyStatusResponse {
            operation: wire.operation,
            expires_at: wire.expires_at,
            progress,
        })
    }
}

#[cfg(test)]
mod tests {
    // Under wasm32 the same tests run through wasm-bindgen-test (see `.cargo/config.toml`).
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    /// 2026-12-03T10:00:00Z.
    const DECEMBER_3RD_10_AM: i64 = 1_796_292_000;

    #[test]
    fn a_done_key_carries_the_reply_bytes_unchanged() {
        // Members out of alphabetical order, as a replay body may have them.
        let body =
            r#"{"type":"/problems/payment-declined","title":"Payment declined","status":402}"#;
        let done = KeyStatusResponse {
            operation: Operation::PayBill,
            expires_at: OffsetDateTime::from_unix_timestamp(DECEMBER_3RD_10_AM).expect("valid"),
            progress: KeyProgress::Done {
                status: 402,
                reply: RawValue::from_string(body.to_owned()).expect("json"),
            },
        };
        let json = serde_json::to_string(&done).expect("serialises");
        assert_eq!(
            json,
            format!(
                r#"{{"state":"done","operation":"pay_bill","status":402,"reply":{body},"answer":{body},"expires_at":"2026-12-03T10:00:00Z"}}"#
            )
        );
        let parsed: KeyStatusResponse = serde_json::from_str(&json).expect("parses");
        let KeyProgress::Done { status, reply } = parsed.progress else {
            panic!("done expected");
        };
        assert_eq!((status, reply.get()), (402, body));
    }

    #[test]
    fn a_body_with_only_the_deprecated_alias_still_reads() {
        let body = r#"{"payment_id":"pay-1","status":"succeeded"}"#;
        let old = format!(
            r#"{{"state":"done","operation":"pay_bill","status":201,"answer":{body},"expires_at":"2026-12-03T10:00:00Z"}}"#
        );
        let parsed: KeyStatusResponse = serde_json::from_str(&old).expect("parses");
        let KeyProgress::Done { status, reply } = parsed.progress else {
            panic!("done expected");
        };
        assert_eq!((status, reply.get()), (201, body));
        // With both, `reply` is the one read.
        let both = format!(
            r#"{{"state":"done","operation":"pay_bill","status":201,"reply":{body},"answer":{{}},"expires_at":"2026-12-03T10:00:00Z"}}"#
        );
        let parsed: KeyStatusResponse = serde_json::from_str(&both).expect("parses");
        let KeyProgress::Done { reply, .. } = parsed.progress else {
            panic!("done expected");
        };
        assert_eq!(reply.get(), body);
    }

    #[test]
    fn pending_states_have_no_reply() {
        let unknown: KeyStatusResponse = serde_json::from_str(
            r#"{"state":"unknown","operation":"refund_payment","expires_at":"2026-12-03T10:00:00Z"}"#,
        )
        .expect("parses");
        assert_eq!(unknown.operation, Operation::RefundPayment);
        assert!(matches!(
            unknown.progress,
            KeyProgress::Unknown {
                next_check_at: None,
                settlement_due_at: None
            }
        ));
        assert_eq!(
            serde_json::to_value(&unknown).expect("serialises"),
            serde_json::json!({"state": "unknown", "operation": "refund_payment",
                               "expires_at": "2026-12-03T10:00:00Z"})
        );
    }

    #[test]
    fn an_unknown_key_says_when_it_is_asked_about_next() {
        let json = r#"{"state":"unknown","operation":"pay_bill","expires_at":"2026-12-03T10:00:00Z","next_check_at":"2026-12-01T10:01:30Z"}"#;
        let unknown: KeyStatusResponse = serde_json::from_str(json).expect("parses");
        let KeyProgress::Unknown { next_check_at, .. } = unknown.progress else {
            panic!("unknown expected");
        };
        assert_eq!(
            next_check_at.map(OffsetDateTime::unix_timestamp),
            Some(DECEMBER_3RD_10_AM - 2 * 86_400 + 90)
        );
        assert_eq!(serde_json::to_string(&unknown).expect("serialises"), json);
    }

    #[test]
    fn unreadable_states_are_refused() {
        for json in [
            r#"{"state":"done","operation":"pay_bill","expires_at":"2026-12-03T10:00:00Z"}"#,
            r#"{"state":"gone","operation":"pay_bill","expires_at":"2026-12-03T10:00:00Z"}"#,
            r#"{"state":"started","operation":"pay_bill"}"#,
        ] {
            assert!(
                serde_json::from_str::<KeyStatusResponse>(json).is_err(),
                "{json}"
            );
        }
    }
}
