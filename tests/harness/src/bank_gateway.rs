//! [`BankGateway`]: a programmable HTTP gateway on 127.0.0.1 in front of the bank simulator,
//! playing the load balancer, WAF or misbehaving gateway that stands at a real bank's front
//! door, for the failures of that front door which the bank simulator itself never produces: an
//! HTML error page instead of the bank's JSON, a 503 for a call it did forward (so the money
//! moved), a redirect, a reply far larger than any the bank sends, and a reply that names
//! another reference than the call's.
//!
//! Backend tests give the backend the gateway's [`BankGateway::url`] as its bank, and switch
//! [`GatewayMode`]s while the test runs. A POST is a money-moving call (`/debits`, `/refunds`);
//! the modes that misbehave on calls let every other request (look-ups, the ledger) through
//! unchanged, so reconciliation can still ask the bank what happened. Forwarding keeps the
//! method, the path and query, the body bytes and every end-to-end header (`content-type`,
//! `traceparent`, …); a reply passed on keeps the bank's status, end-to-end headers and body.
//! The gateway waits for the bank as long as the bank takes: the caller's own deadline is the
//! one that fires. A call to a bank it cannot reach, or whose reply it cannot read, gets
//! `502 Bad Gateway` with an HTML page, as a real gateway does.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use serde_json::Value;
use tokio::sync::oneshot;

/// The largest request body the gateway reads before forwarding it (the bank's requests are a
/// few hundred bytes); a larger one, or one that cannot be read, gets 400 from the gateway
/// itself.
const MAX_REQUEST_BYTES: usize = 1024 * 1024;

/// What [`GatewayMode::NamesAnotherReference`] puts in place of the bank's references.
const ANOTHER_REFERENCE: &str = "pay-not-yours";

/// Headers that belong to one connection, not to the request or reply they travel with: never
/// forwarded, as RFC 9110 §7.6.1 says of a proxy (nor `host`, which the next hop's URL sets
/// anew; [`end_to_end`] leaves out `content-length` too).
const HOP_BY_HOP: [&str; 10] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
];

/// How the gateway treats the requests that arrive while it is set so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GatewayMode {
    /// Forwards every request and the bank's reply unchanged.
    PassThrough,
    /// Replies to every request (calls and look-ups alike) with 503 and a text/html body,
    /// forwarding nothing: the bank is down behind it.
    Unavailable,
    /// Forwards each POST (a money-moving call) to the bank in a task of its own and replies
    /// 503 (text/html body, no JSON) at once, without waiting for the bank: a gateway that
    /// resets or times out after forwarding. The forwarded call still completes at the bank.
    /// Every other request passes through.
    ///
    /// The 503 may reach the caller before the forwarded call reaches the bank, so a look-up
    /// made at once may still find the reference unknown.
    UnavailableAfterForwarding,
    /// Replies to each POST with 307 Temporary Redirect and `Location: {location}` without
    /// forwarding it; every other request passes through.
    RedirectsCalls {
        /// The `Location` of the redirect; it must be a valid header value
        /// ([`BankGateway::set_mode`] checks).
        location: String,
    },
    /// Forwards each POST, then replies with the bank's status and a JSON body that is the
    /// bank's reply object plus a `"padding"` string field making it `bytes` bytes long in all;
    /// every other request passes through.
    ///
    /// A reply that is not a JSON object passes through unchanged; one already longer than
    /// `bytes` with an empty padding gets the empty padding and stays longer.
    HugeReplies {
        /// The size of the padded body, in bytes.
        bytes: usize,
    },
    /// Forwards each POST, then replies with the bank's status and body, but with the body's
    /// `bank_reference` (and `reference`, if present) replaced by `"pay-not-yours"`; every
    /// other request passes through.
    ///
    /// A reply that is not a JSON object passes through unchanged.
    NamesAnotherReference,
}

/// The gateway, listening on 127.0.0.1 on a port of its own; it stops serving when dropped
/// (connections still busy with a call finish it; calls already forwarded complete at the bank).
#[derive(Debug)]
pub struct BankGateway {
    /// The bound address.
    address: SocketAddr,
    /// What the handler shares: the mode, the counters, the client to the bank.
    shared: Arc<Shared>,
    /// Stops the server when dropped (with the gateway).
    _stop: oneshot::Sender<()>,
}

