//! The request id: the `X-Request-Id` a request came with (the edge mints one per forwarded
//! request), or one minted here. [`propagate`] puts it in the request's extensions as a
//! [`RequestId`], where every handler takes it to pass on explicitly to the writes it causes,
//! and echoes it on the answer.
//!
//! With it, the trace id: from a W3C `traceparent` header the request came with, or minted
//! here. Both are fields of the request's span, so every log line written while the request is
//! served carries them (`crate::telemetry`).

use axum::extract::Request;
use axum::http::HeaderMap;
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

use crate::domain::RequestId;

/// The request header (and answer header) that carries the id.
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

/// The W3C trace context header.
pub const TRACEPARENT: &str = "traceparent";

/// The trace id of a `traceparent` header (`00-<32 hex>-<16 hex>-<2 hex>`, not all zeros), or a
/// fresh one if there is none or it is malformed.
pub fn trace_id_of(headers: &HeaderMap) -> String {
    headers
        .get(TRACEPARENT)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| {
            let parts: Vec<&str> = value.split('-').collect();
            let lower_hex = |part: &str, length: usize| {
                part.len() == length && part.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
            };
            let well_formed = parts.len() == 4
                && lower_hex(parts[0], 2)
                && parts[0] != "ff"
                && lower_hex(parts[1], 32)
                && lower_hex(parts[2], 16)
                && lower_hex(parts[3], 2)
                && parts[1].bytes().any(|b| b != b'0');
            well_formed.then(|| parts[1].to_owned())
        })
        .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string())
}

/// Middleware: takes or mints the id, hands it to the handler (an extension) and echoes it;
/// serves the request inside a span naming the id and the trace id.
pub async fn propagate(mut request: Request, next: Next) -> Response {
    let id = accept_or_mint(request.headers().get(HEADER));
    let trace_id = trace_id_of(request.headers());
    let header = HeaderValue::from_str(&id).expect("checked visible ASCII");
    request.headers_mut().insert(HEADER, header.clone());
    request.extensions_mut().insert(RequestId::new(&id));
    let span = tracing::info_span!("request", request_id = %id, trace_id = %trace_id);
    let mut response = next.run(request).instrument(span).await;
    response.headers_mut().insert(HEADER, header);
    response
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
    fn a_well_formed_traceparent_gives_its_trace_id_and_anything_else_a_fresh_one() {
        let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(TRACEPARENT, HeaderValue::from_str(value).expect("a value"));
            trace_id_of(&headers)
        };
        assert_eq!(with(&format!("00-{trace}-00f067aa0ba902b7-01")), trace);
        for refused in [
            format!("00-{}-00f067aa0ba902b7-01", "0".repeat(32)),
            format!("ff-{trace}-00f067aa0ba902b7-01"),
            format!("00-{}-00f067aa0ba902b7-01", trace.to_uppercase()),
            format!("00-{trace}-00f067aa0ba902b7"),
            "garbage".to_owned(),
        ] {
            let minted = with(&refused);
            assert_ne!(minted, trace, "{refused}");
            assert_eq!(minted.len(), 32, "{refused}");
        }
        assert_eq!(trace_id_of(&HeaderMap::new()).len(), 32);
    }
}
