//! Traces over OTLP: the backend's `tracing` spans (the request, the checks, the claim, the
//! bank call, the save, a wait, a reconciliation) exported as OpenTelemetry spans by
//! `tracing-opentelemetry`, joined to the caller's trace by the W3C `traceparent` it sent, and
//! carried on to the bank on every call.
//!
//! Configured by the standard OpenTelemetry settings, read from the environment; with neither
//! endpoint set, nothing is exported and the layer is not installed (no cost):
//! - `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the full URL) or `OTEL_EXPORTER_OTLP_ENDPOINT` (a base
//!   URL, `/v1/traces` appended): where to send;
//! - `OTEL_EXPORTER_OTLP_PROTOCOL`: only `http/protobuf` (the specification's default) is
//!   built in; another value stops the start with a message;
//! - `OTEL_TRACES_EXPORTER=none` or `OTEL_SDK_DISABLED=true`: off even with an endpoint;
//! - read by the SDK itself: `OTEL_SERVICE_NAME` (default here `safe-retries-backend`),
//!   `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_EXPORTER_OTLP_TIMEOUT`,
//!   `OTEL_TRACES_SAMPLER` (default: follow the parent's decision, sample every root), and the
//!   batch processor's `OTEL_BSP_*`.
//!
//! Spans leave in batches from the processor's own thread, so a slow or absent receiver never
//! holds up a payment; a full queue drops spans, never requests.

use std::sync::atomic::{AtomicBool, Ordering};

use axum::extract::{MatchedPath, Request};
use axum::http::HeaderMap;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_http::{HeaderExtractor, HeaderInjector};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use shared::trace_context::{TRACEPARENT_HEADER, trace_id_of};
use tracing_opentelemetry::{OpenTelemetryLayer, OpenTelemetrySpanExt};
use tracing_subscriber::registry::LookupSpan;

use crate::domain::TraceId;

/// The service's name in its spans when `OTEL_SERVICE_NAME` does not say.
const DEFAULT_SERVICE_NAME: &str = "safe-retries-backend";

/// The one protocol built in.
const HTTP_PROTOBUF: &str = "http/protobuf";

/// Whether [`Tracing::layer`] gave the process its layer: until then (and without an exporter)
/// a request's trace id is read from its header without the propagator's work.
static LAYER_INSTALLED: AtomicBool = AtomicBool::new(false);

/// The trace exporter, if the settings asked for one. Dropping it flushes the spans still
/// queued (bounded by `OTEL_EXPORTER_OTLP_TIMEOUT`) and stops the exporter.
#[derive(Debug)]
pub struct Tracing {
    provider: Option<SdkTracerProvider>,
}

impl Tracing {
    /// The exporter the process's `OTEL_*` settings describe, or none.
    pub fn from_environment() -> anyhow::Result<Tracing> {
        Tracing::from_settings(|name| std::env::var(name).ok())
    }

    fn from_settings(setting: impl Fn(&str) -> Option<String>) -> anyhow::Result<Tracing> {
        let set = |name: &str| setting(name).filter(|value| !value.trim().is_empty());
        let switched_off = set("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
            || set("OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none"));
        let has_endpoint = set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some()
            || set("OTEL_EXPORTER_OTLP_ENDPOINT").is_some();
        if switched_off || !has_endpoint {
            return Ok(Tracing { provider: None });
        }
        if let Some(exporter) = set("OTEL_TRACES_EXPORTER")
            && exporter != "otlp"
        {
            anyhow::bail!("OTEL_TRACES_EXPORTER={exporter}: only otlp (or none) is built in");
        }
        for name in [
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ] {
            if let Some(protocol) = set(name)
                && protocol != HTTP_PROTOBUF
            {
                anyhow::bail!("{name}={protocol}: only {HTTP_PROTOBUF} is built in");
            }
        }
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .build()?;
        let mut resource = Resource::builder();
        if set("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name(DEFAULT_SERVICE_NAME);
        }
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource.build())
            .build();
        Ok(Tracing {
            provider: Some(provider),
        })
    }

    /// The layer that turns spans into OpenTelemetry spans, if exporting.
    pub fn layer<S>(&self) -> Option<OpenTelemetryLayer<S, SdkTracer>>
    where
        S: tracing::Subscriber + for<'span> LookupSpan<'span>,
    {
        let provider = self.provider.as_ref()?;
        let tracer = provider.tracer("backend");
        LAYER_INSTALLED.store(true, Ordering::Relaxed);
        Some(tracing_opentelemetry::layer().with_tracer(tracer))
    }
}

