//! The soak's population: phones that keep paying bills (and sometimes refunding part of a
//! payment, sometimes asking for more back than remains) until the soak's time is up.
//!
//! Each user action pays a bill of its own (`soak-{user}-{n}`), so the audit can tell one
//! action's money from another's. The phones are the rule-following client library
//! ([`payments_client::PaymentsClient`]: one key per action saved before the first send, backoff,
//! `Retry-After`, `Prefer: wait`, a status look-up at the deadline); or, to show that the audit
//! catches a double charge, the broken client the article warns about
//! ([`ClientKind::KeyPerRetry`]: a new key on every retry).
//!
//! Every request either client sends goes into the history ([`Tally::history`]) as it went
//! over the wire: the library's through [`RecordingTransport`], the broken client's directly.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::Context;
use payments_client::{
    ActionResult, ClientRules, Event, FileStore, HttpTransport, KEY_HEADER, PaymentsClient, Reply,
    RetrySchedule, SendError, Transport, Unsettled,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use shared::api::{Paise, PayBillRequest, RefundRequest};
use shared::retry::PendingAction;
use shared::trace_context::TraceId;
use shared::{IdempotencyKey, Operation, UserId};

use crate::history::{Call, HistoryOp, RecordedReply};

/// Which client the phones run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ClientKind {
    /// The client library: every rule followed.
    RuleFollowing,
    /// A new key on every retry: the broken client, to show the audit fails.
    KeyPerRetry,
}

/// How one action ended, as the phone saw it.
#[derive(Debug, Clone, PartialEq)]
pub enum Ending {
    /// A final reply: its status and body.
    Final {
        /// The status.
        status: u16,
        /// The body.
        body: Value,
    },
    /// Past its deadline the status look-up said nothing was charged (released, or no record).
    NothingCharged,
    /// No final reply and none from the look-up either.
    Unresolved(String),
}

/// One user action and what happened to it.
#[derive(Debug, Clone)]
pub struct ActionRecord {
    /// The user.
    pub user: u64,
    /// `pay` or `refund`.
    pub operation: Operation,
    /// The bill (`pay`) or the payment (`refund`) it was for.
    pub target: String,
    /// The amount asked for.
    pub amount_paise: u64,
    /// The action's key, when the client library kept one (and can resume it).
    pub key: Option<String>,
    /// Its ending.
    pub ending: Ending,
    /// Attempts sent.
    pub attempts: u32,
    /// How long it took to its ending.
    pub took: Duration,
    /// What the phone saw, in order: the events around a violation.
    pub events: Vec<String>,
}

/// What every phone reports into.
#[derive(Debug, Default)]
pub struct Tally {
    /// Every finished action.
    pub actions: Vec<ActionRecord>,
    /// Replies by status, over every attempt.
    pub statuses: std::collections::BTreeMap<u16, u64>,
    /// Replies marked `Idempotent-Replayed`.
    pub replays: u64,
    /// Attempts that got no reply (timeout, connection refused or cut).
    pub no_replies: u64,
    /// Actions without an ending at their deadline, resumed once the system settled.
    pub resumed: u64,
    /// Every attempt's reply as it came: when, and its status (`None`: no reply).
    pub replies: Vec<(Instant, Option<u16>)>,
    /// Every request either client sent, as it went over the wire, in the order they ended.
    pub history: Vec<HistoryOp>,
}

impl Tally {
    fn replied(&mut self, status: u16) {
        *self.statuses.entry(status).or_default() += 1;
        self.replies.push((Instant::now(), Some(status)));
    }

    fn not_replied(&mut self) {
        self.no_replies += 1;
        self.replies.push((Instant::now(), None));
    }
}

/// Shared by all phones.
#[derive(Clone)]
pub struct Population {
    /// Where the phones send requests.
    pub api_url: String,
    /// The token secret.
    pub secret: String,
    /// The client that runs.
    pub client: ClientKind,
    /// Where the library saves actions.
    pub store: FileStore,
    /// What they report.
    pub tally: Arc<Mutex<Tally>>,
    /// The pool of connections.
    pub http: reqwest::Client,
}

