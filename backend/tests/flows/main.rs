//! The flows in milliseconds: SPEC §4's rows through `pay_bill` and `refund_payment` on a
//! real SQLite store in a temporary directory and an in-memory bank port ([`LedgerBank`]: a
//! ledger by reference, with the replies each test scripts). Each test asserts what the wire
//! shows (status, body) and what the bank saw (calls, the ledger). The contract suites (both
//! stores, over HTTP, against the bank simulator) stay the proof; these are the fast check of a
//! change to a flow: `cargo test -p backend --test flows`. Each request's steps are checked
//! against the server path's vector case of its row ([`Walked`]).
//!
//! The tests, by what they try: `first_attempts` (a new key, its repeats, refusals),
//! `no_final_word` (outcome pending, stuck keys, status checks), `breaker`, `released`,
//! `concurrent` (attempts at once), `reused` (a key whose row is gone) and `store_fails` (a
//! write that fails on cue). This file holds what they share: [`Flows`] and the helpers.

mod breaker;
mod concurrent;
mod first_attempts;
mod ledger_bank;
mod no_final_word;
mod released;
mod reused;
mod store_fails;
mod walked;

use std::sync::Arc;
use std::time::Duration;

use axum::response::IntoResponse;
use clap::Parser;
use shared::{IdempotencyKey, UserId};
use sqlx::Connection;

use backend::bank::{BankPort, CallOutcome};
use backend::config::Settings;
use backend::domain::{Reply, RequestId, TraceId};
use backend::flows::{Caller, Submitted, pay_bill, refund_payment};
use backend::startup::build_state_with_bank;
use backend::state::AppState;
use backend::store;

use self::ledger_bank::LedgerBank;
use self::walked::Walked;

/// The backend's settings as the command line reads them, in development mode.
#[derive(Parser)]
struct TestSettings {
    #[command(flatten)]
    settings: Settings,
}

/// The flows on a fresh SQLite store, against `bank`.
struct Flows {
    state: AppState,
    bank: Arc<LedgerBank>,
    directory: tempfile::TempDir,
    /// The backend's flags beyond development mode, kept for a reopened process.
    flags: Vec<String>,
}

impl Flows {
    async fn against(bank: LedgerBank) -> Flows {
        Flows::configured(bank, &[]).await
    }

    /// The same, with the backend's `flags` added to its command line.
    async fn configured(bank: LedgerBank, flags: &[&str]) -> Flows {
        let directory = tempfile::tempdir().expect("a temporary directory");
        let flags = flags.iter().map(|flag| flag.to_string()).collect();
        Flows::open(Arc::new(bank), directory, flags).await
    }

    /// The flows of a new process on the store in `directory`, against `bank`.
    async fn open(
        bank: Arc<LedgerBank>,
        directory: tempfile::TempDir,
        flags: Vec<String>,
    ) -> Flows {
        let policy = concat!(env!("CARGO_MANIFEST_DIR"), "/../policy.yaml");
        let arguments = ["backend", "--mode", "development", "--policy-file", policy];
        let arguments = arguments.iter().map(|argument| argument.to_string());
        let settings = TestSettings::try_parse_from(arguments.chain(flags.iter().cloned()))
            .expect("settings")
            .settings;
        let config = settings.into_config().expect("a development config");
        let store = store::connect(&store_url(&directory), 4, Duration::from_secs(5))
            .await
            .expect("SQLite opens");
        store.migrate().await.expect("migrations apply");
        let port = Arc::clone(&bank) as Arc<dyn BankPort>;
        let state = build_state_with_bank(&config, store, port).expect("state");
        Flows {
            state,
            bank,
            directory,
            flags,
        }
    }

    /// Runs `statements` on the store while the flows use it, as another process would (a
    /// trigger that fails a write on cue, a row deleted mid-call).
    async fn execute(&self, statements: &str) {
        execute_on(&self.directory, statements).await;
    }

    /// The rows of `table` in the store (a `WHERE` clause may follow its name).
    async fn rows(&self, table: &str) -> i64 {
        let mut connection = connect_to(&self.directory).await;
        sqlx::query_scalar(&format!("SELECT count(*) FROM {table}"))
            .fetch_one(&mut connection)
            .await
            .expect("counted")
    }

