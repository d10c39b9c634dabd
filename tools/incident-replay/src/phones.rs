//! The five phones of the replay, each paying one customer's bill its own way:
//! - (a) no key, plain retries, as the app did that night: give up after the timeout, try again
//!   a moment later, a few times. Each retry is a new payment to the server.
//! - (b) a new key per retry, the broken client the article warns about: same loop, a freshly
//!   minted `Idempotency-Key` on every attempt, so every retry is a new action to the server.
//! - (c) the rule-following client: the `client` library, one key per action saved before the
//!   first send, backoff with full jitter, `Retry-After`, a status look-up at the deadline; no
//!   `Prefer: wait`, so a retry that finds the first attempt running gets 409.
//! - (d) the same library asking with `Prefer: wait=N` (the library's default for the timeout:
//!   10 s for 15 s), so such a retry can get the first attempt's reply instead.
//!
//! - (e) the TypeScript package under Node, with `Prefer: wait` as (d): one Node process pays
//!   for every customer (`typescript_phones`).
//!
//! The server counts a wait in real seconds while the night runs compressed, and a header can
//! only name whole seconds: at the default scale even `wait=1` outlasts the phone's 15 s of the
//! night. So on the replayed night (d)'s retry gets the first attempt's reply when that comes
//! within the phone's timeout and otherwise times out, rather than seeing the 409 that ends a
//! wait; only `--time-scale 1000` (real time) keeps the wait's proportions too.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{Context, bail};
use payments_client::{
    ActionResult, ClientRules, Event, FileStore, HttpTransport, KEY_HEADER, PaymentsClient,
};
use serde::Serialize;
use shared::api::{Paise, PayBillRequest};
use shared::retry::{ReplyClass, classify_status};
use shared::{IdempotencyKey, Operation, UserId};

use crate::night::Customer;
use crate::scaled_clock::ScaledClock;
use crate::seeded::Seeded;

/// The plain-retry phones' pause between a timeout and the next try (the night's time).
const PLAIN_RETRY_PAUSE: Duration = Duration::from_secs(1);

/// Which phone pays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientKind {
    /// (a) No key, plain retries.
    NoKey,
    /// (b) A new key on every retry.
    NewKeyPerRetry,
    /// (c) One key per action: the client library, without `Prefer: wait`.
    RuleFollowing,
    /// (d) The client library asking with `Prefer: wait` for the first attempt's reply.
    RuleFollowingWithWait,
    /// (e) The TypeScript package under Node, asking with `Prefer: wait` as (d).
    #[serde(rename = "typescript_package")]
    TypeScriptPackage,
}

impl ClientKind {
    /// The five, in the table's order.
    pub const ALL: [ClientKind; 5] = [
        ClientKind::NoKey,
        ClientKind::NewKeyPerRetry,
        ClientKind::RuleFollowing,
        ClientKind::RuleFollowingWithWait,
        ClientKind::TypeScriptPackage,
    ];

    /// The table's label.
    pub fn label(self) -> &'static str {
        match self {
            ClientKind::NoKey => "(a) no key, plain retries",
            ClientKind::NewKeyPerRetry => "(b) new key per retry",
            ClientKind::RuleFollowing => "(c) one key (library), no wait",
            ClientKind::RuleFollowingWithWait => "(d) one key (library), Prefer: wait",
            ClientKind::TypeScriptPackage => "(e) TypeScript package, Prefer: wait",
        }
    }
}

/// A customer with the identity of one run: a user, a bill and an account of their own, so a
/// customer debited twice is an account with two debits at the bank.
#[derive(Debug, Clone)]
pub struct Payer {
    /// The customer's place in the night (seeds the phone's jitter, whatever the user id).
    pub index: usize,
    /// The user (the token's `sub`).
    pub user: UserId,
    /// The bill, unique to the customer.
    pub bill: String,
    /// The payer's UPI address: the account the bank debits.
    pub vpa: String,
    /// The amount.
    pub amount_paise: u64,
}

impl Payer {
    /// `customer` as user `user`.
    pub fn new(user: UserId, customer: &Customer) -> Payer {
        Payer {
            index: customer.index,
            user: user.clone(),
            bill: format!("elec-{user}"),
            vpa: format!("customer{user}@okbank"),
            amount_paise: customer.amount_paise,
        }
    }
}

/// What the customer's phone ended up showing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PhoneView {
    /// A 2xx: paid.
    Paid,
    /// A 402: declined by the bank.
    Declined,
    /// Another final 4xx.
    Refused,
    /// No final reply: the plain phone gave up, or the library's outcome was not settled.
    NoFinalReply,
}

/// One customer's result.
#[derive(Debug, Clone)]
pub struct PhoneResult {
    /// When each payment attempt was sent, on the night's clock (status look-ups not counted):
    /// one entry per attempt.
    pub sent_at: Vec<Duration>,
    /// 409 `request-in-progress` replies received: retries that found the first attempt
    /// still running.
    pub in_progress_409s: u32,
    /// What the phone showed.
    pub view: PhoneView,
    /// From the first attempt to the phone's last reply (or giving up), in the night's time.
    pub took: Duration,
}

/// What a phone did, before its time is put beside it.
struct Tries {
    sent_at: Vec<Duration>,
    in_progress_409s: u32,
    view: PhoneView,
}

/// What the library's events tell about one action: when each attempt went out, and how many
/// replies were 409s.
#[derive(Debug, Default)]
struct Heard {
    sent_at: Vec<Duration>,
    in_progress_409s: u32,
}

