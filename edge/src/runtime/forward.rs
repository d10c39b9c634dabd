//! Sending a request on to the backend, bounded by the forward timeout: a request that passes
//! through gets the backend's response as is; a guarded request sends the body the gate already
//! read and gets the whole reply back, so the reply can be kept. Where the backend asks for
//! the edge's proof (`EDGE_PROOF_SECRET`), every forward carries one, signed over its method,
//! path, token, key, body and time (`shared::edge_proof`); a request that passes through then
//! has its body read first, since the proof covers it, and otherwise streams it. Every forward
//! carries the edge's `traceparent` (and the client's `tracestate` with a joined trace),
//! replacing the client's, so the backend's span is a child of the edge's.

use std::future::Future;
use std::pin::pin;
use std::time::Duration;

use futures_util::future::{Either, select};
use worker::js_sys::Uint8Array;
use worker::wasm_bindgen::JsValue;
use worker::{
    AbortController, AbortSignal, Delay, Fetch, Headers, Method, Request, RequestRedirect,
    Response, console_log, console_warn,
};

use shared::edge_proof::{self, PROOF_HEADER, ProvedRequest};

use super::clock::now_unix;
use super::outgoing::Outgoing;
use crate::config::{EdgeConfig, compiled_policy};
use crate::coordination::SavedReply;
use crate::forward_rules::{
    ForwardFailure, REQUEST_ID_HEADER, is_forwarded_header, is_not_the_backends_reply,
    path_and_query,
};
use crate::trace::{TRACEPARENT_HEADER, TRACESTATE_HEADER, TraceContext};

/// The backend's whole reply to a guarded request.
#[derive(Debug)]
pub struct BackendReply {
    status: u16,
    headers: Headers,
    body: Vec<u8>,
}

impl BackendReply {
    /// The reply as the key's object keeps it (if final) and hands it to waiting attempts;
    /// `None` if its body is not text.
    pub fn saved_reply(&self) -> Option<SavedReply> {
        let header = |name: &str| self.headers.get(name).ok().flatten();
        SavedReply::of_response(self.status, header, &self.body)
    }

    /// The reply as the client's response: the backend's status, headers and body.
    pub fn into_response(self) -> Response {
        Response::builder()
            .with_status(self.status)
            .with_headers(self.headers)
            .fixed(self.body)
    }
}

/// Forwards a request that passes through the edge, with `body` as read (`None`: its body
/// streamed, where no proof is made).
pub async fn forward_unchanged(
    request: &Request,
    body: Option<&[u8]>,
    config: &EdgeConfig,
    request_id: &str,
    trace: &TraceContext,
) -> Result<Response, ForwardFailure> {
    let outgoing = backend_request(request, config, request_id, trace, body)?;
    let response = within(config.backend_timeout(), |signal| async move {
        Fetch::Request(outgoing).send_with_signal(&signal).await
    })
    .await?;
    the_backends(response.status_code(), response.headers())?;
    Ok(response)
}

/// `Ok` if a reply with this status and these headers is the backend's own, else the failure
/// of a proxy that replied in its place ([`is_not_the_backends_reply`]).
fn the_backends(status: u16, headers: &Headers) -> Result<(), ForwardFailure> {
    let content_type = headers.get("content-type").ok().flatten();
    if is_not_the_backends_reply(status, content_type.as_deref()) {
        console_warn!("a {status} from a proxy in the backend's place");
        return Err(ForwardFailure::ProxyReplied { status });
    }
    Ok(())
}

/// Forwards a guarded request with the body already read, and reads the whole reply.
pub async fn forward_buffered(
    request: &Request,
    body: &[u8],
    config: &EdgeConfig,
    request_id: &str,
    trace: &TraceContext,
) -> Result<BackendReply, ForwardFailure> {
    let outgoing = backend_request(request, config, request_id, trace, Some(body))?;
    let reply = within(config.backend_timeout(), |signal| async move {
        let mut response = Fetch::Request(outgoing).send_with_signal(&signal).await?;
        let body = response.bytes().await?;
        Ok(BackendReply {
            status: response.status_code(),
            headers: response.headers().clone(),
            body,
        })
    })
    .await?;
    the_backends(reply.status, &reply.headers)?;
    Ok(reply)
}

/// The request to the backend: the client's method, path, query, headers and body (`body` as
/// read, or the incoming body streamed), plus the request id, the edge's trace headers and,
/// where configured, the edge's proof (its nonce the request id), with redirects handed back to
/// the client rather than followed. A `GET` or `HEAD` goes without its body: `fetch` cannot send one, and the backend replies to such a request as if
/// it had none (a read ignores a body; a route without that method is 405 either way). A method
/// `fetch` cannot send at all (`CONNECT`, `TRACE`, `TRACK`) is the client's doing:
/// [`ForwardFailure::MethodNotForwardable`], never "backend unreachable".
fn backend_request(
    incoming: &Request,
    config: &EdgeConfig,
    request_id: &str,
    trace: &TraceContext,
    body: Option<&[u8]>,
) -> Result<Request, ForwardFailure> {
    let sends_body = !matches!(incoming.method(), Method::Get | Method::Head);
    let sent: &[u8] = if sends_body {
        body.unwrap_or_default()
    } else {
        &[]
    };
    let body = match (sends_body, body) {
        (false, _) => None,
        (true, Some(bytes)) => Some(JsValue::from(Uint8Array::from(bytes))),
        (true, None) => incoming.inner().body().map(JsValue::from),
    };
    let build = || -> worker::Result<Request> {
        let headers = Headers::new();
        for (name, value) in incoming.headers().entries() {
            if is_forwarded_header(&name) {
                headers.append(&name, &value)?;
            }
        }
        headers.set(REQUEST_ID_HEADER, request_id)?;
        headers.set(TRACEPARENT_HEADER, &trace.traceparent())?;
        if let Some(tracestate) = trace.tracestate() {
            headers.set(TRACESTATE_HEADER, tracestate)?;
        }
        let path_and_query = path_and_query(&incoming.inner().url()).to_owned();
        if let Some(secret) = config.proof_secret() {
            let method = incoming.method().to_string();
            let authorization = incoming.headers().get("authorization")?;
            let idempotency_key = incoming.headers().get(&compiled_policy().header)?;
            let proved = ProvedRequest {
                method: &method,
                path_and_query: &path_and_query,
                authorization: authorization.as_deref().map(str::as_bytes),
                idempotency_key: idempotency_key.as_deref().map(str::as_bytes),
                body: sent,
            };
            headers.set(
                PROOF_HEADER,
                &edge_proof::sign(secret, proved, now_unix(), request_id),
            )?;
        }
        let url = config.backend_url_for(&path_and_query);
        let outgoing = Outgoing {
            method: incoming.method(),
            headers: Some(headers),
            body,
            redirect: RequestRedirect::Manual,
        };
        outgoing.to(&url)
    };
    build().map_err(|error| {
        console_log!(
            "not forwarded: {} {} cannot be sent on ({error})",
            incoming.method(),
            incoming.path()
        );
        ForwardFailure::MethodNotForwardable
    })
}