/// The library phones' settings: a short attempt timeout and deadline, so an action ends (or
/// is looked up) well within a soak; `Prefer: wait` as the library sets it for that timeout.
fn client_config() -> ClientRules {
    let attempt_timeout = Duration::from_secs(8);
    ClientRules {
        schedule: RetrySchedule {
            base: Duration::from_millis(200),
            cap: Duration::from_secs(4),
            deadline: Duration::from_secs(45),
        },
        attempt_timeout,
        prefer_wait: ClientRules::default_prefer_wait(attempt_timeout),
        ..ClientRules::default()
    }
}

impl Population {
    /// User `user`'s phone: actions one after another until `calling` is lowered.
    pub async fn phone(
        self,
        user: u64,
        seed: u64,
        calling: Arc<std::sync::atomic::AtomicBool>,
    ) -> anyhow::Result<()> {
        let mut random = StdRng::seed_from_u64(seed ^ user.rotate_left(17));
        let mut action = 0;
        while calling.load(std::sync::atomic::Ordering::SeqCst) {
            action += 1;
            let bill = format!("soak-{user}-{action}");
            let amount = random.random_range(100..=100_000);
            let body = json!({ "amount_paise": amount, "payer_vpa": format!("user{user}@okbank") });
            let paid = self
                .act(user, Operation::PayBill, &bill, amount, &body)
                .await?;
            if let Some(payment_id) = paid.filter(|_| random.random_bool(0.3)) {
                let half = (amount / 2).max(1);
                self.act(
                    user,
                    Operation::RefundPayment,
                    &payment_id,
                    half,
                    &json!({ "amount_paise": half }),
                )
                .await?;
                if random.random_bool(0.5) {
                    // More than remains: must be refused, never paid out.
                    let too_much = amount - half + 1;
                    self.act(
                        user,
                        Operation::RefundPayment,
                        &payment_id,
                        too_much,
                        &json!({ "amount_paise": too_much }),
                    )
                    .await?;
                }
            }
            tokio::time::sleep(Duration::from_millis(random.random_range(0..300))).await;
        }
        Ok(())
    }

    /// One action to its ending, recorded; the payment's id when it was paid.
    async fn act(
        &self,
        user: u64,
        operation: Operation,
        target: &str,
        amount_paise: u64,
        body: &Value,
    ) -> anyhow::Result<Option<String>> {
        let started = Instant::now();
        let (ending, attempts, events, key) = match self.client {
            ClientKind::RuleFollowing => self.with_library(user, operation, target, body).await?,
            ClientKind::KeyPerRetry => {
                let (ending, attempts, events) = self
                    .with_new_key_per_retry(user, operation, target, body)
                    .await;
                (ending, attempts, events, None)
            }
        };
        let paid = match &ending {
            Ending::Final { status: 201, body } if operation == Operation::PayBill => {
                body["payment_id"].as_str().map(str::to_owned)
            }
            _ => None,
        };
        self.lock().actions.push(ActionRecord {
            user,
            operation,
            target: target.to_owned(),
            amount_paise,
            key,
            ending,
            attempts,
            took: started.elapsed(),
            events,
        });
        Ok(paid)
    }

    async fn with_library(
        &self,
        user: u64,
        operation: Operation,
        target: &str,
        body: &Value,
    ) -> anyhow::Result<(Ending, u32, Vec<String>, Option<String>)> {
        let phone = self.library_phone(user);
        let saved = match operation {
            Operation::PayBill => {
                let request: PayBillRequest = serde_json::from_value(body.clone())?;
                phone.begin(operation, target, &request).await?
            }
            Operation::RefundPayment => {
                let amount = body["amount_paise"].as_u64().and_then(Paise::new);
                let request = RefundRequest {
                    amount_paise: amount.context("a refund amount")?,
                };
                phone.begin(operation, target, &request).await?
            }
        };
        let events = Arc::new(Mutex::new(vec![format!("key {}", saved.key())]));
        let report = {
            let (events, tally) = (Arc::clone(&events), Arc::clone(&self.tally));
            move |event: &Event| {
                record_event(&tally, event);
                events
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(format!("{event:?}"));
            }
        };
        let completion = phone.run(&saved, &report).await;
        let events = events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let key = Some(saved.key().to_string());
        Ok((
            ending_of(completion.result),
            completion.attempts,
            events,
            key,
        ))
    }