impl Drop for Tracing {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take()
            && let Err(error) = provider.shutdown()
        {
            eprintln!("could not send the last spans: {error}");
        }
    }
}

/// Whether spans are exported by this process: a span that only the trace needs (no log line
/// reads it) is made only then.
pub fn exporting() -> bool {
    LAYER_INSTALLED.load(Ordering::Relaxed)
}

/// Joins `span` (`request`'s, not yet entered, with empty `otel.name` and `otel.kind` fields)
/// to the trace of the `traceparent` the request came with, names it for the trace (`POST
/// /v1/bills/{bill_id}/payments`, a server span), and returns the trace id it is under: the
/// caller's, or a new trace's. Without the exporter, the trace id is read from the header (or
/// minted) all the same, for the logs and the trail.
pub fn join_callers_trace(span: &tracing::Span, request: &Request) -> TraceId {
    let headers = request.headers();
    let callers = || {
        let header = headers.get(TRACEPARENT_HEADER)?.to_str().ok()?;
        trace_id_of(header)
    };
    if !exporting() {
        return callers().unwrap_or_else(TraceId::mint);
    }
    let parent = TraceContextPropagator::new().extract(&HeaderExtractor(headers));
    // Fails only for a span no layer took (filtered out): it has no OpenTelemetry side.
    if span.set_parent(parent).is_err() {
        return callers().unwrap_or_else(TraceId::mint);
    }
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str);
    span.record("otel.name", format!("{} {route}", request.method()));
    span.record("otel.kind", "server");
    let exported = span.context().span().span_context().trace_id();
    TraceId::from_bytes(exported.to_bytes())
}

/// Adds the current span's `traceparent` to a call's `headers`, so the callee (the bank) joins
/// the trace; nothing without the exporter.
pub fn carry_to_callee(headers: &mut HeaderMap) {
    if !exporting() {
        return;
    }
    let current = tracing::Span::current().context();
    TraceContextPropagator::new().inject_context(&current, &mut HeaderInjector(headers));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(set, _)| set == name)
                .map(|(_, value)| value.clone())
        }
    }

    #[test]
    fn nothing_is_exported_without_an_endpoint_or_when_switched_off() {
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318");
        for off in [
            settings(&[]),
            settings(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")]),
            settings(&[endpoint, ("OTEL_SDK_DISABLED", "true")]),
            settings(&[endpoint, ("OTEL_TRACES_EXPORTER", "none")]),
        ] {
            let tracing = Tracing::from_settings(off).expect("valid settings");
            assert!(tracing.provider.is_none());
        }
    }

    #[test]
    fn an_unsupported_protocol_or_exporter_is_named_at_start() {
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318");
        for (name, value) in [
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json"),
            ("OTEL_TRACES_EXPORTER", "zipkin"),
        ] {
            let error =
                Tracing::from_settings(settings(&[endpoint, (name, value)])).expect_err("refused");
            assert!(error.to_string().contains(name), "{error}");
        }
    }

    #[test]
    fn without_the_exporter_the_trace_id_comes_from_the_header_or_is_minted() {
        let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
        let parent = format!("00-{trace}-00f067aa0ba902b7-01");
        let request = Request::builder()
            .header(TRACEPARENT_HEADER, parent)
            .body(axum::body::Body::empty())
            .expect("a request");
        let span = tracing::Span::none();
        assert_eq!(join_callers_trace(&span, &request).to_string(), trace);
        let bare = Request::new(axum::body::Body::empty());
        let minted = join_callers_trace(&span, &bare).to_string();
        assert_eq!(minted.len(), 32);
        assert_ne!(minted, trace);
    }
}