/// Runs `work` with an abort signal; past `timeout` it is aborted and the forward timed out.
async fn within<T, F>(
    timeout: Duration,
    work: impl FnOnce(AbortSignal) -> F,
) -> Result<T, ForwardFailure>
where
    F: Future<Output = worker::Result<T>>,
{
    let controller = AbortController::default();
    let work = pin!(work(controller.signal()));
    let deadline = pin!(Delay::from(timeout));
    match select(work, deadline).await {
        Either::Left((Ok(value), _)) => Ok(value),
        Either::Left((Err(error), _)) => {
            console_warn!("backend unreachable: {error}");
            Err(ForwardFailure::Unreachable)
        }
        Either::Right(((), _)) => {
            controller.abort();
            Err(ForwardFailure::TimedOut)
        }
    }
}

#[cfg(all(test, target_arch = "wasm32"))]
mod tests {
    use wasm_bindgen_test::wasm_bindgen_test;
    use worker::{Method, RequestInit};

    use super::*;
    use crate::trace::{FreshIds, IncomingTrace};

    fn config() -> EdgeConfig {
        EdgeConfig::from_settings(|name| match name {
            "BACKEND_URL" => Some("http://127.0.0.1:9/".to_owned()),
            "AUTH_JWT_SECRET" => Some("a-secret-that-is-at-least-32-bytes-long".to_owned()),
            "BACKEND_TIMEOUT_MS" => Some("200".to_owned()),
            _ => None,
        })
        .expect("valid settings")
    }

    const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
    const CLIENT_SPAN: &str = "00f067aa0ba902b7";

    /// The edge's context for [`incoming`]'s trace headers, with its span `0c0c…`.
    fn trace() -> TraceContext {
        let traceparent = format!("00-{TRACE}-{CLIENT_SPAN}-01");
        let incoming = IncomingTrace {
            traceparent: Some(&traceparent),
            tracestate: Some("vendor=opaque"),
        };
        let fresh = FreshIds {
            trace_id: [0xab; 16],
            span_id: [0x0c; 8],
        };
        TraceContext::start(incoming, fresh)
    }

    fn incoming() -> Request {
        let headers = Headers::new();
        headers.set("authorization", "Bearer t").expect("header");
        headers.set("idempotency-key", "\"k\"").expect("header");
        headers.set("host", "edge.test").expect("header");
        headers
            .set(TRACEPARENT_HEADER, &format!("00-{TRACE}-{CLIENT_SPAN}-01"))
            .expect("header");
        headers
            .set(TRACESTATE_HEADER, "vendor=opaque")
            .expect("header");
        let mut init = RequestInit::new();
        init.with_method(Method::Post)
            .with_headers(headers)
            .with_body(Some(JsValue::from_str("{}")));
        Request::new_with_init("http://edge.test/v1/bills/b/pay?x=1#frag", &init).expect("request")
    }

    #[wasm_bindgen_test]
    async fn the_backend_request_keeps_method_path_headers_and_body_and_adds_a_request_id() {
        let body = b"{\"a\":1}";
        let mut outgoing = backend_request(&incoming(), &config(), "req-1", &trace(), Some(body))
            .expect("request");
        assert_eq!(
            outgoing.inner().url(),
            "http://127.0.0.1:9/v1/bills/b/pay?x=1"
        );
        assert_eq!(outgoing.method(), Method::Post);
        let headers = outgoing.headers();
        assert_eq!(
            headers.get("authorization").expect("h"),
            Some("Bearer t".to_owned())
        );
        assert_eq!(
            headers.get("idempotency-key").expect("h"),
            Some("\"k\"".to_owned())
        );
        assert_eq!(
            headers.get(REQUEST_ID_HEADER).expect("h"),
            Some("req-1".to_owned())
        );
        assert_eq!(headers.get("host").expect("h"), None);
        assert_eq!(
            headers.get(TRACEPARENT_HEADER).expect("h"),
            Some(format!("00-{TRACE}-0c0c0c0c0c0c0c0c-01"))
        );
        assert_eq!(
            headers.get(TRACESTATE_HEADER).expect("h"),
            Some("vendor=opaque".to_owned())
        );
        assert_eq!(outgoing.text().await.expect("body"), "{\"a\":1}");
    }
}
