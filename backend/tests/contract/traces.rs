//! Traces with the real binary and a real OTLP/HTTP receiver (`test_harness::OtlpReceiver`): a
//! payment that came with a W3C `traceparent` is one trace, whose server span is the caller's
//! child and whose checks, claim, bank call (a client span) and save are the server span's
//! descendants; the bank call carries the trace on to the bank (read off the wire by a
//! recording hop in front of the bank simulator); the audit trail's events carry the trace id.
//! The replay is a trace of its own, served from memory, with no claim and no bank call. The
//! log level (`RUST_LOG=warn`) does not thin the trace. Without an endpoint nothing is sent:
//! the unit tests of `telemetry::traces`.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::response::IntoResponse;
use bank_simulator::{BankSimulator, Knobs};
use test_harness::{OtlpReceiver, ReceivedSpan};

use crate::support::process::{BackendEnv, BackendProcess};
use crate::support::{TestApp, TestDatabase, new_key, payment_body, wait_for};

const TRACE_ID: &str = "0af7651916cd43dd8448eb211c80319c";
const CALLERS_SPAN: &str = "b7ad6b7169203331";

#[tokio::test]
async fn a_payment_is_one_trace_from_the_callers_span_to_the_bank_and_its_replay_is_replied_from_memory()
 {
    let bank = BankSimulator::spawn(Knobs::default())
        .await
        .expect("the bank starts");
    let hop = RecordingHop::start(&bank.url).await;
    let receiver = OtlpReceiver::start().await;
    let database = TestDatabase::create().await;
    let mut env = BackendEnv::new(database.url(), &hop.url);
    env.extra = vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT".into(), receiver.endpoint()),
        ("OTEL_BSP_SCHEDULE_DELAY".into(), "50".into()),
        ("RUST_LOG".into(), "warn".into()),
    ];
    let backend = BackendProcess::start(&env).await;
    let http = reqwest::Client::new();
    let key = new_key();
    let pay = |traceparent: Option<String>| {
        let mut request = http
            .post(format!("{}/v1/bills/elec-3/pay", backend.url))
            .bearer_auth(TestApp::token(3))
            .header("Idempotency-Key", &key)
            .json(&payment_body(4_200));
        if let Some(traceparent) = traceparent {
            request = request.header("traceparent", traceparent);
        }
        request.send()
    };
    let first = pay(Some(format!("00-{TRACE_ID}-{CALLERS_SPAN}-01")));
    assert_eq!(first.await.expect("a reply").status(), 201);
    let replay = pay(None).await.expect("a reply");
    assert_eq!(replay.status(), 201);
    assert_eq!(replay.headers()["idempotent-replayed"], "true");

    wait_for(
        "the payment's save and the replay's server span",
        Duration::from_secs(10),
        async || {
            let spans = receiver.spans();
            spans.iter().any(|span| span.name == "finish")
                && spans.iter().filter(|span| span.kind == SERVER).count() == 2
        },
    )
    .await;
    let trace = receiver.trace(TRACE_ID);
    let names: Vec<&str> = trace.iter().map(|span| span.name.as_str()).collect();
    let server = one(&trace, "POST /v1/bills/{bill_id}/pay");
    assert_eq!(server.kind, SERVER);
    assert_eq!(server.parent_span_id, CALLERS_SPAN, "the caller's child");
    assert_eq!(server.service, "safe-retries-backend");
    // OpenTelemetry's HTTP server attributes, not tower-http's `method` and `uri`.
    for (attribute, value) in [
        ("http.request.method", "POST"),
        ("http.route", "/v1/bills/{bill_id}/pay"),
        ("url.path", "/v1/bills/elec-3/pay"),
        ("server.address", "127.0.0.1"),
        ("http.response.status_code", "201"),
    ] {
        assert_eq!(server.attribute(attribute), Some(value), "{attribute}");
    }
    assert!(server.attribute("server.port").is_some());
    for legacy in ["method", "uri", "version"] {
        assert_eq!(server.attribute(legacy), None, "{legacy}");
    }
    for step in ["checks", "claim_payment", "debit", "finish"] {
        let span = one(&trace, step);
        assert!(
            descends_from(span, server, &trace),
            "{step} is not under the server span: {names:?}"
        );
    }
    let debit = one(&trace, "debit");
    assert_eq!(debit.kind, CLIENT, "the bank call is a client span");
    assert_eq!(
        hop.traceparents(),
        vec![format!("00-{TRACE_ID}-{}-01", debit.span_id)],
        "the bank was called once, under the bank call's span"
    );
    assert_eq!(receiver.refused_bodies(), 0);

    let replay_trace: Vec<ReceivedSpan> = receiver
        .spans()
        .into_iter()
        .filter(|span| span.trace_id != TRACE_ID)
        .collect();
    let replay_server = replay_trace
        .iter()
        .find(|span| span.kind == SERVER)
        .expect("the replay's server span");
    assert_eq!(replay_server.parent_span_id, "", "a trace of its own");
    let pay_bill = one(&replay_trace, "pay_bill");
    assert_eq!(pay_bill.attribute("replay.replied_from"), Some("memory"));
    for absent in ["claim_payment", "debit", "finish"] {
        assert!(
            replay_trace.iter().all(|span| span.name != absent),
            "the replay did {absent}"
        );
    }

    let pool = sqlx::PgPool::connect(database.url())
        .await
        .expect("connect");
    let recorded: Vec<(String, Option<Vec<u8>>)> =
        sqlx::query_as("SELECT event::text, trace_id FROM key_trail ORDER BY event_id")
            .fetch_all(&pool)
            .await
            .expect("the trail");
    let first_request: Vec<&(String, Option<Vec<u8>>)> = recorded
        .iter()
        .filter(|(event, _)| event == "claimed" || event == "bank_answered")
        .collect();
    assert_eq!(first_request.len(), 2, "{recorded:?}");
    for (event, trace_id) in first_request {
        assert_eq!(
            trace_id.as_deref().map(hex),
            Some(TRACE_ID.to_owned()),
            "{event}"
        );
    }
    assert_eq!(bank.simulator.ledger().debits.len(), 1, "one debit");
}