/// The gateway's state, shared with every request's handler.
#[derive(Debug)]
struct Shared {
    /// The bank's base URL, without a trailing slash.
    bank_url: String,
    /// The client that forwards requests to the bank: no proxy, no redirects followed.
    client: reqwest::Client,
    /// The current mode, read once as each request arrives.
    mode: Mutex<GatewayMode>,
    /// POSTs forwarded to the bank, counted as they are sent.
    calls_forwarded: AtomicUsize,
    /// Requests the gateway replied to itself, without (or before) the bank's reply.
    replied_itself: AtomicUsize,
}

/// A request as the gateway forwards it.
#[derive(Debug)]
struct Forward {
    /// The request's method.
    method: Method,
    /// The request's path and query, appended to the bank's base URL.
    path_and_query: String,
    /// The request's end-to-end headers.
    headers: HeaderMap,
    /// The request's body, read whole.
    body: Bytes,
}

/// The bank's reply to a forwarded request, read whole.
#[derive(Debug)]
struct Reply {
    /// The bank's status.
    status: StatusCode,
    /// The bank's end-to-end headers.
    headers: HeaderMap,
    /// The bank's body.
    body: Bytes,
}

impl BankGateway {
    /// Starts the gateway in front of the bank at `bank_url` (e.g. `"http://127.0.0.1:PORT"`),
    /// in PassThrough mode.
    pub async fn start(bank_url: &str) -> BankGateway {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the bank gateway");
        let address = listener.local_addr().expect("a bound address");
        let client = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("build the bank gateway's HTTP client");
        let shared = Arc::new(Shared {
            bank_url: bank_url.trim_end_matches('/').to_owned(),
            client,
            mode: Mutex::new(GatewayMode::PassThrough),
            calls_forwarded: AtomicUsize::new(0),
            replied_itself: AtomicUsize::new(0),
        });
        let app = Router::new()
            .fallback(handle)
            .with_state(Arc::clone(&shared));
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            // Either a send or the sender's drop (the gateway's) means stop.
            let shutdown = async move {
                stopped.await.ok();
            };
            axum::serve(listener, app)
                .with_graceful_shutdown(shutdown)
                .await
        });
        BankGateway {
            address,
            shared,
            _stop: stop,
        }
    }

    /// The gateway's base URL (`http://127.0.0.1:PORT`), to give the backend as its bank.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Switches the mode for the requests that arrive from now on.
    ///
    /// Panics on a [`GatewayMode::RedirectsCalls`] whose `location` is not a valid header value:
    /// that is the test's mistake, not the gateway's behaviour.
    pub fn set_mode(&self, mode: GatewayMode) {
        if let GatewayMode::RedirectsCalls { location } = &mode {
            assert!(
                HeaderValue::from_str(location).is_ok(),
                "a redirect's Location must be a valid header value: {location:?}"
            );
        }
        *self
            .shared
            .mode
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = mode;
    }

    /// How many POSTs it has forwarded to the bank so far.
    pub fn calls_forwarded(&self) -> usize {
        self.shared.calls_forwarded.load(Ordering::SeqCst)
    }

    /// How many requests it has replied to itself without (or before) the bank's reply (503s,
    /// 307s, and the 502s and 400s of a bank it could not reach or a request it could not
    /// read).
    pub fn replied_itself(&self) -> usize {
        self.shared.replied_itself.load(Ordering::SeqCst)
    }
}

impl Shared {
    /// The current mode.
    fn mode(&self) -> GatewayMode {
        self.mode
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Sends `forward` to the bank and reads its reply whole.
    async fn send(&self, forward: Forward) -> Result<Reply, reqwest::Error> {
        let url = format!("{}{}", self.bank_url, forward.path_and_query);
        let mut request = self
            .client
            .request(forward.method, url)
            .headers(forward.headers);
        if !forward.body.is_empty() {
            request = request.body(forward.body);
        }
        let response = request.send().await?;
        let status = response.status();
        let headers = end_to_end(response.headers());
        let body = response.bytes().await?;
        Ok(Reply {
            status,
            headers,
            body,
        })
    }

    /// A reply of the gateway's own: `status` with an HTML page, counted.
    fn page(&self, status: StatusCode) -> Response {
        self.replied_itself.fetch_add(1, Ordering::SeqCst);
        let reason = status.canonical_reason().unwrap_or("Error");
        let code = status.as_u16();
        let html = format!(
            "<html>\r\n<head><title>{code} {reason}</title></head>\r\n\
             <body>\r\n<center><h1>{code} {reason}</h1></center>\r\n</body>\r\n</html>\r\n"
        );
        let mut response = Response::new(Body::from(html));
        *response.status_mut() = status;
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        );
        response
    }

