//! The edge's part in a distributed trace, as plain values: the W3C trace context it takes from
//! a request or starts ([`TraceContext`], read as the backend reads it: `shared::trace_context`) and passes to the backend in `traceparent`, the span it
//! records for the request ([`EdgeSpan`], with how the edge replied, [`EdgeHandling`]), and that
//! span as an OTLP/HTTP JSON export request ([`otlp`]); and the request's data point in the
//! edge's Analytics Engine dataset ([`RequestPoint`]). The runtime reads the headers, draws the
//! random ids, and sends the export when `OTEL_EXPORTER_OTLP_ENDPOINT` is set
//! (`runtime::trace_export`).

pub mod otlp;
mod request_point;
mod span;

pub use request_point::{
    BLOB_COLUMNS, NO_OPERATION, REQUESTS_DATASET, REQUESTS_DATASET_BINDING, RequestPoint,
};
pub use shared::trace_context::{
    FreshIds, IncomingTrace, SpanId, TRACEPARENT_HEADER, TRACESTATE_HEADER, TraceContext, TraceId,
};
pub use span::{EDGE_SPAN_NAME, EdgeHandling, EdgeSpan};