    /// Resumes, user by user, every action the library left without an ending at its deadline,
    /// as the app does when it is opened again: the saved key and body, or past the deadline
    /// the status look-up. Their records get the new ending.
    pub async fn resume_unresolved(&self) -> anyhow::Result<()> {
        let users: std::collections::BTreeSet<u64> = self
            .lock()
            .actions
            .iter()
            .filter(|action| matches!(action.ending, Ending::Unresolved(_)) && action.key.is_some())
            .map(|action| action.user)
            .collect();
        for user in users {
            let phone = self.library_phone(user);
            for completion in phone.resume_all(&|_: &Event| {}).await? {
                let key = completion.key.to_string();
                let mut tally = self.lock();
                tally.resumed += 1;
                if let Some(action) = tally
                    .actions
                    .iter_mut()
                    .find(|action| action.key.as_deref() == Some(key.as_str()))
                {
                    action.ending = ending_of(completion.result);
                    let resumed = format!("resumed after settling: {:?}", action.ending);
                    action.events.push(resumed);
                }
            }
        }
        Ok(())
    }

    fn library_phone(&self, user: u64) -> PaymentsClient<RecordingTransport> {
        let user_id = UserId::numbered(user);
        let transport = RecordingTransport {
            http: HttpTransport::new(
                self.http.clone(),
                &self.api_url,
                &self.token(user_id.clone()),
            ),
            user,
            tally: Arc::clone(&self.tally),
        };
        PaymentsClient::new(user_id, transport, self.store.clone(), client_config())
    }

    /// The broken client: up to five attempts, each with a freshly minted key, no look-up.
    async fn with_new_key_per_retry(
        &self,
        user: u64,
        operation: Operation,
        target: &str,
        body: &Value,
    ) -> (Ending, u32, Vec<String>) {
        let path = match operation {
            Operation::PayBill => format!("/v1/bills/{target}/pay"),
            Operation::RefundPayment => format!("/v1/payments/{target}/refunds"),
        };
        let mut events = Vec::new();
        for attempt in 1..=5 {
            let key = IdempotencyKey::mint();
            events.push(format!("attempt {attempt} with key {key}"));
            let in_flight =
                InFlight::begin(&self.tally, user, &key, Call::sending(operation), target);
            let sent = self
                .http
                .post(format!("{}{path}", self.api_url))
                .bearer_auth(self.token(UserId::numbered(user)))
                .header(KEY_HEADER, key.to_header_value())
                .json(body)
                .timeout(Duration::from_secs(3))
                .send()
                .await;
            let reply = match sent {
                Ok(response) => {
                    let status = response.status().as_u16();
                    let replayed = response
                        .headers()
                        .get(REPLAYED_HEADER)
                        .is_some_and(|value| value.as_bytes() == b"true");
                    let body = response.json::<Value>().await.unwrap_or_default();
                    let call = Call::sending(operation);
                    in_flight.ended(Ok(RecordedReply::read(call, status, replayed, &body)));
                    Some((status, body))
                }
                Err(error) => {
                    in_flight.ended(Err(error.to_string()));
                    None
                }
            };
            let mut tally = self.lock();
            match reply {
                Some((status, body)) => {
                    tally.replied(status);
                    events.push(format!("replied {status}"));
                    if (200..300).contains(&status) || (400..500).contains(&status) {
                        return (Ending::Final { status, body }, attempt, events);
                    }
                }
                None => {
                    tally.not_replied();
                    events.push("no reply".to_owned());
                }
            }
        }
        (
            Ending::Unresolved("gave up after 5 attempts".to_owned()),
            5,
            events,
        )
    }

