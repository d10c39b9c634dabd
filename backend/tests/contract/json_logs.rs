//! `LOG_FORMAT=json` with the real binary: every line the process writes to its log is one JSON
//! object; a payment's access line is at `info` with the method, route template, status,
//! duration, whether it was a replay and its request id, inside the request's span, which
//! carries the trace id of the `traceparent` it came with (or a minted one without it); the
//! request id is the one the audit trail records. The trace exporter is on (to a receiver), so
//! its layer is shown not to take the spans from the log lines.

use std::time::Duration;

use serde_json::Value;

use crate::support::process::{BackendEnv, BackendProcess};
use crate::support::{TestApp, TestDatabase, new_key, payment_body, wait_for};
use bank_simulator::{BankSimulator, Knobs};

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

#[tokio::test]
async fn json_lines_carry_the_request_id_and_trace_id_and_the_access_log_is_at_info() {
    let bank = BankSimulator::spawn(Knobs::default())
        .await
        .expect("the bank starts");
    let database = TestDatabase::create().await;
    // With the trace exporter on, as production runs: its layer once cost the log lines their
    // spans (telemetry::init).
    let receiver = test_harness::OtlpReceiver::start().await;
    let mut env = BackendEnv::new(database.url(), &bank.url);
    env.extra = vec![
        ("LOG_FORMAT".into(), "json".into()),
        ("OTEL_EXPORTER_OTLP_ENDPOINT".into(), receiver.endpoint()),
    ];
    let backend = BackendProcess::start(&env).await;
    let http = reqwest::Client::new();
    let key = new_key();
    let pay = |request_id: &'static str, traceparent: Option<String>| {
        let mut request = http
            .post(format!("{}/v1/bills/elec-9/pay", backend.url))
            .bearer_auth(TestApp::token(9))
            .header("Idempotency-Key", &key)
            .header("X-Request-Id", request_id)
            .json(&payment_body(2_500));
        if let Some(traceparent) = traceparent {
            request = request.header("traceparent", traceparent);
        }
        request.send()
    };
    let first = pay(
        "first-attempt",
        Some(format!("00-{TRACE_ID}-00f067aa0ba902b7-01")),
    );
    assert_eq!(first.await.expect("a reply").status(), 201);
    assert_eq!(pay("the-retry", None).await.expect("a reply").status(), 201);

    // The log reaches the test through a pipe read in the background: wait for the last line.
    wait_for(
        "the retry's access line",
        Duration::from_secs(5),
        async || backend.log().contains(r#""request_id":"the-retry""#),
    )
    .await;
    let log = backend.log();
    let lines: Vec<Value> = log
        .lines()
        .filter(|line| !line.starts_with("backend ") && !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}")))
        .collect();
    let access = |request_id: &str| {
        lines
            .iter()
            .find(|line| line["target"] == "access" && line["request_id"] == request_id)
            .unwrap_or_else(|| panic!("no access line for {request_id} in\n{log}"))
            .clone()
    };
    let first = access("first-attempt");
    assert_eq!(first["level"], "INFO");
    assert_eq!(first["method"], "POST");
    assert_eq!(first["route"], "/v1/bills/{bill_id}/pay");
    assert_eq!(first["status"], 201);
    assert_eq!(first["replayed"], false);
    assert!(
        first["duration_ms"].as_f64().is_some_and(|ms| ms > 0.0),
        "{first}"
    );
    assert_eq!(span_field(&first, "request_id"), "first-attempt");
    assert_eq!(span_field(&first, "trace_id"), TRACE_ID);

    let retry = access("the-retry");
    assert_eq!(retry["replayed"], true);
    let minted = span_field(&retry, "trace_id");
    assert!(minted.len() == 32 && minted != TRACE_ID, "{retry}");

    let pool = sqlx::PgPool::connect(database.url())
        .await
        .expect("connect");
    let recorded: String =
        sqlx::query_scalar("SELECT request_id_text FROM key_trail WHERE event = 'claimed'")
            .fetch_one(&pool)
            .await
            .expect("the claim's event");
    assert_eq!(
        recorded, "first-attempt",
        "the trail's request id is the log's"
    );
}

/// `field` of the request span a JSON line lists.
fn span_field(line: &Value, field: &str) -> String {
    line["spans"]
        .as_array()
        .and_then(|spans| spans.iter().find(|span| span["name"] == "request"))
        .and_then(|span| span[field].as_str())
        .unwrap_or_else(|| panic!("no request span with {field} in {line}"))
        .to_owned()
}