    /// A new process (nothing in memory) on this store after `statements` ran on it: the same
    /// bank and flags.
    async fn reopened_after(self, statements: &str) -> Flows {
        let Flows {
            state,
            bank,
            directory,
            flags,
        } = self;
        drop(state);
        execute_on(&directory, statements).await;
        Flows::open(bank, directory, flags).await
    }

    /// Flows whose first payment was debited and its reply saved (201), with that payment's key
    /// and reply; its steps checked on `walked`. The bank's next calls succeed too.
    async fn with_a_paid_key(walked: &Walked) -> (Flows, IdempotencyKey, Reply) {
        let flows = Flows::against(LedgerBank::replying([])).await;
        let key = IdempotencyKey::mint();
        let first = flows.pay(&key, BODY, None).await;
        assert_eq!((first.status, first.replayed), (201, false));
        walked.assert_took(
            "a new key is claimed, the bank called once, its final word saved and rendered",
        );
        (flows, key, first)
    }

    /// Flows whose first payment's debit was made and its reply lost (503, the key `unknown`),
    /// with that payment's key; its steps checked on `walked`.
    async fn with_a_lost_reply(walked: &Walked) -> (Flows, IdempotencyKey) {
        let case =
            "no final word from the bank leaves the key unknown, with when its first check is due";
        Flows::after_a_503_to(no_final_word(), (walked, case)).await
    }

    /// Flows whose first payment's call the bank did not execute (503, the claim released),
    /// with that payment's key; its steps checked on `walked`. The bank's next calls succeed.
    async fn with_a_released_claim(walked: &Walked) -> (Flows, IdempotencyKey) {
        let case = "a call the bank did not execute is released at once: nothing charged";
        Flows::after_a_503_to(not_executed(), (walked, case)).await
    }

    /// Flows whose first payment's bank call replied `outcome`, which the payment's reply
    /// shows as a 503, with that payment's key; its steps are the vector `case`'s.
    async fn after_a_503_to(
        outcome: CallOutcome,
        (walked, case): (&Walked, &str),
    ) -> (Flows, IdempotencyKey) {
        let flows = Flows::against(LedgerBank::replying([outcome])).await;
        let key = IdempotencyKey::mint();
        assert_eq!(flows.pay(&key, BODY, None).await.status, 503);
        walked.assert_took(case);
        (flows, key)
    }

    /// Pays `key` with [`BODY`] in a task of its own, once its bank call has arrived at a bank
    /// that holds calls ([`LedgerBank::holding`]): a first attempt still running.
    async fn first_attempt_at_the_bank(
        self: &Arc<Flows>,
        key: &IdempotencyKey,
    ) -> tokio::task::JoinHandle<Reply> {
        let calls = self.bank.calls();
        let first = self.pay_in_a_task(key, None);
        self.bank.wait_for_calls(calls + 1).await;
        first
    }

    /// Pays `key` with [`BODY`], allowed to wait `wait`, in a task of its own.
    fn pay_in_a_task(
        self: &Arc<Flows>,
        key: &IdempotencyKey,
        wait: Option<Duration>,
    ) -> tokio::task::JoinHandle<Reply> {
        let (flows, key) = (Arc::clone(self), key.clone());
        tokio::spawn(async move { flows.pay(&key, BODY, wait).await })
    }

    async fn pay(&self, key: &IdempotencyKey, body: &str, wait: Option<Duration>) -> Reply {
        self.try_pay(key, body, wait)
            .await
            .unwrap_or_else(|error| panic!("pay_bill failed: {error}"))
    }

    /// `pay_bill`'s result as it is: a refusal outside the path's own replies is an `Error`.
    async fn try_pay(
        &self,
        key: &IdempotencyKey,
        body: &str,
        wait: Option<Duration>,
    ) -> backend::error::Result<Reply> {
        let key = key.to_string();
        self.pay_as_sent(vec![key.as_bytes()], body.as_bytes(), wait)
            .await
    }

