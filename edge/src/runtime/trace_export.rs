//! The edge's trace at the runtime: the context taken from a request's headers with freshly
//! drawn ids ([`trace_of`]), and the export of the edge's span to the OTLP collector
//! ([`export_span`]) as a `wait_until` task, after the reply, so a slow or failing collector
//! never delays or changes the client's reply; a failed export is only logged.

use worker::wasm_bindgen::JsValue;
use worker::{Context, Fetch, Headers, Method, Request, RequestRedirect, console_error};

use super::outgoing::Outgoing;
use crate::config::SpanExport;
use crate::trace::{
    EdgeSpan, FreshIds, IncomingTrace, TRACEPARENT_HEADER, TRACESTATE_HEADER, TraceContext, otlp,
};

/// The edge's trace context for `request`: the client's trace if its `traceparent` is well
/// formed, else a new one.
pub fn trace_of(request: &Request) -> TraceContext {
    let header = |name: &str| request.headers().get(name).ok().flatten();
    let (traceparent, tracestate) = (header(TRACEPARENT_HEADER), header(TRACESTATE_HEADER));
    let incoming = IncomingTrace {
        traceparent: traceparent.as_deref(),
        tracestate: tracestate.as_deref(),
    };
    TraceContext::start(incoming, fresh_ids())
}

/// Random ids from two v4 UUIDs (`crypto.getRandomValues`): the whole of one for the trace id
/// (122 random bits) and the first 8 bytes of another for the span id (60 random bits). Neither
/// can be all zeros: both hold a UUID's version digit, 4, in their seventh byte.
fn fresh_ids() -> FreshIds {
    FreshIds {
        trace_id: uuid::Uuid::new_v4().into_bytes(),
        span_id: uuid::Uuid::new_v4().as_u64_pair().0.to_be_bytes(),
    }
}

/// Sends `span` to the collector once the reply is on its way.
pub fn export_span(context: &Context, export: &SpanExport, span: &EdgeSpan<'_>) {
    let body = otlp::export_request(span, &export.service_name);
    let url = export.traces_url.clone();
    context.wait_until(async move {
        if let Err(error) = post_json(&url, &body).await {
            console_error!("could not export the edge's span to {url}: {error}");
        }
    });
}

/// POSTs a JSON body; anything but a 2xx is an error.
async fn post_json(url: &str, body: &str) -> worker::Result<()> {
    let headers = Headers::new();
    headers.set("content-type", "application/json")?;
    let outgoing = Outgoing {
        method: Method::Post,
        headers: Some(headers),
        body: Some(JsValue::from_str(body)),
        redirect: RequestRedirect::Follow,
    };
    let response = Fetch::Request(outgoing.to(url)?).send().await?;
    match response.status_code() {
        200..=299 => Ok(()),
        status => Err(worker::Error::RustError(format!(
            "the collector replied {status}"
        ))),
    }
}
