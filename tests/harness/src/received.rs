//! [`Received`]: what a test client received, read whole (status, headers, body), with the assertions the contract
//! needs: a JSON body, a problem of a given type, a replay.

use serde_json::Value;

/// A response, read whole.
#[derive(Debug, Clone)]
pub struct Received {
    /// Status code.
    pub status: u16,
    /// Headers.
    pub headers: reqwest::header::HeaderMap,
    /// Raw body.
    pub bytes: Vec<u8>,
}

impl Received {
    /// Reads a response whole.
    pub async fn from(response: reqwest::Response) -> Received {
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let bytes = response.bytes().await.expect("the body arrives").to_vec();
        Received {
            status,
            headers,
            bytes,
        }
    }

    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.bytes).unwrap_or_else(|error| {
            panic!(
                "the body is not JSON ({error}): {}",
                String::from_utf8_lossy(&self.bytes)
            )
        })
    }

    /// A header as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Whether the reply is a replay (`Idempotent-Replayed: true`).
    pub fn is_replay(&self) -> bool {
        self.header("idempotent-replayed") == Some("true")
    }

    /// The `type` of a problem+json body.
    pub fn problem_type(&self) -> String {
        self.json()["type"]
            .as_str()
            .unwrap_or_else(|| panic!("not a problem: {}", String::from_utf8_lossy(&self.bytes)))
            .to_owned()
    }

    /// Asserts a problem+json of the given type slug and status, and returns the body.
    pub fn assert_problem(&self, status: u16, slug: &str) -> Value {
        assert_eq!(
            self.status,
            status,
            "status; body: {}",
            String::from_utf8_lossy(&self.bytes)
        );
        assert_eq!(
            self.header("content-type"),
            Some("application/problem+json")
        );
        let body = self.json();
        assert_eq!(body["type"], format!("/problems/{slug}"), "{body}");
        assert_eq!(body["status"], status);
        body
    }
}
