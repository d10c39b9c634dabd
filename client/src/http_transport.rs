//! [`HttpTransport`]: the client's requests over HTTP with `reqwest`, as SPEC §7 describes
//! them: the bearer token, the key in the draft's quoted form, the frozen body bytes, and
//! `Prefer: wait=N` when the loop asks for a wait (read back from `Preference-Applied`).
//!
//! Every request also names the client (`User-Agent: payments-client/<version>`) and carries a
//! W3C `traceparent`: the run's trace id and a new span id of its own, written by
//! [`shared::trace_context`] as the edge and the backend read it.

use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, HeaderMap, RETRY_AFTER, USER_AGENT};
use serde_json::Value;
use shared::IdempotencyKey;
use shared::prefer::{PREFER_HEADER, PREFERENCE_APPLIED_HEADER, wait_in, wait_value};
use shared::retry::PendingAction;
use shared::retry::parse_retry_after;
use shared::trace_context::{FreshIds, IncomingTrace, TRACEPARENT_HEADER, TraceContext, TraceId};

use crate::transport::{Reply, SendError, Transport};

/// The request header that carries the key (the policy's `header`).
pub const KEY_HEADER: &str = "Idempotency-Key";

/// The header that marks a replayed reply.
const REPLAYED_HEADER: &str = "idempotent-replayed";