    /// The gateway's own 307 to `location`, counted (without a `Location` if it is not a valid
    /// header value, which [`BankGateway::set_mode`] refuses anyway).
    fn redirect(&self, location: &str) -> Response {
        self.replied_itself.fetch_add(1, Ordering::SeqCst);
        let mut response = Response::new(Body::empty());
        *response.status_mut() = StatusCode::TEMPORARY_REDIRECT;
        if let Ok(location) = HeaderValue::from_str(location) {
            response.headers_mut().insert(header::LOCATION, location);
        }
        response
    }
}

/// Every request, whatever its method and path: replied to as the mode in force on its arrival
/// says.
async fn handle(State(gateway): State<Arc<Shared>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let call = parts.method == Method::POST;
    let mode = match gateway.mode() {
        GatewayMode::Unavailable => GatewayMode::Unavailable,
        mode if call => mode,
        _ => GatewayMode::PassThrough,
    };
    match &mode {
        GatewayMode::Unavailable => return gateway.page(StatusCode::SERVICE_UNAVAILABLE),
        GatewayMode::RedirectsCalls { location } => return gateway.redirect(location),
        _ => {}
    }
    let Ok(body) = axum::body::to_bytes(body, MAX_REQUEST_BYTES).await else {
        return gateway.page(StatusCode::BAD_REQUEST);
    };
    let forward = Forward {
        method: parts.method,
        path_and_query: parts
            .uri
            .path_and_query()
            .map_or_else(|| "/".to_owned(), |path| path.as_str().to_owned()),
        headers: end_to_end(&parts.headers),
        body,
    };
    if call {
        gateway.calls_forwarded.fetch_add(1, Ordering::SeqCst);
    }
    if mode == GatewayMode::UnavailableAfterForwarding {
        let sender = Arc::clone(&gateway);
        // The call goes on at the bank; its reply is read and dropped, as the gateway that
        // timed out drops it.
        tokio::spawn(async move { sender.send(forward).await.ok() });
        return gateway.page(StatusCode::SERVICE_UNAVAILABLE);
    }
    let Ok(reply) = gateway.send(forward).await else {
        return gateway.page(StatusCode::BAD_GATEWAY);
    };
    reshaped(reply, &mode).into_response()
}

/// The bank's `reply` as `mode` passes it on: padded, renamed or unchanged.
fn reshaped(mut reply: Reply, mode: &GatewayMode) -> Reply {
    let body = match mode {
        GatewayMode::HugeReplies { bytes } => padded(&reply.body, *bytes),
        GatewayMode::NamesAnotherReference => renamed(&reply.body),
        _ => None,
    };
    if let Some(body) = body {
        reply.body = Bytes::from(body);
        reply.headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
    }
    reply
}

impl Reply {
    /// The reply as the gateway sends it on.
    fn into_response(self) -> Response {
        let mut response = Response::new(Body::from(self.body));
        *response.status_mut() = self.status;
        *response.headers_mut() = self.headers;
        response
    }
}

/// `body`'s JSON object with a `"padding"` string making it `bytes` bytes long in all (or as
/// short as it gets, with an empty padding); `None` if `body` is not a JSON object.
fn padded(body: &[u8], bytes: usize) -> Option<Vec<u8>> {
    let Ok(Value::Object(mut object)) = serde_json::from_slice(body) else {
        return None;
    };
    object.insert("padding".to_owned(), Value::String(String::new()));
    let bare = serde_json::to_vec(&object).ok()?.len();
    // ASCII letters: one byte each, never escaped.
    let padding = "x".repeat(bytes.saturating_sub(bare));
    object.insert("padding".to_owned(), Value::String(padding));
    serde_json::to_vec(&object).ok()
}

/// `body`'s JSON object with its `bank_reference` and `reference` (those present) naming
/// another payment; `None` if `body` is not a JSON object.
fn renamed(body: &[u8]) -> Option<Vec<u8>> {
    let Ok(Value::Object(mut object)) = serde_json::from_slice(body) else {
        return None;
    };
    for field in ["bank_reference", "reference"] {
        if let Some(value) = object.get_mut(field) {
            *value = Value::String(ANOTHER_REFERENCE.to_owned());
        }
    }
    serde_json::to_vec(&object).ok()
}

/// `headers` without the hop-by-hop ones ([`HOP_BY_HOP`]) and `content-length` (the body the
/// next hop gets may differ in length, and its sender sets it).
fn end_to_end(headers: &HeaderMap) -> HeaderMap {
    headers
        .iter()
        .filter(|(name, _)| *name != header::CONTENT_LENGTH && !HOP_BY_HOP.contains(&name.as_str()))
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect()
}