    fn token(&self, user: UserId) -> String {
        let exp = time::OffsetDateTime::now_utc().unix_timestamp() + 3600;
        shared::auth::sign_token(user, exp, self.secret.as_bytes())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Tally> {
        self.tally.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The header that marks a replayed reply.
const REPLAYED_HEADER: &str = "idempotent-replayed";

/// The library's transport over HTTP, every request recorded into the history as it went.
pub struct RecordingTransport {
    http: HttpTransport,
    user: u64,
    tally: Arc<Mutex<Tally>>,
}

impl Transport for RecordingTransport {
    async fn send(
        &self,
        action: &PendingAction,
        prefer_wait: Option<Duration>,
        trace: TraceId,
    ) -> Result<Reply, SendError> {
        let call = Call::sending(action.operation());
        let in_flight =
            InFlight::begin(&self.tally, self.user, action.key(), call, action.target());
        let sent = self.http.send(action, prefer_wait, trace).await;
        in_flight.ended(recorded(call, &sent));
        sent
    }

    async fn look_up(
        &self,
        key: &IdempotencyKey,
        prefer_wait: Option<Duration>,
        trace: TraceId,
    ) -> Result<Reply, SendError> {
        let in_flight = InFlight::begin(&self.tally, self.user, key, Call::LookUp, "");
        let sent = self.http.look_up(key, prefer_wait, trace).await;
        in_flight.ended(recorded(Call::LookUp, &sent));
        sent
    }
}

/// What the history keeps of a reply to `call`, or of its absence.
fn recorded(call: Call, sent: &Result<Reply, SendError>) -> Result<RecordedReply, String> {
    match sent {
        Ok(reply) => Ok(RecordedReply::read(
            call,
            reply.status,
            reply.replayed,
            &reply.body,
        )),
        Err(error) => Err(error.0.clone()),
    }
}

/// A request on the wire. It goes into the history when it is dropped: with its reply once
/// [`InFlight::ended`] gives one, or as unreplied when the client stops waiting first (the
/// library drops an attempt past its timeout).
struct InFlight {
    tally: Arc<Mutex<Tally>>,
    op: HistoryOp,
}

impl InFlight {
    fn begin(
        tally: &Arc<Mutex<Tally>>,
        user: u64,
        key: &IdempotencyKey,
        call: Call,
        target: &str,
    ) -> InFlight {
        let now = Instant::now();
        InFlight {
            tally: Arc::clone(tally),
            op: HistoryOp {
                user,
                key: key.to_string(),
                call,
                target: target.to_owned(),
                invoked_at: now,
                completed_at: now,
                reply: Err("no reply before the client stopped waiting".to_owned()),
            },
        }
    }

    /// Ends the request with `reply`, recording it.
    fn ended(mut self, reply: Result<RecordedReply, String>) {
        self.op.reply = reply;
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.op.completed_at = Instant::now();
        let op = self.op.clone();
        self.tally
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .history
            .push(op);
    }
}

/// An action's ending, from the library's outcome.
fn ending_of(result: ActionResult) -> Ending {
    match result {
        ActionResult::Replied(reply) => Ending::Final {
            status: reply.status,
            body: reply.body,
        },
        ActionResult::NotReceived | ActionResult::Unsettled(Unsettled::Released) => {
            Ending::NothingCharged
        }
        other => Ending::Unresolved(format!("{other:?}")),
    }
}

fn record_event(tally: &Mutex<Tally>, event: &Event) {
    let mut tally = tally.lock().unwrap_or_else(PoisonError::into_inner);
    match event {
        Event::Replied {
            status, replayed, ..
        } => {
            tally.replied(*status);
            tally.replays += u64::from(*replayed);
        }
        Event::NoReply { .. } => tally.not_replied(),
        _ => {}
    }
}
