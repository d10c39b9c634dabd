//! The edge counts every request in its Workers Analytics Engine dataset (`EDGE_REQUESTS`,
//! `edge/src/trace/request_point.rs`): under the real runtime, a mix of requests the edge
//! refuses itself (no token, a malformed key, a repeat in flight, a changed body, an operator
//! route), forwards and replays leaves exactly one point each, naming how it was handled, its
//! status, method and operation: the numbers the dashboard's edge panels sum. No point holds
//! the user, the key, the token or a byte of the body. The dataset is the harness's stand-in,
//! which prints each point (`tests/harness/src/analytics_engine_sink.js`).
#![cfg(not(target_arch = "wasm32"))]

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;
use support::{Call, Stack, StackOptions, Via, edge_keeps_replies};
use test_harness::wait_for;

const PAY_BODY: &str = r#"{"amount_paise":230000,"payer_vpa":"asha@okbank"}"#;
const CHANGED_BODY: &str = r#"{"amount_paise":230001,"payer_vpa":"asha@okbank"}"#;

/// A point's blobs joined with spaces: `handling status method operation`.
fn summary(point: &Value) -> String {
    let blobs = point["blobs"].as_array().expect("blobs");
    let blobs: Vec<&str> = blobs
        .iter()
        .map(|blob| blob.as_str().expect("text"))
        .collect();
    blobs.join(" ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_is_one_point_naming_how_it_was_handled_and_nothing_of_who_sent_it() {
    let stack = Stack::start(StackOptions {
        bank_latency_ms: 1000,
        ..StackOptions::default()
    })
    .await;
    let key = uuid::Uuid::new_v4().to_string();
    let pay = Call::pay(7, &key, "elec-42", PAY_BODY);

    let (first, in_flight) = tokio::join!(stack.send(Via::Edge, &pay), async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        stack.send(Via::Edge, &pay).await
    });
    let statuses = [
        first.status,
        in_flight.status,
        stack.send(Via::Edge, &pay).await.status,
        (stack
            .send(Via::Edge, &Call::pay(7, &key, "elec-42", CHANGED_BODY))
            .await)
            .status,
        (stack
            .send(Via::Edge, &pay.clone().without_header("authorization"))
            .await)
            .status,
        (stack
            .send(
                Via::Edge,
                &pay.clone().with_header("idempotency-key", "order-1"),
            )
            .await)
            .status,
        stack
            .send(Via::Edge, &Call::get("/healthz", None))
            .await
            .status,
        stack
            .send(Via::Edge, &Call::get("/metrics", None))
            .await
            .status,
    ];
    assert_eq!(statuses, [201, 409, 201, 422, 401, 400, 200, 404]);

    let repeat = if edge_keeps_replies() {
        "replayed"
    } else {
        "forwarded"
    };
    let mut expected: BTreeMap<String, usize> = BTreeMap::new();
    for point in [
        "forwarded 201 POST pay_bill",
        "refused 409 POST pay_bill",
        &format!("{repeat} 201 POST pay_bill"),
        "refused 422 POST pay_bill",
        "refused 401 POST pay_bill",
        "refused 400 POST pay_bill",
        "forwarded 200 GET other",
        "refused 404 GET other",
    ] {
        *expected.entry(point.to_owned()).or_default() += 1;
    }
    wait_for(
        "a point for each of the eight requests",
        Duration::from_secs(5),
        async || stack.request_points().len() >= 8,
    )
    .await;
    let points = stack.request_points();
    let mut counted: BTreeMap<String, usize> = BTreeMap::new();
    for point in &points {
        *counted.entry(summary(point)).or_default() += 1;
        let handling = point["blobs"][0].clone();
        assert_eq!(point["indexes"], Value::Array(vec![handling]), "{point}");
    }
    assert_eq!(counted, expected, "one point per request: {points:?}");

    assert_eq!(
        test_harness::workerd::REQUESTS_DATASET,
        edge::trace::REQUESTS_DATASET,
        "the stand-in's dataset is the one the dashboard reads"
    );
    let written = serde_json::to_string(&points).expect("JSON");
    let token = Stack::token(7);
    for private in [key.as_str(), "elec-42", "asha", "230000", token.as_str()] {
        assert!(!written.contains(private), "{private} in {written}");
    }
}