/// Everything the phones share in one run.
#[derive(Debug, Clone)]
pub struct Phones {
    /// A connection pool for all phones.
    pub http: reqwest::Client,
    /// The API this run's phones call.
    pub api: String,
    /// The backend's token secret, to sign each customer's token.
    pub secret: Vec<u8>,
    /// The night's clock.
    pub clock: ScaledClock,
    /// The phones' timeout per attempt (the night's time; the article: 15 s).
    pub timeout: Duration,
    /// How many times the plain phones (a) and (b) try.
    pub plain_attempts: u32,
    /// Where the library's phones save their actions.
    pub store: FileStore,
    /// The seed of the library phones' jitter.
    pub seed: u64,
    /// Client (e)'s Node script (`typescript_phones`).
    pub typescript_phones: PathBuf,
}

impl Phones {
    /// `payer` pays their bill with a phone of `kind`.
    pub async fn pay(&self, kind: ClientKind, payer: &Payer) -> anyhow::Result<PhoneResult> {
        let started = std::time::Instant::now();
        let tries = match kind {
            ClientKind::NoKey => self.plain_retries(payer, false).await,
            ClientKind::NewKeyPerRetry => self.plain_retries(payer, true).await,
            ClientKind::RuleFollowing => self.rule_following(payer, None).await?,
            ClientKind::RuleFollowingWithWait => {
                let wait = ClientRules::default_prefer_wait(self.timeout);
                self.rule_following(payer, wait).await?
            }
            ClientKind::TypeScriptPackage => {
                bail!("client (e) pays for every customer at once (typescript_phones::pay_all)")
            }
        };
        Ok(PhoneResult {
            sent_at: tries.sent_at,
            in_progress_409s: tries.in_progress_409s,
            view: tries.view,
            took: self.clock.night(started.elapsed()),
        })
    }

    fn token(&self, user: UserId) -> String {
        let exp = time::OffsetDateTime::now_utc().unix_timestamp() + 3600;
        shared::auth::sign_token(user, exp, &self.secret)
    }

    /// (a) and (b): try, give up after the timeout, pause, try again; stop at a final reply.
    async fn plain_retries(&self, payer: &Payer, new_key_each_time: bool) -> Tries {
        let token = self.token(payer.user.clone());
        let url = format!("{}/v1/bills/{}/pay", self.api, payer.bill);
        let body = serde_json::json!({"amount_paise": payer.amount_paise, "payer_vpa": payer.vpa});
        let mut in_progress_409s = 0;
        let mut sent_at = Vec::new();
        for attempt in 1..=self.plain_attempts {
            sent_at.push(self.clock.elapsed());
            let mut request = self.http.post(&url).bearer_auth(&token).json(&body);
            if new_key_each_time {
                request = request.header(KEY_HEADER, IdempotencyKey::mint().to_header_value());
            }
            let reply = async {
                let response = request.send().await?;
                let status = response.status().as_u16();
                response.bytes().await?;
                Ok::<u16, reqwest::Error>(status)
            };
            if let Ok(Ok(status)) = tokio::time::timeout(self.clock.real(self.timeout), reply).await
            {
                in_progress_409s += u32::from(status == 409);
                if classify_status(status) == ReplyClass::Final {
                    return Tries {
                        sent_at,
                        in_progress_409s,
                        view: view_of(status),
                    };
                }
            }
            if attempt < self.plain_attempts {
                tokio::time::sleep(self.clock.real(PLAIN_RETRY_PAUSE)).await;
            }
        }
        Tries {
            sent_at,
            in_progress_409s,
            view: PhoneView::NoFinalReply,
        }
    }

    /// (c) and (d): the client library on the night's clock, asking with `Prefer: wait` for
    /// `prefer_wait` (the night's seconds, sent as they are: see the module's note on time).
    /// The attempts' times and the 409s are taken from the library's events.
    async fn rule_following(
        &self,
        payer: &Payer,
        prefer_wait: Option<Duration>,
    ) -> anyhow::Result<Tries> {
        let transport = HttpTransport::new(
            self.http.clone(),
            &self.api,
            &self.token(payer.user.clone()),
        );
        let config = ClientRules {
            attempt_timeout: self.timeout,
            prefer_wait,
            ..ClientRules::default()
        };
        let phone = PaymentsClient::new(payer.user.clone(), transport, self.store.clone(), config)
            .with_clock(self.clock)
            .with_jitter(Seeded::new(self.seed.rotate_left(32) ^ payer.index as u64));
        let body = PayBillRequest {
            amount_paise: Paise::new(payer.amount_paise).context("amount out of range")?,
            payer_vpa: payer.vpa.clone(),
        };
        let saved = phone
            .begin(Operation::PayBill, &payer.bill, &body)
            .await
            .context("saving the action before sending it")?;
        // The report callback must own what it records (`payments_client::Report` is `'static`).
        let heard = Arc::new(Mutex::new(Heard::default()));
        let listen = {
            let heard = Arc::clone(&heard);
            let clock = self.clock;
            move |event: &Event| {
                let mut heard = heard.lock().unwrap_or_else(PoisonError::into_inner);
                match event {
                    Event::Sending { .. } => heard.sent_at.push(clock.elapsed()),
                    Event::Replied { status: 409, .. } => heard.in_progress_409s += 1,
                    _ => {}
                }
            }
        };
        let completion = phone.run(&saved, &listen).await;
        let view = match completion.result {
            ActionResult::Replied(reply) => view_of(reply.status),
            _ => PhoneView::NoFinalReply,
        };
        let heard = std::mem::take(&mut *heard.lock().unwrap_or_else(PoisonError::into_inner));
        Ok(Tries {
            sent_at: heard.sent_at,
            in_progress_409s: heard.in_progress_409s,
            view,
        })
    }
}

fn view_of(status: u16) -> PhoneView {
    match status {
        200..=299 => PhoneView::Paid,
        402 => PhoneView::Declined,
        _ => PhoneView::Refused,
    }
}
