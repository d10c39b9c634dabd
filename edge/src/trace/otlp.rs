//! The edge's span as an OTLP/HTTP JSON export request
//! (<https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding>): the body the Worker
//! POSTs to the collector's `/v1/traces` with `Content-Type: application/json`.
//!
//! OTLP's JSON differs from plain protobuf JSON in ways a collector insists on: trace and span
//! ids are hex strings (not base64), enums are integers, and 64-bit integers (the times in
//! nanoseconds, `intValue`) are decimal strings.

use super::EdgeSpan;
use super::span::EDGE_SPAN_NAME;

/// The instrumentation scope the span is reported under.
pub const SCOPE_NAME: &str = "safe-retries-edge";

/// `SPAN_KIND_SERVER`: the edge serves the client's request.
const SPAN_KIND_SERVER: u8 = 2;

/// `STATUS_CODE_UNSET`: the span is not marked failed (a 4xx is the client's, not the edge's).
const STATUS_CODE_UNSET: u8 = 0;

/// `STATUS_CODE_ERROR`: a 5xx reply.
const STATUS_CODE_ERROR: u8 = 2;

/// The export request carrying `span`, from the service named `service_name`. Written with
/// `format!` (its strings escaped by `serde_json`) rather than built as a `serde_json::Value`,
/// which made the Worker's module 1.7 KB larger gzipped.
pub fn export_request(span: &EdgeSpan<'_>, service_name: &str) -> String {
    let parent = match span.trace.parent_id() {
        Some(parent_id) => format!(r#""parentSpanId":"{parent_id}","#),
        None => String::new(),
    };
    let attributes = [
        string_attribute("http.request.method", span.method),
        string_attribute("url.path", span.path),
        format!(
            r#"{{"key":"http.response.status_code","value":{{"intValue":"{}"}}}}"#,
            span.status
        ),
        string_attribute("edge.handling", span.handling.as_str()),
    ]
    .join(",");
    let status_code = if span.status >= 500 {
        STATUS_CODE_ERROR
    } else {
        STATUS_CODE_UNSET
    };
    let exported = format!(
        concat!(
            r#"{{"traceId":"{trace_id}","spanId":"{span_id}",{parent}"#,
            r#""name":"{name}","kind":{kind},"#,
            r#""startTimeUnixNano":"{start}","endTimeUnixNano":"{end}","#,
            r#""attributes":[{attributes}],"status":{{"code":{status_code}}}}}"#,
        ),
        trace_id = span.trace.trace_id(),
        span_id = span.trace.span_id(),
        parent = parent,
        name = EDGE_SPAN_NAME,
        kind = SPAN_KIND_SERVER,
        start = unix_nanos(span.start_ms),
        end = unix_nanos(span.end_ms),
        attributes = attributes,
        status_code = status_code,
    );
    format!(
        concat!(
            r#"{{"resourceSpans":[{{"#,
            r#""resource":{{"attributes":[{resource}]}},"#,
            r#""scopeSpans":[{{"scope":{{"name":"{scope}"}},"spans":[{exported}]}}]"#,
            r#"}}]}}"#,
        ),
        resource = string_attribute("service.name", service_name),
        scope = SCOPE_NAME,
        exported = exported,
    )
}

/// An attribute with a string value, the value escaped as JSON.
fn string_attribute(key: &str, value: &str) -> String {
    let value = serde_json::to_string(value).unwrap_or_default();
    format!(r#"{{"key":"{key}","value":{{"stringValue":{value}}}}}"#)
}

/// Unix milliseconds as OTLP's nanoseconds (a `u64` holds them until the year 2554).
fn unix_nanos(unix_ms: u64) -> u64 {
    unix_ms.saturating_mul(1_000_000)
}

#[cfg(test)]
mod tests {
    // Under wasm32 the same tests run in Node through wasm-bindgen-test (`.cargo/config.toml`).
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use serde_json::{Value, json};

    use super::*;
    use crate::trace::{EdgeHandling, FreshIds, IncomingTrace, TraceContext};

    const FRESH: FreshIds = FreshIds {
        trace_id: [0xab; 16],
        span_id: [0x0c; 8],
    };

    fn exported(trace: &TraceContext, status: u16, handling: EdgeHandling) -> Value {
        exported_with_path(trace, status, handling, "/v1/bills/b-1/pay")
    }

    fn exported_with_path(
        trace: &TraceContext,
        status: u16,
        handling: EdgeHandling,
        path: &str,
    ) -> Value {
        let span = EdgeSpan {
            trace,
            method: "POST",
            path,
            status,
            handling,
            start_ms: 1_767_225_600_123,
            end_ms: 1_767_225_600_456,
        };
        serde_json::from_str(&export_request(&span, "edge-under-test")).expect("JSON")
    }

    #[test]
    fn the_span_is_encoded_as_otlp_json_with_hex_ids_integer_enums_and_string_nanos() {
        let incoming = IncomingTrace {
            traceparent: Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
            tracestate: None,
        };
        let trace = TraceContext::start(incoming, FRESH);
        let body = exported(&trace, 201, EdgeHandling::Forwarded);
        let resource = &body["resourceSpans"][0];
        assert_eq!(
            resource["resource"]["attributes"],
            json!([{"key": "service.name", "value": {"stringValue": "edge-under-test"}}])
        );
        let scope = &resource["scopeSpans"][0];
        assert_eq!(scope["scope"]["name"], "safe-retries-edge");
        assert_eq!(
            scope["spans"],
            json!([{
                "traceId": "4bf92f3577b34da6a3ce929d0e0e4736",
                "spanId": "0c0c0c0c0c0c0c0c",
                "parentSpanId": "00f067aa0ba902b7",
                "name": "edge request",
                "kind": 2,
                "startTimeUnixNano": "1767225600123000000",
                "endTimeUnixNano": "1767225600456000000",
                "attributes": [
                    {"key": "http.request.method", "value": {"stringValue": "POST"}},
                    {"key": "url.path", "value": {"stringValue": "/v1/bills/b-1/pay"}},
                    {"key": "http.response.status_code", "value": {"intValue": "201"}},
                    {"key": "edge.handling", "value": {"stringValue": "forwarded"}},
                ],
                "status": {"code": 0},
            }])
        );
    }

    #[test]
    fn a_new_trace_has_no_parent_and_a_5xx_marks_the_span_failed() {
        let trace = TraceContext::start(IncomingTrace::default(), FRESH);
        let body = exported(&trace, 504, EdgeHandling::ForwardFailed);
        let span = &body["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
        assert_eq!(span["traceId"], "ab".repeat(16));
        assert!(span.get("parentSpanId").is_none(), "{span}");
        assert_eq!(span["status"], json!({"code": 2}));
        assert_eq!(
            span["attributes"][3]["value"]["stringValue"],
            "forward_failed"
        );
        let refused = exported(&trace, 429, EdgeHandling::Refused);
        let status = &refused["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["status"];
        assert_eq!(status, &json!({"code": 0}));
    }

    #[test]
    fn quotes_and_backslashes_in_strings_stay_valid_json() {
        let trace = TraceContext::start(IncomingTrace::default(), FRESH);
        let path = r#"/v1/"odd"\path"#;
        let body = exported_with_path(&trace, 404, EdgeHandling::Refused, path);
        let attributes = &body["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"];
        assert_eq!(attributes[1]["value"]["stringValue"], path);
    }
}