/// How every request names the client: this crate and its version, and a comment that tells it
/// from the TypeScript package of the same name.
const CLIENT_USER_AGENT: &str = concat!(
    env!("CARGO_PKG_NAME"),
    "/",
    env!("CARGO_PKG_VERSION"),
    " (Rust)"
);

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
    /// own, as the client loop gives up on its own clock. Its own default `User-Agent` or
    /// `traceparent`, if it was built with one, is replaced on every request.
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
        trace: TraceId,
    ) -> Result<Reply, SendError> {
        let request = self
            .http
            .post(format!("{}{}", self.base_url, action.path()))
            .bearer_auth(&self.token)
            .header(KEY_HEADER, action.key().to_header_value())
            .header(CONTENT_TYPE, "application/json")
            .body(action.body().to_vec());
        Self::read(identified(with_wait(request, prefer_wait), trace)).await
    }

    async fn look_up(
        &self,
        key: &IdempotencyKey,
        prefer_wait: Option<Duration>,
        trace: TraceId,
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
        Self::read(identified(with_wait(request, prefer_wait), trace)).await
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

/// `request` naming the client and going out as a new span in `trace`.
fn identified(request: reqwest::RequestBuilder, trace: TraceId) -> reqwest::RequestBuilder {
    request
        .header(USER_AGENT, CLIENT_USER_AGENT)
        .header(TRACEPARENT_HEADER, new_span_in(trace))
}

/// The `traceparent` of a new span in `trace`: version `00`, the trace id, a fresh span id,
/// flags `01` (sampled); lower-case hex, neither id all zeros, as the shared module writes it.
fn new_span_in(trace: TraceId) -> String {
    let ids = FreshIds {
        trace_id: trace.to_bytes(),
        span_id: fresh_span_id(),
    };
    TraceContext::start(IncomingTrace::default(), ids).traceparent()
}

/// Eight random bytes: the two halves of a freshly minted trace id folded together. A minted id
/// is a version 4 UUID, whose few fixed bits each meet a random bit of the other half, so all
/// 64 bits come out random; this crate draws its randomness through `shared` alone.
fn fresh_span_id() -> [u8; 8] {
    let bytes = TraceId::mint().to_bytes();
    std::array::from_fn(|index| bytes[index] ^ bytes[index + 8])
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
    use shared::Operation;
    use shared::retry::ClientRules;
    use shared::trace_context::trace_id_of;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};
    use tokio::task::JoinHandle;

    use super::*;
    use crate::action_store::MemoryStore;
    use crate::payments_client::PaymentsClient;
    use crate::test_support::{FixedJitter, pay_action, pay_body, user};

    /// A server on a free port that replies to the request on each new connection with the
    /// next of `responses`, and returns every request's head (lower-cased).
    async fn reply_in_turn(
        responses: &'static [&'static str],
    ) -> (String, JoinHandle<Vec<String>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let served = tokio::spawn(async move {
            let mut heads = Vec::new();
            for response in responses {
                let (mut socket, _) = listener.accept().await.expect("accepts");
                heads.push(read_head(&mut socket).await);
                socket.write_all(response.as_bytes()).await.expect("writes");
            }
            heads
        });
        (url, served)
    }

    /// A request's head (lower-cased), read up to its blank line and its body by
    /// `Content-Length`.
    async fn read_head(socket: &mut TcpStream) -> String {
        let mut request = Vec::new();
        let mut buffer = [0; 4096];
        loop {
            let read = socket.read(&mut buffer).await.expect("reads");
            request.extend_from_slice(&buffer[..read]);
            let text = String::from_utf8_lossy(&request).to_lowercase();
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let length = head
                    .lines()
                    .find_map(|line| line.strip_prefix("content-length: "))
                    .map_or(0, |n| n.trim().parse().expect("a length"));
                if body.len() >= length {
                    return head.to_owned();
                }
            }
            assert!(read > 0, "the request ended early");
        }
    }

    /// The trace id and span id of the one well-formed `traceparent` in `head`.
    fn trace_of(head: &str) -> (String, String) {
        let values: Vec<&str> = head
            .lines()
            .filter_map(|line| line.strip_prefix("traceparent: "))
            .collect();
        let [value] = values[..] else {
            panic!("not one traceparent: {head}");
        };
        let trace_id = trace_id_of(value).expect("well formed: lower-case hex, ids not zeros");
        let [version, trace, span, flags] = value.split('-').collect::<Vec<_>>()[..] else {
            panic!("not four fields: {value}");
        };
        assert_eq!((version, flags), ("00", "01"), "{value}");
        assert_eq!(trace, trace_id.to_string());
        assert!(span.len() == 16 && span != "0".repeat(16), "{value}");
        (trace.to_owned(), span.to_owned())
    }

    #[tokio::test]
    async fn every_attempt_names_the_client_and_is_a_new_span_in_its_actions_trace() {
        const RETRY: &str = "HTTP/1.1 503 Service Unavailable\r\nretry-after: 0\r\n\
                             content-length: 2\r\nconnection: close\r\n\r\n{}";
        const CREATED: &str =
            "HTTP/1.1 201 Created\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}";
        let (url, served) = reply_in_turn(&[RETRY, RETRY, CREATED, CREATED]).await;
        let transport = HttpTransport::new(reqwest::Client::new(), &url, "token");
        let phone = PaymentsClient::new(
            user(7),
            transport,
            MemoryStore::default(),
            ClientRules::default(),
        )
        .with_jitter(FixedJitter(0.0));
        let mut keys = Vec::new();
        for bill in ["elec-1", "elec-2"] {
            let saved = phone
                .begin(Operation::PayBill, bill, &pay_body(1))
                .await
                .expect("saved");
            let completion = phone.run(&saved, &|_| {}).await;
            assert_eq!(completion.attempts, if bill == "elec-1" { 3 } else { 1 });
            keys.push(saved.key().to_header_value());
        }

        let heads = served.await.expect("served");
        let user_agent = format!("\r\nuser-agent: {}\r\n", CLIENT_USER_AGENT.to_lowercase());
        assert!(
            heads.iter().all(|head| head.contains(&user_agent)),
            "{heads:?}"
        );
        let (traces, spans): (Vec<_>, Vec<_>) = heads.iter().map(|head| trace_of(head)).unzip();
        assert!(
            heads[..3]
                .iter()
                .all(|head| head.contains(&keys[0].to_lowercase()))
        );
        assert!(heads[3].contains(&keys[1].to_lowercase()));
        assert_eq!(
            [&traces[1], &traces[2]],
            [&traces[0]; 2],
            "every retry, one trace"
        );
        assert_ne!(traces[3], traces[0], "another action, another trace");
        let distinct_spans: std::collections::HashSet<_> = spans.iter().collect();
        assert_eq!(
            distinct_spans.len(),
            4,
            "a new span each attempt: {spans:?}"
        );
    }

    #[tokio::test]
    async fn a_look_up_names_the_client_and_carries_the_trace_it_is_given() {
        let (url, served) = reply_in_turn(&[
            "HTTP/1.1 404 Not Found\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}",
        ])
        .await;
        let transport = HttpTransport::new(reqwest::Client::new(), &url, "token");
        let trace = TraceId::mint();
        transport
            .look_up(&IdempotencyKey::mint(), None, trace)
            .await
            .expect("replied");
        let head = &served.await.expect("served")[0];
        let user_agent = CLIENT_USER_AGENT.to_lowercase();
        assert!(head.contains(&format!("\r\nuser-agent: {user_agent}\r\n")));
        assert_eq!(trace_of(head).0, trace.to_string());
    }

    #[tokio::test]
    async fn a_wait_goes_out_as_prefer_and_comes_back_from_preference_applied() {
        let (url, served) =
            reply_in_turn(&["HTTP/1.1 201 Created\r\nidempotent-replayed: true\r\n\
             preference-applied: wait=10\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}"])
            .await;
        let transport = HttpTransport::new(reqwest::Client::new(), &url, "token");
        let reply = transport
            .send(
                &pay_action(1),
                Some(Duration::from_secs(10)),
                TraceId::mint(),
            )
            .await
            .expect("replied");
        assert!(served.await.expect("served")[0].contains("\r\nprefer: wait=10"));
        assert_eq!(
            (reply.status, reply.replayed, reply.wait_applied),
            (201, true, Some(Duration::from_secs(10)))
        );
    }

    #[tokio::test]
    async fn without_a_wait_no_prefer_header_is_sent() {
        let (url, served) = reply_in_turn(&[
            "HTTP/1.1 409 Conflict\r\nretry-after: 1\r\ncontent-length: 2\r\n\
             connection: close\r\n\r\n{}",
        ])
        .await;
        let transport = HttpTransport::new(reqwest::Client::new(), &url, "token");
        let reply = transport
            .look_up(&IdempotencyKey::mint(), None, TraceId::mint())
            .await
            .expect("replied");
        assert!(!served.await.expect("served")[0].contains("prefer:"));
        assert_eq!(
            (reply.status, reply.retry_after, reply.wait_applied),
            (409, Some(Duration::from_secs(1)), None)
        );
    }
}
