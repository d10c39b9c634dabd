//! The request id: the `X-Request-Id` a request came with (the edge mints one per forwarded
//! request), or one minted here. [`propagate`] puts it in the request's extensions as a
//! [`RequestId`], where every handler takes it to pass on explicitly to the writes it causes,
//! and echoes it on the reply.
//!
//! With it, the trace id: from a W3C `traceparent` header the request came with, or a new
//! trace's. Both are fields of the request's span, so every log line written while the request
//! is served carries them (`crate::telemetry`); with the exporter on, the span is the trace's
//! server span, a child of the caller's (`crate::telemetry::traces`), with OpenTelemetry's HTTP
//! server attributes: `http.request.method`, `http.route` (the route's template, when one
//! matched), `url.path`, `server.address` and `server.port` (from `Host`) and
//! `http.response.status_code`.

use axum::extract::{MatchedPath, Request};
use axum::http::HeaderValue;
use axum::http::header::HOST;
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

use crate::domain::RequestId;
use crate::telemetry::traces::join_callers_trace;

/// The request header (and reply header) that carries the id.
pub const HEADER: &str = "x-request-id";

/// The longest id kept as sent; a longer or unprintable one is replaced by a fresh id.
const MAX_LENGTH: usize = 64;

/// The id to use for a request that sent `sent`: kept if it is 1 to 64 visible ASCII
/// characters, else a fresh UUID (a client cannot put newlines or a megabyte in the trail).
pub fn accept_or_mint(sent: Option<&HeaderValue>) -> String {
    sent.and_then(|value| value.to_str().ok())
        .filter(|id| {
            !id.is_empty() && id.len() <= MAX_LENGTH && id.bytes().all(|b| b.is_ascii_graphic())
        })
        .map_or_else(|| uuid::Uuid::new_v4().to_string(), str::to_owned)
}

/// Middleware: takes or mints the id, hands it to the handler (an extension) and echoes it;
/// serves the request inside a span naming the id and the trace id, joined to the caller's
/// trace (`telemetry::traces`). The trace id goes to the handler too (an extension), for the
/// trail.
pub async fn propagate(mut request: Request, next: Next) -> Response {
    let id = accept_or_mint(request.headers().get(HEADER));
    let header = HeaderValue::from_str(&id).expect("checked visible ASCII");
    request.headers_mut().insert(HEADER, header.clone());
    request.extensions_mut().insert(RequestId::new(&id));
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(MatchedPath::as_str);
    let (server_address, server_port) = host_and_port(request.headers().get(HOST));
    let span = tracing::info_span!(
        "request",
        request_id = %id,
        trace_id = tracing::field::Empty,
        otel.name = tracing::field::Empty,
        otel.kind = tracing::field::Empty,
        http.request.method = %request.method(),
        http.route = route,
        url.path = request.uri().path(),
        server.address = server_address,
        server.port = server_port,
        http.response.status_code = tracing::field::Empty,
    );
    let trace_id = join_callers_trace(&span, &request);
    span.record("trace_id", tracing::field::display(trace_id));
    request.extensions_mut().insert(trace_id);
    let mut response = next.run(request).instrument(span.clone()).await;
    span.record("http.response.status_code", response.status().as_u16());
    response.headers_mut().insert(HEADER, header);
    response
}

/// The host and port a request's `Host` header names (`None` where it names none).
fn host_and_port(host: Option<&HeaderValue>) -> (Option<&str>, Option<u16>) {
    let Some(host) = host.and_then(|value| value.to_str().ok()) else {
        return (None, None);
    };
    // A bracketed IPv6 address without a port ends in `]`, which no port parses from.
    match host
        .rsplit_once(':')
        .map(|(name, port)| (name, port.parse::<u16>()))
    {
        Some((name, Ok(port))) => (Some(name), Some(port)),
        _ => (Some(host), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sensible_id_is_kept_and_anything_else_is_replaced() {
        let kept = HeaderValue::from_static("edge-7f3a");
        assert_eq!(accept_or_mint(Some(&kept)), "edge-7f3a");
        for refused in ["", "has space", &"x".repeat(65)] {
            let value = HeaderValue::from_str(refused).expect("a header value");
            let minted = accept_or_mint(Some(&value));
            assert_ne!(minted, refused);
            assert!(
                uuid::Uuid::parse_str(&minted).is_ok(),
                "{refused:?} got {minted}"
            );
        }
        assert!(uuid::Uuid::parse_str(&accept_or_mint(None)).is_ok());
    }

    #[test]
    fn the_host_header_gives_the_server_address_and_port() {
        for (host, address, port) in [
            ("api.example.com", "api.example.com", None),
            ("127.0.0.1:8080", "127.0.0.1", Some(8080)),
            ("[::1]:8080", "[::1]", Some(8080)),
            ("[::1]", "[::1]", None),
            ("host:port", "host:port", None),
        ] {
            let value = HeaderValue::from_static(host);
            assert_eq!(host_and_port(Some(&value)), (Some(address), port), "{host}");
        }
        assert_eq!(host_and_port(None), (None, None));
    }
}
