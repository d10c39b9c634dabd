//! [`HttpTransport`]: the client's requests over HTTP with `reqwest`, as SPEC §7 describes
//! them: the bearer token, the key in the draft's quoted form, the frozen body bytes, and
//! `Prefer: wait=N` when the loop asks for a wait (read back from `Preference-Applied`).

use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, HeaderMap, RETRY_AFTER};
use serde_json::Value;
use shared::IdempotencyKey;
use shared::prefer::{PREFER_HEADER, PREFERENCE_APPLIED_HEADER, wait_in, wait_value};
use shared::retry::PendingAction;
use shared::retry::parse_retry_after;

use crate::transport::{Reply, SendError, Transport};

/// The request header that carries the key (the policy's `header`).
pub const KEY_HEADER: &str = "Idempotency-Key";

/// The header that marks a replayed reply.
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
        let wait_applied = wait_in(
            response
                .headers()
                .get_all(PREFERENCE_APPLIED_HEADER)
                .iter()
                .map(|value| value.as_bytes()),
        );
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
            wait_applied,
            body,
        })
    }
}

impl Transport for HttpTransport {
    async fn send(
        &self,
        action: &PendingAction,
        prefer_wait: Option<Duration>,
    ) -> Result<Reply, SendError> {
        let request = self
            .http
            .post(format!("{}{}", self.base_url, action.path()))
            .bearer_auth(&self.token)
            .header(KEY_HEADER, action.key().to_header_value())
            .header(CONTENT_TYPE, "application/json")
            .body(action.body().to_vec());
        Self::read(with_wait(request, prefer_wait)).await
    }

    async fn look_up(
        &self,
        key: &IdempotencyKey,
        prefer_wait: Option<Duration>,
    ) -> Result<Reply, SendError> {
        let base = format!("{}/v1/idempotency-keys/", self.base_url);
        let mut url = reqwest::Url::parse(&base)
            .map_err(|error| SendError(format!("bad API URL {base}: {error}")))?;
        // As one path segment, percent-encoded: a key in the `any` format may hold any character.
        url.path_segments_mut()
            .map_err(|()| SendError(format!("the API URL {base} cannot take a path")))?
            .pop_if_empty()
            .push(&key.to_string());
        let request = self.http.get(url).bearer_auth(&self.token);
        Self::read(with_wait(request, prefer_wait)).await
    }
}

/// `request` with `Prefer: wait=N` (whole seconds) when a wait is asked for.
fn with_wait(
    request: reqwest::RequestBuilder,
    prefer_wait: Option<Duration>,
) -> reqwest::RequestBuilder {
    match prefer_wait {
        Some(wait) => request.header(PREFER_HEADER, wait_value(wait)),
        None => request,
    }
}

/// `Retry-After`, read by the shared rules ([`parse_retry_after`]: delta-seconds only).
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    parse_retry_after(headers.get(RETRY_AFTER)?.to_str().ok()?)
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

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;
    use tokio::task::JoinHandle;

    use super::*;
    use crate::test_support::pay_action;

    /// A server on a free port that replies to one request with `response` and returns the
    /// request's head (lower-cased), read up to its blank line and its body by `Content-Length`.
    async fn reply_once(response: &'static str) -> (String, JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let served = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.expect("accepts");
            let mut request = Vec::new();
            let mut buffer = [0; 4096];
            let head = loop {
                let read = socket.read(&mut buffer).await.expect("reads");
                request.extend_from_slice(&buffer[..read]);
                let text = String::from_utf8_lossy(&request).to_lowercase();
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let length = head
                        .lines()
                        .find_map(|line| line.strip_prefix("content-length: "))
                        .map_or(0, |n| n.trim().parse().expect("a length"));
                    if body.len() >= length {
                        break head.to_owned();
                    }
                }
                assert!(read > 0, "the request ended early");
            };
            socket.write_all(response.as_bytes()).await.expect("writes");
            head
        });
        (url, served)
    }

    #[tokio::test]
    async fn a_wait_goes_out_as_prefer_and_comes_back_from_preference_applied() {
        let (url, served) = reply_once(
            "HTTP/1.1 201 Created\r\nidempotent-replayed: true\r\n\
             preference-applied: wait=10\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}",
        )
        .await;
        let transport = HttpTransport::new(reqwest::Client::new(), &url, "token");
        let reply = transport
            .send(&pay_action(1), Some(Duration::from_secs(10)))
            .await
            .expect("replied");
        assert!(
            served
                .await
                .expect("served")
                .contains("\r\nprefer: wait=10")
        );
        assert_eq!(
            (reply.status, reply.replayed, reply.wait_applied),
            (201, true, Some(Duration::from_secs(10)))
        );
    }

    #[tokio::test]
    async fn without_a_wait_no_prefer_header_is_sent() {
        let (url, served) = reply_once(
            "HTTP/1.1 409 Conflict\r\nretry-after: 1\r\ncontent-length: 2\r\n\
             connection: close\r\n\r\n{}",
        )
        .await;
        let transport = HttpTransport::new(reqwest::Client::new(), &url, "token");
        let reply = transport
            .look_up(&IdempotencyKey::mint(), None)
            .await
            .expect("replied");
        assert!(!served.await.expect("served").contains("prefer:"));
        assert_eq!(
            (reply.status, reply.retry_after, reply.wait_applied),
            (409, Some(Duration::from_secs(1)), None)
        );
    }
}
