//! The client rules' test vectors (`shared/vectors/client-rules.json`) run through this client's
//! real loop, [`PaymentsClient::run`]: each case's replies are played by a transport that also
//! moves the clock to the case's time, the jitter draws the case's units, and the moves the loop
//! makes (its waits, its `Prefer` header, send or look-up, how it ends and whether the action
//! stays saved) must be the vectors' moves. The TypeScript package runs the same file.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use shared::IdempotencyKey;
use shared::retry::{ClientRules, PendingAction, RetrySchedule, parse_retry_after};
use shared::trace_context::TraceId;
use time::OffsetDateTime;

use crate::action_result::ActionResult;
use crate::action_store::{ActionStore, SavedAction};
use crate::clock::Clock;
use crate::events::Event;
use crate::file_store::FileStore;
use crate::http_transport::retry_after;
use crate::jitter::Jitter;
use crate::payments_client::PaymentsClient;
use crate::test_support::{FakeClock, TempDir, collect_events, pay_action, user};
use crate::transport::{Reply, SendError, Transport};

const VECTORS: &str = include_str!("../../shared/vectors/client-rules.json");

/// Plays a case's replies in order, to sends and look-ups alike, each at its time.
struct VectorTransport {
    replies: Mutex<VecDeque<(Value, u64)>>,
    clock: Arc<FakeClock>,
    started: OffsetDateTime,
    prefer_waits: Mutex<Vec<Option<Duration>>>,
}

impl VectorTransport {
    fn reply(&self, prefer_wait: Option<Duration>) -> Result<Reply, SendError> {
        self.prefer_waits.lock().expect("lock").push(prefer_wait);
        let (seen, at_ms) = self
            .replies
            .lock()
            .expect("lock")
            .pop_front()
            .expect("the loop made no more requests than the case has replies");
        self.clock.set(self.started + Duration::from_millis(at_ms));
        if seen.get("no_reply").is_some() {
            return Err(SendError("the vector's reply was lost".to_owned()));
        }
        let body = seen["body"].as_str().map_or(Value::Null, |text| {
            serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
        });
        Ok(Reply {
            status: u16::try_from(seen["status"].as_u64().expect("a status")).expect("u16"),
            retry_after: seen["retry_after"].as_str().and_then(parse_retry_after),
            replayed: false,
            wait_applied: None,
            body,
        })
    }
}

impl Transport for VectorTransport {
    fn send(
        &self,
        _action: &PendingAction,
        prefer_wait: Option<Duration>,
        _trace: TraceId,
    ) -> impl Future<Output = Result<Reply, SendError>> + Send {
        std::future::ready(self.reply(prefer_wait))
    }

    fn look_up(
        &self,
        _key: &IdempotencyKey,
        prefer_wait: Option<Duration>,
        _trace: TraceId,
    ) -> impl Future<Output = Result<Reply, SendError>> + Send {
        std::future::ready(self.reply(prefer_wait))
    }
}

/// The case's units, one per reply.
struct VectorJitter(Mutex<VecDeque<f64>>);

impl Jitter for VectorJitter {
    fn unit(&self) -> f64 {
        self.0
            .lock()
            .expect("lock")
            .pop_front()
            .expect("a unit per reply")
    }
}

fn duration(ms: &Value) -> Duration {
    Duration::from_secs_f64(ms.as_f64().expect("milliseconds") / 1000.0)
}

fn rules(json: &Value) -> ClientRules {
    ClientRules {
        schedule: RetrySchedule {
            base: duration(&json["base_ms"]),
            cap: duration(&json["cap_ms"]),
            deadline: duration(&json["deadline_ms"]),
        },
        attempt_timeout: duration(&json["attempt_timeout_ms"]),
        prefer_wait: (!json["prefer_wait_ms"].is_null()).then(|| duration(&json["prefer_wait_ms"])),
        max_attempts: u32::try_from(json["max_attempts"].as_u64().expect("count")).expect("u32"),
        status_look_ups: u32::try_from(json["status_look_ups"].as_u64().expect("count"))
            .expect("u32"),
    }
}

/// A move as the vectors write it, the wait in ms to the microsecond.
fn request_move(kind: &str, wait: Duration, prefer_wait: Option<Duration>) -> Value {
    let headers = match prefer_wait {
        Some(wait) => json!({"Prefer": format!("wait={}", wait.as_secs())}),
        None => json!({}),
    };
    let after_ms = (wait.as_nanos() as f64 / 1_000.0).round() / 1_000.0;
    json!({kind: {"after_ms": after_ms, "headers": headers}})
}

