//! The backend answer an object keeps and replays: status, body and the headers that matter.

use serde::{Deserialize, Serialize};

/// A final answer of the backend, as replayed at the edge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedAnswer {
    /// The status code: 2xx or 402.
    pub status: u16,
    /// The `Content-Type` header, if the backend sent one.
    pub content_type: Option<String>,
    /// The `Location` header (a created payment), if the backend sent one.
    pub location: Option<String>,
    /// The body. The backend answers JSON, so it is text; a body that is not UTF-8 is not kept.
    pub body: String,
}

impl SavedAnswer {
    /// Whether an answer with this status is final: a success, or a bank decline (402). Every
    /// other answer (409 in progress, 503 outcome pending, 5xx, a 4xx refusal) may change on
    /// retry, so it is never kept at the edge.
    pub fn is_final_status(status: u16) -> bool {
        (200..300).contains(&status) || status == 402
    }

    /// The answer to keep for a backend response, or `None` when it is not final (or its body
    /// is not text).
    pub fn keep_if_final(
        status: u16,
        content_type: Option<String>,
        location: Option<String>,
        body: &[u8],
    ) -> Option<SavedAnswer> {
        if !Self::is_final_status(status) {
            return None;
        }
        let body = String::from_utf8(body.to_vec()).ok()?;
        Some(SavedAnswer {
            status,
            content_type,
            location,
            body,
        })
    }
}

#[cfg(test)]
mod tests {
    // Under wasm32 the same tests run in Node through wasm-bindgen-test (`.cargo/config.toml`).
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    fn keep(status: u16, body: &[u8]) -> Option<SavedAnswer> {
        SavedAnswer::keep_if_final(
            status,
            Some("application/json".to_owned()),
            Some("/v1/payments/1".to_owned()),
            body,
        )
    }

    #[test]
    fn successes_and_declines_are_kept() {
        let created = keep(201, b"{}").expect("final");
        assert_eq!(created.status, 201);
        assert_eq!(created.location.as_deref(), Some("/v1/payments/1"));
        assert_eq!(created.body, "{}");
        assert!(keep(402, b"{}").is_some());
        assert!(keep(200, b"{}").is_some());
    }

    #[test]
    fn answers_that_may_change_on_retry_are_not_kept() {
        for status in [400, 401, 404, 409, 413, 422, 500, 502, 503, 504] {
            assert_eq!(keep(status, b"{}"), None, "{status}");
        }
    }

    #[test]
    fn a_body_that_is_not_text_is_not_kept() {
        assert_eq!(keep(201, &[0xff, 0xfe]), None);
    }
}
