//! [`OtlpReceiver`]: an OTLP/HTTP trace receiver on 127.0.0.1 that keeps every span it is sent,
//! for the tests that follow one payment's trace from the edge through the backend to the bank.
//!
//! It speaks the protocol as the OpenTelemetry specification defines it: `POST /v1/traces` with
//! an `ExportTraceServiceRequest`, as protobuf (`application/x-protobuf`, the backend's
//! exporter) or JSON (`application/json`, the edge's), decoded with the OpenTelemetry project's
//! own message types (`opentelemetry-proto`), and replied to with an empty
//! `ExportTraceServiceResponse`. A body that does not decode gets 400 and is counted, so a
//! test sees an exporter that sends something the protocol does not allow. `GET /received`
//! tells the counts to a process outside the test (`bench/observability.sh` runs the receiver as
//! the `otlp-receiver` binary).
//! (No OpenTelemetry Collector binary is reachable on these machines; docs/testing.md.)

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::routing::{get, post};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use prost::Message;

/// One span as received, with the service that sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedSpan {
    /// The resource's `service.name`.
    pub service: String,
    /// The span's name.
    pub name: String,
    /// 32 lowercase hex digits.
    pub trace_id: String,
    /// 16 lowercase hex digits.
    pub span_id: String,
    /// 16 lowercase hex digits, or empty for a root span.
    pub parent_span_id: String,
    /// `SpanKind` as OTLP numbers it (1 internal, 2 server, 3 client).
    pub kind: i32,
    /// The span's attributes, their values as text.
    pub attributes: Vec<(String, String)>,
}

impl ReceivedSpan {
    /// The attribute `key`'s value as text, if the span has it.
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(name, _)| name == key)
            .map(|(_, value)| value.as_str())
    }
}

#[derive(Debug, Default)]
struct Received {
    spans: Vec<ReceivedSpan>,
    refused_bodies: usize,
}

/// The receiver; it stops with the test's runtime.
#[derive(Debug, Clone)]
pub struct OtlpReceiver {
    address: SocketAddr,
    received: Arc<Mutex<Received>>,
}

impl OtlpReceiver {
    /// Starts a receiver on a port of its own.
    pub async fn start() -> OtlpReceiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the OTLP receiver");
        let receiver = OtlpReceiver {
            address: listener.local_addr().expect("a bound address"),
            received: Arc::default(),
        };
        let app = Router::new()
            .route("/v1/traces", post(export))
            .route("/received", get(counts))
            .with_state(Arc::clone(&receiver.received));
        tokio::spawn(async move { axum::serve(listener, app).await });
        receiver
    }

    /// The base URL, as `OTEL_EXPORTER_OTLP_ENDPOINT` takes it (`/v1/traces` is appended).
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.lock().spans.clone()
    }

    /// The spans of the trace `trace_id` received so far.
    pub fn trace(&self, trace_id: &str) -> Vec<ReceivedSpan> {
        let received = self.lock();
        let of_trace = received
            .spans
            .iter()
            .filter(|span| span.trace_id == trace_id);
        of_trace.cloned().collect()
    }

    /// How many bodies did not decode as an `ExportTraceServiceRequest`.
    pub fn refused_bodies(&self) -> usize {
        self.lock().refused_bodies
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Received> {
        self.received.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// `GET /received`, for a process outside the test (the benchmark): how many spans arrived and
/// how many bodies were refused, as JSON.
async fn counts(State(received): State<Arc<Mutex<Received>>>) -> axum::Json<serde_json::Value> {
    let received = received.lock().unwrap_or_else(PoisonError::into_inner);
    axum::Json(serde_json::json!({
        "spans": received.spans.len(),
        "refused_bodies": received.refused_bodies,
    }))
}

/// `POST /v1/traces`.
async fn export(
    State(received): State<Arc<Mutex<Received>>>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, [(header::HeaderName, &'static str); 1], Vec<u8>) {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("");
    let request = if content_type.starts_with("application/json") {
        serde_json::from_slice::<ExportTraceServiceRequest>(&body).ok()
    } else {
        ExportTraceServiceRequest::decode(body).ok()
    };
    let mut received = received.lock().unwrap_or_else(PoisonError::into_inner);
    let Some(request) = request else {
        received.refused_bodies += 1;
        let text = [(header::CONTENT_TYPE, "text/plain")];
        return (
            StatusCode::BAD_REQUEST,
            text,
            b"not an ExportTraceServiceRequest".to_vec(),
        );
    };
    for resource_spans in request.resource_spans {
        let resource = resource_spans.resource.unwrap_or_default();
        let service = attributes(&resource.attributes)
            .into_iter()
            .find(|(key, _)| key == "service.name")
            .map(|(_, value)| value)
            .unwrap_or_default();
        for span in resource_spans.scope_spans.into_iter().flat_map(|s| s.spans) {
            received.spans.push(ReceivedSpan {
                service: service.clone(),
                name: span.name,
                trace_id: hex(&span.trace_id),
                span_id: hex(&span.span_id),
                parent_span_id: hex(&span.parent_span_id),
                kind: span.kind,
                attributes: attributes(&span.attributes),
            });
        }
    }
    // An empty `ExportTraceServiceResponse` (no partial success to report).
    let protobuf = [(header::CONTENT_TYPE, "application/x-protobuf")];
    (StatusCode::OK, protobuf, Vec::new())
}

fn attributes(pairs: &[KeyValue]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|pair| (pair.key.clone(), value_text(pair.value.as_ref())))
        .collect()
}

fn value_text(value: Option<&AnyValue>) -> String {
    match value.and_then(|value| value.value.as_ref()) {
        Some(any_value::Value::StringValue(text)) => text.clone(),
        Some(any_value::Value::IntValue(number)) => number.to_string(),
        Some(any_value::Value::BoolValue(flag)) => flag.to_string(),
        Some(any_value::Value::DoubleValue(number)) => number.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
