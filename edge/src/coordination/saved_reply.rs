//! The reply to an attempt as an object holds it: status, body and the headers that matter.
//! A final one is kept and replayed until its key's expiry, as the backend's
//! `Idempotency-Expires` says it (never longer); any reply is handed to the attempts waiting
//! for it.

use serde::{Deserialize, Serialize};
use shared::expiry::parse_http_date;

/// A reply to a forwarded attempt: the backend's, or the edge's own problem when the forward
/// failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedReply {
    /// The status code.
    pub status: u16,
    /// The `Content-Type` header, if the backend sent one.
    pub content_type: Option<String>,
    /// The `Location` header (a created payment), if the backend sent one.
    pub location: Option<String>,
    /// The `Retry-After` header of a reply that is not final, if it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<String>,
    /// The `Idempotency-Expires` header: when the reply's key expires, as the backend wrote it
    /// on the key's row at the claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<String>,
    /// The body. The backend replies JSON, so it is text; a body that is not UTF-8 is not kept.
    pub body: String,
}

impl SavedReply {
    /// Whether a reply with this status is final: a success, or a bank decline (402). Every
    /// other reply (409 in progress, 503 outcome pending, 5xx, a 4xx refusal) may change on
    /// retry, so it is never kept at the edge.
    pub fn is_final_status(status: u16) -> bool {
        (200..300).contains(&status) || status == 402
    }

    /// Whether this reply is final (see [`SavedReply::is_final_status`]).
    pub fn is_final(&self) -> bool {
        Self::is_final_status(self.status)
    }

    /// The reply of a response with a text body, or `None` when its body is not text; `header`
    /// gives the response's header of a (lower-case) name. The `Retry-After` of a final reply
    /// is not kept: a final reply is never retried.
    pub fn of_response(
        status: u16,
        header: impl Fn(&str) -> Option<String>,
        body: &[u8],
    ) -> Option<SavedReply> {
        let body = String::from_utf8(body.to_vec()).ok()?;
        let retry_after = header("retry-after").filter(|_| !Self::is_final_status(status));
        Some(SavedReply {
            status,
            content_type: header("content-type"),
            location: header("location"),
            retry_after,
            expires: header(shared::expiry::EXPIRES_HEADER),
            body,
        })
    }

    /// When the reply's key expires (Unix milliseconds), if the backend said so in a header
    /// this edge can read; a reply without it is never kept.
    pub fn key_expires_at_ms(&self) -> Option<u64> {
        let at = parse_http_date(self.expires.as_deref()?)?;
        u64::try_from(at.unix_timestamp()).ok()?.checked_mul(1000)
    }
}

#[cfg(test)]
mod tests {
    // Under wasm32 the same tests run in Node through wasm-bindgen-test (`.cargo/config.toml`).
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    fn reply(status: u16, body: &[u8]) -> Option<SavedReply> {
        let header = |name: &str| match name {
            "content-type" => Some("application/json".to_owned()),
            "location" => Some("/v1/payments/1".to_owned()),
            "retry-after" => Some("5".to_owned()),
            "idempotency-expires" => Some("Thu, 03 Dec 2026 10:00:00 GMT".to_owned()),
            _ => None,
        };
        SavedReply::of_response(status, header, body)
    }

    #[test]
    fn successes_and_declines_are_final_and_keep_no_retry_after() {
        let created = reply(201, b"{}").expect("text");
        assert!(created.is_final());
        assert_eq!(created.location.as_deref(), Some("/v1/payments/1"));
        assert_eq!(created.retry_after, None);
        assert_eq!(created.body, "{}");
        assert_eq!(created.key_expires_at_ms(), Some(1_796_292_000_000));
        assert!(reply(402, b"{}").expect("text").is_final());
        assert!(reply(200, b"{}").expect("text").is_final());
    }

    #[test]
    fn replies_that_may_change_on_retry_are_not_final_and_keep_retry_after() {
        for status in [400, 401, 404, 409, 413, 422, 500, 502, 503, 504] {
            let reply = reply(status, b"{}").expect("text");
            assert!(!reply.is_final(), "{status}");
            assert_eq!(reply.retry_after.as_deref(), Some("5"), "{status}");
        }
    }

    #[test]
    fn a_body_that_is_not_text_is_not_kept() {
        assert_eq!(reply(201, &[0xff, 0xfe]), None);
    }

    #[test]
    fn records_written_before_retry_after_existed_still_read() {
        let old = r#"{"status":201,"content_type":null,"location":null,"body":"{}"}"#;
        let reply: SavedReply = serde_json::from_str(old).expect("parses");
        assert_eq!(reply.retry_after, None);
        assert_eq!(reply.key_expires_at_ms(), None, "and is never kept");
    }

    #[test]
    fn an_expiry_the_edge_cannot_read_is_none() {
        for expires in [
            "",
            "tomorrow",
            "1796292000",
            "Thu, 03 Dec 2026 10:00:00 UTC",
        ] {
            let reply = SavedReply {
                expires: Some(expires.to_owned()),
                ..reply(201, b"{}").expect("text")
            };
            assert_eq!(reply.key_expires_at_ms(), None, "{expires:?}");
        }
    }
}
