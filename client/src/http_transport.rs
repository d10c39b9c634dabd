//! [`HttpTransport`]: the client's requests over HTTP with `reqwest`, as SPEC §7 describes
//! them: the bearer token, the key in the draft's quoted form, the frozen body bytes.

use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, HeaderMap, RETRY_AFTER};
use serde_json::Value;
use shared::IdempotencyKey;
use shared::client::PendingAction;

use crate::transport::{Reply, SendError, Transport};

/// The request header that carries the key (the policy's `header`).
pub const KEY_HEADER: &str = "Idempotency-Key";

/// The header that marks a replayed answer.
const REPLAYED_HEADER: &str = "idempotent-replayed";

/// Talks to the payments API at one base URL (the edge, or the backend directly) as one user.
#[derive(Debug, Clone)]
pub struct HttpTransport {
    http: reqwest::Client,
    base_url: String,
    token: String,
}

impl HttpTransport {
    /// A transport to `base_url` (e.g. `http://127.0.0.1:8787`) sending `token` as the bearer.
    /// `http` is shared between transports for its connection pool; it needs no timeout of its
    /// own, as the client loop gives up on its own clock.
    pub fn new(http: reqwest::Client, base_url: &str, token: &str) -> HttpTransport {
        HttpTransport {
            http,
            base_url: base_url.trim_end_matches('/').to_owned(),
            token: token.to_owned(),
        }
    }

    async fn read(request: reqwest::RequestBuilder) -> Result<Reply, SendError> {
        let response = request.send().await.map_err(describe)?;
        let status = response.status().as_u16();
        let retry_after = retry_after(response.headers());
        let replayed = response
            .headers()
            .get(REPLAYED_HEADER)
            .is_some_and(|value| value.as_bytes() == b"true");
        let bytes = response.bytes().await.map_err(describe)?;
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
        };
        Ok(Reply {
            status,
            retry_after,
            replayed,
            body,
        })
    }
}

impl Transport for HttpTransport {
    async fn send(&self, action: &PendingAction) -> Result<Reply, SendError> {
        let request = self
            .http
            .post(format!("{}{}", self.base_url, action.path()))
            .bearer_auth(&self.token)
            .header(KEY_HEADER, action.key().to_header_value())
            .header(CONTENT_TYPE, "application/json")
            .body(action.body().to_vec());
        Self::read(request).await
    }

    async fn look_up(&self, key: &IdempotencyKey) -> Result<Reply, SendError> {
        let base = format!("{}/v1/idempotency-keys/", self.base_url);
        let mut url = reqwest::Url::parse(&base)
            .map_err(|error| SendError(format!("bad API URL {base}: {error}")))?;
        // As one path segment, percent-encoded: a key in the `any` format may hold any character.
        url.path_segments_mut()
            .map_err(|()| SendError(format!("the API URL {base} cannot take a path")))?
            .pop_if_empty()
            .push(&key.to_string());
        Self::read(self.http.get(url).bearer_auth(&self.token)).await
    }
}

/// `Retry-After` in delta-seconds; the HTTP-date form is not used by this API and is ignored.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let seconds = headers
        .get(RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(seconds))
}

/// The error with its causes ("error sending request" alone says little).
fn describe(error: reqwest::Error) -> SendError {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    SendError(text)
}