const SERVER: i32 = 2;
const CLIENT: i32 = 3;

/// The one span named `name`.
fn one<'t>(spans: &'t [ReceivedSpan], name: &str) -> &'t ReceivedSpan {
    let named: Vec<&ReceivedSpan> = spans.iter().filter(|span| span.name == name).collect();
    assert_eq!(named.len(), 1, "spans named {name}: {spans:#?}");
    named[0]
}

/// Whether `span`'s chain of parents within `trace` reaches `ancestor`.
fn descends_from(span: &ReceivedSpan, ancestor: &ReceivedSpan, trace: &[ReceivedSpan]) -> bool {
    let mut current = span;
    for _ in 0..trace.len() {
        if current.parent_span_id == ancestor.span_id {
            return true;
        }
        match trace.iter().find(|s| s.span_id == current.parent_span_id) {
            Some(parent) => current = parent,
            None => return false,
        }
    }
    false
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// A hop in front of the bank simulator that notes the `traceparent` of every money-moving
/// call (`POST`) and passes every request on unchanged: the wire, as the bank sees it.
struct RecordingHop {
    url: String,
    seen: Arc<Mutex<Vec<String>>>,
}

#[derive(Clone)]
struct Hop {
    bank_url: String,
    http: reqwest::Client,
    seen: Arc<Mutex<Vec<String>>>,
}

impl RecordingHop {
    async fn start(bank_url: &str) -> RecordingHop {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the hop");
        let url = format!("http://{}", listener.local_addr().expect("an address"));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let hop = Hop {
            bank_url: bank_url.to_owned(),
            http: reqwest::Client::new(),
            seen: Arc::clone(&seen),
        };
        let app = Router::new().fallback(pass_on).with_state(hop);
        tokio::spawn(async move { axum::serve(listener, app).await });
        RecordingHop { url, seen }
    }

    fn traceparents(&self) -> Vec<String> {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

async fn pass_on(State(hop): State<Hop>, request: Request) -> impl IntoResponse {
    let (parts, body) = request.into_parts();
    if parts.method == axum::http::Method::POST {
        let traceparent = parts.headers.get("traceparent");
        let text = traceparent.and_then(|value| value.to_str().ok());
        let mut seen = hop.seen.lock().unwrap_or_else(PoisonError::into_inner);
        seen.push(text.unwrap_or("(none)").to_owned());
    }
    let body = axum::body::to_bytes(body, 1 << 20).await.expect("a body");
    let url = format!("{}{}", hop.bank_url, parts.uri);
    let reply = hop
        .http
        .request(parts.method, url)
        .headers(parts.headers)
        .body(body)
        .send()
        .await
        .expect("the bank replies");
    let status = reply.status();
    let headers = reply.headers().clone();
    (
        status,
        headers,
        reply.bytes().await.expect("the bank's body"),
    )
}