/// The moves the loop made, read off its events and the transport's requests.
fn moves_made(events: &[Event], prefer_waits: &[Option<Duration>]) -> Vec<Value> {
    let mut moves = Vec::new();
    let mut wait = Duration::ZERO;
    let mut requests = prefer_waits.iter();
    for event in events {
        match event {
            Event::Waiting { wait: waited, .. } => wait = *waited,
            Event::Sending { .. } | Event::CheckingStatus { .. } => {
                let kind = if matches!(event, Event::Sending { .. }) {
                    "send"
                } else {
                    "look_up"
                };
                let prefer_wait = *requests.next().expect("a request per move");
                moves.push(request_move(kind, wait, prefer_wait));
                wait = Duration::ZERO;
            }
            _ => {}
        }
    }
    moves
}

fn ending(result: &ActionResult) -> Value {
    match result {
        ActionResult::Replied(reply) => json!({
            "ending": "replied", "status": reply.status, "from_look_up": reply.from_status_look_up,
        }),
        ActionResult::NotReceived => json!({"ending": "not_received"}),
        ActionResult::SignInRequired => json!({"ending": "sign_in_required"}),
        ActionResult::Unsettled(why) => {
            let why = format!("{why:?}").to_lowercase();
            json!({"ending": "unsettled", "why": why})
        }
    }
}

fn same_move(made: &Value, expected: &Value) -> bool {
    let close = |a: &Value, b: &Value| {
        (a.as_f64().unwrap_or(f64::NAN) - b.as_f64().unwrap_or(f64::NAN)).abs() <= 0.001
    };
    ["send", "look_up"].iter().any(|kind| {
        made.get(kind).is_some_and(|made| {
            expected.get(kind).is_some_and(|expected| {
                close(&made["after_ms"], &expected["after_ms"])
                    && made["headers"] == expected["headers"]
            })
        })
    })
}

async fn run_case(case: &Value) {
    let name = case["name"].as_str().expect("a name");
    let dir = TempDir::new();
    let store = FileStore::open(dir.path()).expect("opens");
    let clock = Arc::new(FakeClock::default());
    let started = clock.now() - Duration::from_millis(case["starts_at_ms"].as_u64().expect("ms"));
    let saved = SavedAction::new(user(7), pay_action(230_000), started);
    store.save(&saved).expect("saves");
    let steps = case["steps"].as_array().expect("steps");
    let transport = Arc::new(VectorTransport {
        replies: Mutex::new(
            steps
                .iter()
                .map(|step| (step["seen"].clone(), step["at_ms"].as_u64().expect("ms")))
                .collect(),
        ),
        clock: Arc::clone(&clock),
        started,
        prefer_waits: Mutex::new(Vec::new()),
    });
    let jitter = VectorJitter(Mutex::new(
        steps
            .iter()
            .map(|step| step["unit"].as_f64().expect("unit"))
            .collect(),
    ));
    let (events, report) = collect_events();
    let completion = PaymentsClient::new(
        user(7),
        Arc::clone(&transport),
        store.clone(),
        rules(&case["rules"]),
    )
    .with_clock(Arc::clone(&clock))
    .with_jitter(jitter)
    .run(&saved, &report)
    .await;

    let expected: Vec<&Value> = std::iter::once(&case["first"])
        .chain(steps.iter().map(|step| &step["next"]))
        .collect();
    let (stop, requests) = expected.split_last().expect("a stop");
    let made = moves_made(
        &events.lock().expect("events"),
        &transport.prefer_waits.lock().expect("lock"),
    );
    assert_eq!(
        made.len(),
        requests.len(),
        "{name}: moves {made:?}, expected {requests:?}"
    );
    for (made, expected) in made.iter().zip(requests) {
        assert!(
            same_move(made, expected),
            "{name}: made {made}, expected {expected}"
        );
    }
    let mut expected_stop = stop["stop"].clone();
    let keep_action = expected_stop
        .as_object_mut()
        .expect("a stop")
        .remove("keep_action")
        .expect("keep_action");
    assert_eq!(ending(&completion.result), expected_stop, "{name}");
    let kept = !store.load_all().expect("loads").is_empty();
    assert_eq!(
        json!(kept),
        keep_action,
        "{name}: the action kept in the store"
    );
}

#[tokio::test]
async fn the_client_makes_every_vectors_moves() {
    let vectors: Value = serde_json::from_str(VECTORS).expect("the vectors parse");
    let cases = vectors["cases"].as_array().expect("cases");
    assert!(cases.len() >= 20, "the vectors lost their cases");
    for case in cases {
        run_case(case).await;
    }
}

#[test]
fn the_http_transport_reads_retry_after_as_the_vectors_say() {
    let vectors: Value = serde_json::from_str(VECTORS).expect("the vectors parse");
    for entry in vectors["retry_after"].as_array().expect("retry_after") {
        let value = entry["value"].as_str().expect("a value");
        let mut headers = reqwest::header::HeaderMap::new();
        let header = reqwest::header::HeaderValue::from_str(value).expect("a header value");
        headers.insert(reqwest::header::RETRY_AFTER, header);
        let seconds = retry_after(&headers).map(|wait| wait.as_secs());
        assert_eq!(json!(seconds), entry["seconds"], "{value:?}");
    }
}
