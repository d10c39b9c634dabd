//! Test doubles for the client loop: a clock that advances only when slept on (so a ten-minute
//! deadline passes instantly), scripted jitter, a transport that replies from a script and
//! records what it was sent (with the `Prefer: wait` and the trace of each request), and a
//! temporary directory for the store.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use shared::retry::{PendingAction, ReplyClass, classify_status};
use shared::trace_context::TraceId;
use shared::{IdempotencyKey, Operation, UserId};
use time::OffsetDateTime;

use crate::clock::Clock;
use crate::events::Event;
use crate::jitter::Jitter;
use crate::transport::{Reply, SendError, Transport};

/// A user id.
pub fn user(id: u64) -> UserId {
    UserId::numbered(id)
}

/// A payment body.
pub fn pay_body(amount_paise: u64) -> Value {
    json!({"amount_paise": amount_paise, "payer_vpa": "asha@okbank"})
}

/// A new payment action for bill `elec-1`.
pub fn pay_action(amount_paise: u64) -> PendingAction {
    PendingAction::start(Operation::PayBill, "elec-1", &pay_body(amount_paise))
}

/// A directory under the system's temporary directory, removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    /// A fresh, not yet existing directory path.
    pub fn new() -> TempDir {
        TempDir(std::env::temp_dir().join(format!("client-test-{}", IdempotencyKey::mint())))
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Virtual time: `sleep` moves it forward and returns at once.
pub struct FakeClock {
    now: Mutex<OffsetDateTime>,
}

impl Default for FakeClock {
    fn default() -> Self {
        let start = OffsetDateTime::from_unix_timestamp(1_800_000_000).expect("valid time");
        FakeClock {
            now: Mutex::new(start),
        }
    }
}

impl FakeClock {
    /// Moves the clock to `at`.
    pub fn set(&self, at: OffsetDateTime) {
        *self.now.lock().expect("clock lock") = at;
    }
}

impl Clock for FakeClock {
    fn now(&self) -> OffsetDateTime {
        *self.now.lock().expect("clock lock")
    }

    // Lazy: time moves only if the sleep is actually awaited (a timeout that loses its race to
    // a reply does not advance the clock).
    async fn sleep(&self, wait: Duration) {
        *self.now.lock().expect("clock lock") += wait;
    }
}

/// The same draw every time.
pub struct FixedJitter(pub f64);

impl Jitter for FixedJitter {
    fn unit(&self) -> f64 {
        self.0
    }
}

/// One scripted reply.
#[derive(Debug, Clone)]
pub enum Step {
    /// This reply.
    Reply(Reply),
    /// Never replies: the client's timeout fires.
    NoReply,
    /// The connection fails.
    NetworkError,
}

impl Step {
    /// A reply with this status and an empty JSON object.
    pub fn status(status: u16) -> Step {
        Step::Reply(Reply {
            status,
            retry_after: None,
            replayed: false,
            wait_applied: None,
            body: json!({}),
        })
    }

    /// The same reply with `Retry-After: seconds`.
    pub fn retry_after(self, seconds: u64) -> Step {
        match self {
            Step::Reply(reply) => Step::Reply(Reply {
                retry_after: Some(Duration::from_secs(seconds)),
                ..reply
            }),
            other => other,
        }
    }

    /// The same reply with `Preference-Applied: wait=seconds`: the server held the request up
    /// to that long for the key's first attempt. A final reply after the wait is that
    /// attempt's, so it is marked replayed.
    pub fn after_waiting(self, seconds: u64) -> Step {
        match self {
            Step::Reply(reply) => Step::Reply(Reply {
                replayed: reply.replayed || classify_status(reply.status) == ReplyClass::Final,
                wait_applied: Some(Duration::from_secs(seconds)),
                ..reply
            }),
            other => other,
        }
    }

    /// A status look-up reply: the key is done with `status`.
    pub fn done(status: u16) -> Step {
        Step::body(
            json!({"state": "done", "operation": "pay_bill", "status": status,
                          "reply": {"status": status}, "expires_at": "2027-01-17T08:00:00Z"}),
        )
    }

    /// A status look-up reply: the key is in `state` (`started` or `unknown`).
    pub fn state(state: &str) -> Step {
        Step::body(
            json!({"state": state, "operation": "pay_bill", "expires_at": "2027-01-17T08:00:00Z"}),
        )
    }

    fn body(body: Value) -> Step {
        Step::Reply(Reply {
            status: 200,
            retry_after: None,
            replayed: false,
            wait_applied: None,
            body,
        })
    }
}

/// A transport that replies to sends and look-ups from scripts, then from a default each.
pub struct ScriptedTransport {
    sends: Mutex<Script>,
    look_ups: Mutex<Script>,
    sent: Mutex<Vec<(IdempotencyKey, Vec<u8>)>>,
    send_waits: Mutex<Vec<Option<Duration>>>,
    look_up_waits: Mutex<Vec<Option<Duration>>>,
    traces: Mutex<Vec<TraceId>>,
}

struct Script {
    steps: VecDeque<Step>,
    otherwise: Step,
}

impl Script {
    fn next(&mut self) -> Step {
        self.steps
            .pop_front()
            .unwrap_or_else(|| self.otherwise.clone())
    }
}

impl ScriptedTransport {
    /// Sends get `steps`, then never; look-ups with 503.
    pub fn replying(steps: impl IntoIterator<Item = Step>) -> ScriptedTransport {
        ScriptedTransport {
            sends: Mutex::new(Script {
                steps: steps.into_iter().collect(),
                otherwise: Step::NoReply,
            }),
            look_ups: Mutex::new(Script {
                steps: VecDeque::new(),
                otherwise: Step::status(503),
            }),
            sent: Mutex::new(Vec::new()),
            send_waits: Mutex::new(Vec::new()),
            look_up_waits: Mutex::new(Vec::new()),
            traces: Mutex::new(Vec::new()),
        }
    }

    /// Sends past the script get `step`.
    pub fn reply_by_default(&self, step: Step) {
        self.sends.lock().expect("lock").otherwise = step;
    }

    /// Look-ups get `steps` first.
    pub fn reply_look_ups(&self, steps: impl IntoIterator<Item = Step>) {
        self.look_ups.lock().expect("lock").steps = steps.into_iter().collect();
    }

    /// Look-ups past their script get `step`.
    pub fn reply_by_default_on_look_up(&self, step: Step) {
        self.look_ups.lock().expect("lock").otherwise = step;
    }

    /// The key and body bytes of every send, in order.
    pub fn sent(&self) -> Vec<(IdempotencyKey, Vec<u8>)> {
        self.sent.lock().expect("lock").clone()
    }

    /// The `Prefer: wait` of every send, in order.
    pub fn send_waits(&self) -> Vec<Option<Duration>> {
        self.send_waits.lock().expect("lock").clone()
    }

    /// The `Prefer: wait` of every look-up, in order.
    pub fn look_up_waits(&self) -> Vec<Option<Duration>> {
        self.look_up_waits.lock().expect("lock").clone()
    }

    /// The trace of every request, sends and look-ups alike, in order.
    pub fn traces(&self) -> Vec<TraceId> {
        self.traces.lock().expect("lock").clone()
    }

    /// How many look-ups were made.
    pub fn look_up_count(&self) -> usize {
        self.look_up_waits.lock().expect("lock").len()
    }
}

async fn play(step: Step) -> Result<Reply, SendError> {
    match step {
        Step::Reply(reply) => Ok(reply),
        Step::NoReply => std::future::pending().await,
        Step::NetworkError => Err(SendError("connection refused".to_owned())),
    }
}

impl Transport for ScriptedTransport {
    fn send(
        &self,
        action: &PendingAction,
        prefer_wait: Option<Duration>,
        trace: TraceId,
    ) -> impl Future<Output = Result<Reply, SendError>> + Send {
        self.traces.lock().expect("lock").push(trace);
        self.sent
            .lock()
            .expect("lock")
            .push((action.key().clone(), action.body().to_vec()));
        self.send_waits.lock().expect("lock").push(prefer_wait);
        play(self.sends.lock().expect("lock").next())
    }

    fn look_up(
        &self,
        _key: &IdempotencyKey,
        prefer_wait: Option<Duration>,
        trace: TraceId,
    ) -> impl Future<Output = Result<Reply, SendError>> + Send {
        self.traces.lock().expect("lock").push(trace);
        self.look_up_waits.lock().expect("lock").push(prefer_wait);
        play(self.look_ups.lock().expect("lock").next())
    }
}

/// A report callback that keeps every event.
pub fn collect_events() -> (Arc<Mutex<Vec<Event>>>, impl Fn(&Event) + Send + Sync) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&events);
    (events, move |event: &Event| {
        kept.lock().expect("lock").push(event.clone());
    })
}

/// The waits among collected events.
pub fn waits(events: &Mutex<Vec<Event>>) -> Vec<Duration> {
    events
        .lock()
        .expect("lock")
        .iter()
        .filter_map(|event| match event {
            Event::Waiting { wait, .. } => Some(*wait),
            _ => None,
        })
        .collect()
}
