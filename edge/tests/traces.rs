//! One trace from the phone to the bank, under the real runtime (`workerd`) in front of a real
//! backend, PostgreSQL and bank simulator, exporting to a real OTLP/HTTP receiver
//! (`test_harness::OtlpReceiver`): a payment that came with a W3C `traceparent` gives the edge's
//! server span (the caller's child, exported as OTLP/JSON), the backend's server span as the
//! edge span's child, and the backend's bank call (a client span) under it; one debit at the
//! bank. Its replay, without a `traceparent`, is a trace of its own that the edge served from
//! its key's object (`edge.handling = replayed`) without the backend, or, where the edge keeps
//! no replies, forwarded to the backend's replay. A request the edge refuses
//! is traced too, with a `traceparent` the edge cannot read: a new trace, never a refusal.
#![cfg(not(target_arch = "wasm32"))]

mod support;

use std::time::Duration;

use support::{Call, PAY_ROUTE, Stack, StackOptions, Via, edge_keeps_replies, replays_forwarded};
use test_harness::{OtlpReceiver, ReceivedSpan, wait_for};

const PAY_BODY: &str = r#"{"amount_paise":230000,"payer_vpa":"asha@okbank"}"#;
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLERS_SPAN: &str = "00f067aa0ba902b7";
const SERVER: i32 = 2;
const CLIENT: i32 = 3;

#[tokio::test]
async fn a_payment_through_the_edge_is_one_trace_from_the_callers_span_to_the_bank_call() {
    let receiver = OtlpReceiver::start().await;
    let stack = Stack::start(StackOptions {
        otlp_endpoint: Some(receiver.endpoint()),
        ..StackOptions::default()
    })
    .await;
    let key = uuid::Uuid::new_v4().to_string();
    let pay = Call::pay(5, &key, "elec-5", PAY_BODY);
    let traced = pay
        .clone()
        .with_header("traceparent", &format!("00-{TRACE_ID}-{CALLERS_SPAN}-01"));
    assert_eq!(stack.send(Via::Edge, &traced).await.status, 201);
    // Each span is exported when it ends, in batches of its own: wait for every one asserted on
    // (the backend's server span ends after its reply, so after the save's).
    wait_for(
        "the edge's span, the backend's, its bank call and its save",
        Duration::from_secs(15),
        async || {
            let trace = receiver.trace(TRACE_ID);
            trace.iter().any(|span| span.service == "safe-retries-edge")
                && trace
                    .iter()
                    .any(|span| span.service == "safe-retries-backend" && span.kind == SERVER)
                && trace.iter().any(|span| span.name == "debit")
                && trace.iter().any(|span| span.name == "finish")
        },
    )
    .await;
    let trace = receiver.trace(TRACE_ID);
    let edge = only(&trace, |span| span.service == "safe-retries-edge");
    assert_eq!(edge.kind, SERVER);
    assert_eq!(edge.parent_span_id, CALLERS_SPAN, "the caller's child");
    assert_eq!(edge.attribute("edge.handling"), Some("forwarded"));
    assert_eq!(edge.attribute("http.response.status_code"), Some("201"));
    let backend = only(&trace, |span| {
        span.service == "safe-retries-backend" && span.kind == SERVER
    });
    assert_eq!(backend.name, format!("POST {PAY_ROUTE}"));
    assert_eq!(backend.parent_span_id, edge.span_id, "the edge's child");
    let debit = only(&trace, |span| span.name == "debit");
    assert_eq!(debit.kind, CLIENT);
    let debit_parents = ancestors(debit, &trace);
    assert!(
        debit_parents.contains(&backend.span_id.as_str()),
        "the bank call is under the backend's span: {trace:#?}"
    );

    // The replay: a trace of its own, served by the edge.
    let before = stack.backend_requests(PAY_ROUTE).await;
    assert_eq!(stack.send(Via::Edge, &pay).await.status, 201);
    wait_for(
        "the replay's edge span",
        Duration::from_secs(15),
        async || {
            let spans = receiver.spans();
            edge_spans(&spans).len() == 2
        },
    )
    .await;
    let spans = receiver.spans();
    let replay = edge_spans(&spans)
        .into_iter()
        .find(|span| span.trace_id != TRACE_ID)
        .expect("the replay's edge span");
    assert_eq!(replay.parent_span_id, "", "a new trace");
    // Where the edge keeps no replies, the backend replays it.
    let handling = if edge_keeps_replies() {
        "replayed"
    } else {
        "forwarded"
    };
    assert_eq!(replay.attribute("edge.handling"), Some(handling));
    assert_eq!(
        stack.backend_requests(PAY_ROUTE).await,
        before + replays_forwarded(1)
    );
    assert_eq!(stack.debits().await.len(), 1, "one debit");

    // Refused at the edge (no key), with a traceparent it cannot read: traced, never refused
    // for the header.
    let refused = Call::pay(5, "unused", "elec-5", PAY_BODY)
        .without_header("idempotency-key")
        .with_header("traceparent", "00-not-a-trace-01");
    assert_eq!(stack.send(Via::Edge, &refused).await.status, 400);
    wait_for(
        "the refusal's edge span",
        Duration::from_secs(15),
        async || edge_spans(&receiver.spans()).len() == 3,
    )
    .await;
    let spans = receiver.spans();
    let refusal = edge_spans(&spans)
        .into_iter()
        .find(|span| span.attribute("edge.handling") == Some("refused"))
        .expect("the refusal's span");
    assert_eq!(
        refusal.parent_span_id, "",
        "a malformed traceparent starts a new trace"
    );
    assert_eq!(receiver.refused_bodies(), 0, "every export decoded");
    stack.stop().await;
}

/// The one span of `spans` that `matches`.
fn only(spans: &[ReceivedSpan], matches: impl Fn(&ReceivedSpan) -> bool) -> &ReceivedSpan {
    let found: Vec<&ReceivedSpan> = spans.iter().filter(|span| matches(span)).collect();
    assert_eq!(found.len(), 1, "{spans:#?}");
    found[0]
}

fn edge_spans(spans: &[ReceivedSpan]) -> Vec<&ReceivedSpan> {
    spans
        .iter()
        .filter(|span| span.service == "safe-retries-edge")
        .collect()
}

/// The ids of `span`'s parents within `trace`, nearest first.
fn ancestors<'t>(span: &'t ReceivedSpan, trace: &'t [ReceivedSpan]) -> Vec<&'t str> {
    let mut found = Vec::new();
    let mut current = span;
    while let Some(parent) = trace.iter().find(|s| s.span_id == current.parent_span_id) {
        found.push(parent.span_id.as_str());
        current = parent;
        if found.len() > trace.len() {
            break;
        }
    }
    found
}