    /// `pay_bill` of a request with these key header values and body, as sent.
    async fn pay_as_sent(
        &self,
        key_header_values: Vec<&[u8]>,
        body: &[u8],
        wait: Option<Duration>,
    ) -> backend::error::Result<Reply> {
        let submitted = Submitted {
            key_header_values,
            path_parameter: "bill-1",
            body,
        };
        pay_bill(&self.state, &caller(wait), submitted).await
    }

    async fn refund(&self, key: &IdempotencyKey, payment_id: &str, body: &str) -> Reply {
        let key = key.to_string();
        let submitted = Submitted {
            key_header_values: vec![key.as_bytes()],
            path_parameter: payment_id,
            body: body.as_bytes(),
        };
        refund_payment(&self.state, &caller(None), submitted)
            .await
            .unwrap_or_else(|error| panic!("refund_payment failed: {error}"))
    }
}

fn store_url(directory: &tempfile::TempDir) -> String {
    format!("sqlite://{}", directory.path().join("flows.db").display())
}

/// A connection of its own to the store in `directory`, as another process's.
async fn connect_to(directory: &tempfile::TempDir) -> sqlx::SqliteConnection {
    sqlx::SqliteConnection::connect(&store_url(directory))
        .await
        .expect("SQLite opens")
}

async fn execute_on(directory: &tempfile::TempDir, statements: &str) {
    let mut connection = connect_to(directory).await;
    sqlx::raw_sql(statements)
        .execute(&mut connection)
        .await
        .expect("the statements run");
    connection.close().await.expect("closes");
}

fn caller(wait: Option<Duration>) -> Caller {
    Caller {
        user: UserId::numbered(7),
        request_id: RequestId::new("flows-test"),
        trace_id: TraceId::mint(),
        wait,
    }
}

const BODY: &str = r#"{"amount_paise":25000,"payer_vpa":"asha@okbank"}"#;
const OTHER_BODY: &str = r#"{"amount_paise":26000,"payer_vpa":"asha@okbank"}"#;

/// SQL setting a key's claim ten minutes back (SQLite keeps microseconds), past `stuck_after`
/// and the rail's first status check, with no check made or planned.
const TEN_MINUTES_AGO: &str = "created_at = created_at - 600000000, \
     claimed_at = claimed_at - 600000000, next_lookup_at = NULL, last_status_check_at = NULL";

/// SQL giving every key's lease to another replica for a minute: a reconciler asking the bank
/// about it.
fn held_by_another_replica() -> String {
    let in_a_minute = now_us() + 60_000_000;
    format!(
        "UPDATE idempotency_keys SET lease_owner = randomblob(16), lease_until = {in_a_minute};"
    )
}

/// The bank's reply when a call timed out: the money may have moved.
fn no_final_word() -> CallOutcome {
    CallOutcome::MayBeInFlight {
        reason: "timed out".into(),
    }
}

/// The bank's reply when it did not execute a call: nothing moved.
fn not_executed() -> CallOutcome {
    CallOutcome::NotExecuted {
        reason: "connection refused".into(),
    }
}

/// The problem `reply` is, checked to be the 503 `outcome-pending`.
fn outcome_pending(reply: &Reply) -> serde_json::Value {
    let problem = json(reply);
    assert_eq!(reply.status, 503, "{problem}");
    assert_eq!(slug_of(&problem), "outcome-pending", "{problem}");
    problem
}

fn json(reply: &Reply) -> serde_json::Value {
    serde_json::from_slice(&reply.body).expect("a JSON body")
}

/// Now, as SQLite keeps times: microseconds since 1970.
fn now_us() -> i64 {
    let since_1970 = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970");
    i64::try_from(since_1970.as_micros()).expect("before the year 294,000")
}

/// The slug of the problem `reply` is (`idempotency-key-reused` for
/// `/problems/idempotency-key-reused`).
fn problem_slug(reply: &Reply) -> String {
    slug_of(&json(reply))
}

/// The slug of the problem document `problem`.
fn slug_of(problem: &serde_json::Value) -> String {
    let kind = problem["type"].as_str().unwrap_or("");
    kind.strip_prefix("/problems/").unwrap_or(kind).to_owned()
}
