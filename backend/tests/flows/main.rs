//! The flows in milliseconds: SPEC §4's rows through `pay_bill` and `refund_payment` on a
//! real SQLite store in a temporary directory and an in-memory bank port ([`LedgerBank`]: a
//! ledger by reference, with the replies each test scripts). Each test asserts what the wire
//! shows (status, body) and what the bank saw (calls, the ledger). The contract suites (both
//! stores, over HTTP, against the bank simulator) stay the proof; these are the fast check of a
//! change to a flow: `cargo test -p backend --test flows`.

mod ledger_bank;
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
}

impl Flows {
    async fn against(bank: LedgerBank) -> Flows {
        Flows::configured(bank, &[]).await
    }

    /// The same, with the backend's `flags` added to its command line.
    async fn configured(bank: LedgerBank, flags: &[&str]) -> Flows {
        let directory = tempfile::tempdir().expect("a temporary directory");
        Flows::open(Arc::new(bank), directory, flags).await
    }

    /// The flows of a new process on the store in `directory`, against `bank`.
    async fn open(bank: Arc<LedgerBank>, directory: tempfile::TempDir, flags: &[&str]) -> Flows {
        let policy = concat!(env!("CARGO_MANIFEST_DIR"), "/../policy.yaml");
        let arguments = ["backend", "--mode", "development", "--policy-file", policy];
        let settings = TestSettings::try_parse_from(arguments.iter().chain(flags))
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
        }
    }

    /// The rows of `table` in the store (a `WHERE` clause may follow its name).
    async fn rows(&self, table: &str) -> i64 {
        let mut connection = sqlx::SqliteConnection::connect(&store_url(&self.directory))
            .await
            .expect("SQLite opens");
        sqlx::query_scalar(&format!("SELECT count(*) FROM {table}"))
            .fetch_one(&mut connection)
            .await
            .expect("counted")
    }

    /// A new process (nothing in memory) on this store after `statements` ran on it: the same
    /// bank.
    async fn reopened_after(self, statements: &str) -> Flows {
        let Flows {
            state,
            bank,
            directory,
        } = self;
        drop(state);
        let mut connection = sqlx::SqliteConnection::connect(&store_url(&directory))
            .await
            .expect("SQLite opens");
        sqlx::raw_sql(statements)
            .execute(&mut connection)
            .await
            .expect("the statements run");
        connection.close().await.expect("closes");
        Flows::open(bank, directory, &[]).await
    }

    /// Flows whose first payment's debit was made and its reply lost (503, the key `unknown`),
    /// with that payment's key.
    async fn with_a_lost_reply() -> (Flows, IdempotencyKey) {
        let lost = CallOutcome::MayBeInFlight {
            reason: "timed out".into(),
        };
        Flows::after_a_503_to(lost).await
    }

    /// Flows whose first payment's call the bank did not execute (503, the claim released),
    /// with that payment's key; the bank's next calls succeed.
    async fn with_a_released_claim() -> (Flows, IdempotencyKey) {
        let not_executed = CallOutcome::NotExecuted {
            reason: "connection refused".into(),
        };
        Flows::after_a_503_to(not_executed).await
    }

    /// Flows whose first payment's bank call replied `outcome`, which the payment's reply
    /// shows as a 503, with that payment's key.
    async fn after_a_503_to(outcome: CallOutcome) -> (Flows, IdempotencyKey) {
        let flows = Flows::against(LedgerBank::replying([outcome])).await;
        let key = IdempotencyKey::mint();
        assert_eq!(flows.pay(&key, BODY, None).await.status, 503);
        (flows, key)
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

#[tokio::test]
async fn a_new_key_debits_once_and_its_repeats_replay_the_same_bytes() {
    let (walked, _collecting) = Walked::collect();
    let flows = Flows::against(LedgerBank::replying([CallOutcome::Succeeded])).await;
    let key = IdempotencyKey::mint();
    let first = flows.pay(&key, BODY, None).await;
    assert_eq!((first.status, first.replayed), (201, false));
    walked.assert_took(
        "a new key is claimed, the bank called once, its final word saved and rendered",
    );
    // The first attempt's reply is remembered: the first repeat comes from memory after
    // admission, and the next ones, the very bytes again, before it.
    let repeats = [
        "a repeat remembered in memory is replayed from there, after admission",
        "the very bytes of a repeat already replayed from memory are replayed before admission",
        "the very bytes of a repeat already replayed from memory are replayed before admission",
    ];
    for case in repeats {
        let repeat = flows.pay(&key, BODY, None).await;
        assert_eq!((repeat.status, repeat.replayed), (201, true));
        assert_eq!(repeat.body, first.body);
        walked.assert_took(case);
    }
    assert_eq!(flows.bank.calls(), 1);
    assert_eq!(flows.bank.moved_paise(), 25_000);
}

#[tokio::test]
async fn another_body_under_the_key_is_refused_and_calls_nothing() {
    let (walked, _collecting) = Walked::collect();
    let flows = Flows::against(LedgerBank::replying([CallOutcome::Succeeded])).await;
    let key = IdempotencyKey::mint();
    assert_eq!(flows.pay(&key, BODY, None).await.status, 201);
    walked.assert_took(
        "a new key is claimed, the bank called once, its final word saved and rendered",
    );
    let reused = flows.pay(&key, OTHER_BODY, None).await;
    assert_eq!(reused.status, 422);
    assert_eq!(problem_slug(&reused), "idempotency-key-reused");
    walked.assert_took("another body under a remembered key is refused from memory");
    assert_eq!(flows.bank.calls(), 1);
}

#[tokio::test]
async fn a_decline_is_a_402_replayed_as_such() {
    let declined = CallOutcome::Declined {
        reason: "insufficient funds".into(),
    };
    let (walked, _collecting) = Walked::collect();
    let flows = Flows::against(LedgerBank::replying([declined])).await;
    let key = IdempotencyKey::mint();
    let first = flows.pay(&key, BODY, None).await;
    assert_eq!(first.status, 402);
    walked.assert_took(
        "a new key is claimed, the bank called once, its final word saved and rendered",
    );
    let repeat = flows.pay(&key, BODY, None).await;
    assert_eq!((repeat.status, repeat.replayed), (402, true));
    walked.assert_took("a repeat remembered in memory is replayed from there, after admission");
    assert_eq!(flows.bank.calls(), 1);
}

#[tokio::test]
async fn no_final_word_is_outcome_pending_with_when_it_will_be_known() {
    let (walked, _collecting) = Walked::collect();
    let lost = CallOutcome::MayBeInFlight {
        reason: "timed out".into(),
    };
    let flows = Flows::against(LedgerBank::replying([lost])).await;
    let key = IdempotencyKey::mint();
    let first = flows.pay(&key, BODY, None).await;
    assert_eq!(first.status, 503);
    let problem = json(&first);
    assert_eq!(slug_of(&problem), "outcome-pending", "{problem}");
    assert!(problem["next_check_at"].is_string(), "{problem}");
    walked.assert_took(
        "no final word from the bank leaves the key unknown, with when its first check is due",
    );
    // The repeat does not call the bank again: the rail's first check is not due.
    let repeat = flows.pay(&key, BODY, None).await;
    assert_eq!(repeat.status, 503);
    walked.assert_took(
        "an unknown key whose next check is not due is 503 outcome pending, saying when it will be known",
    );
    assert_eq!(flows.bank.calls(), 1);
}

#[tokio::test]
async fn a_key_stuck_started_past_stuck_after_is_asked_of_the_bank_and_gets_its_true_reply() {
    // The bank debits but its reply is lost, and the process dies with the key `started`,
    // claimed ten minutes ago (past `stuck_after` and the rail's first check).
    let (walked, _collecting) = Walked::collect();
    let (flows, key) = Flows::with_a_lost_reply().await;
    walked.assert_took(
        "no final word from the bank leaves the key unknown, with when its first check is due",
    );
    let stuck = format!(
        "UPDATE idempotency_keys SET state = 'started', bank_call_ended = 0, {TEN_MINUTES_AGO}, \
         lease_owner = NULL, lease_until = NULL, status_checks = 0;"
    );
    let flows = flows.reopened_after(&stuck).await;
    let started = "idempotency_keys WHERE state = 'started'";
    assert_eq!(flows.rows(started).await, 1);
    let retry = flows.pay(&key, BODY, None).await;
    assert_eq!(
        retry.status,
        201,
        "{}",
        String::from_utf8_lossy(&retry.body)
    );
    assert_eq!(json(&retry)["amount_paise"], 25_000);
    walked.assert_took("a key started past stuck_after is asked about inline");
    assert_eq!(flows.bank.calls(), 1, "a look-up, never a second debit");
    assert_eq!(flows.bank.moved_paise(), 25_000);
    let repeat = flows.pay(&key, BODY, None).await;
    assert_eq!((repeat.status, repeat.replayed), (201, true));
}

#[tokio::test]
async fn an_unknown_key_whose_check_is_due_is_asked_and_the_debit_found_is_its_reply() {
    let (walked, _collecting) = Walked::collect();
    let (flows, key) = Flows::with_a_lost_reply().await;
    walked.assert_took(
        "no final word from the bank leaves the key unknown, with when its first check is due",
    );
    // The call is ten minutes old: the rail allows its first status check.
    let due = format!("UPDATE idempotency_keys SET {TEN_MINUTES_AGO};");
    let flows = flows.reopened_after(&due).await;
    let retry = flows.pay(&key, BODY, None).await;
    assert_eq!((retry.status, retry.replayed), (201, true));
    walked.assert_took(
        "an unknown key whose check is due is asked about, and the bank's final word replayed",
    );
    assert_eq!(json(&retry)["amount_paise"], 25_000);
    assert_eq!((flows.bank.calls(), flows.bank.look_ups()), (1, 1));
    assert_eq!(flows.rows("idempotency_keys WHERE state = 'done'").await, 1);
}

#[tokio::test]
async fn a_key_past_every_status_check_the_rail_allows_awaits_the_settlement_file() {
    let (walked, _collecting) = Walked::collect();
    let (flows, key) = Flows::with_a_lost_reply().await;
    walked.assert_took(
        "no final word from the bank leaves the key unknown, with when its first check is due",
    );
    // Every check the rail allows was made with no final reply: the settlement file is due in
    // a day. A check would otherwise be due (the call is ten minutes old).
    let a_day_us = 86_400_000_000_i64;
    let exhausted = format!(
        "UPDATE idempotency_keys SET status_checks = 3, {TEN_MINUTES_AGO}, \
         settlement_due_at = {};",
        now_us() + a_day_us
    );
    let flows = flows.reopened_after(&exhausted).await;
    let retry = flows.pay(&key, BODY, None).await;
    assert_eq!(retry.status, 503);
    let problem = json(&retry);
    assert_eq!(
        slug_of(&problem),
        "outcome-awaiting-settlement",
        "{problem}"
    );
    assert!(problem["settlement_due_at"].is_string(), "{problem}");
    walked.assert_took("an unknown key whose checks ran out waits for the settlement file");
    let retry_after = retry.retry_after.expect("a Retry-After");
    assert!(
        retry_after > Duration::from_secs(23 * 3600),
        "{retry_after:?}"
    );
    assert_eq!(flows.bank.calls(), 1, "no second money call");
    assert_eq!(
        flows.bank.look_ups(),
        0,
        "and no status check past the rail's limit"
    );
}

#[tokio::test]
async fn a_call_the_bank_did_not_execute_is_released_and_the_retry_debits_once() {
    let (walked, _collecting) = Walked::collect();
    let not_executed = CallOutcome::NotExecuted {
        reason: "connection refused".into(),
    };
    let flows = Flows::against(LedgerBank::replying([not_executed, CallOutcome::Succeeded])).await;
    let key = IdempotencyKey::mint();
    let first = flows.pay(&key, BODY, None).await;
    assert_eq!(first.status, 503);
    assert!(
        String::from_utf8_lossy(&first.body).contains("no money moved"),
        "{}",
        String::from_utf8_lossy(&first.body)
    );
    walked.assert_took("a call the bank did not execute is released at once: nothing charged");
    let retry = flows.pay(&key, BODY, None).await;
    assert_eq!(retry.status, 201);
    walked.assert_took(
        "a released key with the same body is claimed again under its reference and called",
    );
    assert_eq!(flows.bank.calls(), 2);
    assert_eq!(
        flows.bank.references().len(),
        1,
        "the retry reuses the claim's reference"
    );
    assert_eq!(flows.bank.moved_paise(), 25_000);
}

#[tokio::test]
async fn a_repeat_while_the_first_attempt_runs_is_409_or_waits_for_its_reply() {
    let (walked, _collecting) = Walked::collect();
    let flows = Arc::new(Flows::against(LedgerBank::holding([CallOutcome::Succeeded])).await);
    let key = IdempotencyKey::mint();
    let first = tokio::spawn({
        let (flows, key) = (Arc::clone(&flows), key.clone());
        async move { flows.pay(&key, BODY, None).await }
    });
    flows.bank.wait_for_calls(1).await;
    let at_once = flows.pay(&key, BODY, None).await;
    assert_eq!(at_once.status, 409);
    // The first attempt's steps so far, then the repeat's.
    let first_steps = ["recall_same_bytes", "admit", "recall", "claim", "call_bank"];
    walked.assert_took_after(
        &first_steps,
        "a repeat while the first attempt runs gets 409 when it does not wait",
    );
    let waiting = tokio::spawn({
        let (flows, key) = (Arc::clone(&flows), key.clone());
        async move { flows.pay(&key, BODY, Some(Duration::from_secs(10))).await }
    });
    flows.bank.let_calls_go();
    let first = first.await.expect("the first attempt");
    let waited = waiting.await.expect("the waiting repeat");
    assert_eq!(first.status, 201);
    assert_eq!((waited.status, waited.replayed), (201, true));
    assert_eq!(waited.body, first.body);
    assert_eq!(flows.bank.calls(), 1);
}

#[tokio::test]
async fn a_refund_beyond_what_remains_is_422_and_calls_nothing() {
    let flows = Flows::against(LedgerBank::replying([CallOutcome::Succeeded])).await;
    let paid = flows.pay(&IdempotencyKey::mint(), BODY, None).await;
    let payment_id = json(&paid)["payment_id"]
        .as_str()
        .expect("an id")
        .to_owned();
    let too_much = r#"{"amount_paise":30000}"#;
    let (walked, _collecting) = Walked::collect();
    let refused = flows
        .refund(&IdempotencyKey::mint(), &payment_id, too_much)
        .await;
    assert_eq!(refused.status, 422);
    walked.assert_took("a refund larger than what remains is 422");
    let unknown = flows
        .refund(
            &IdempotencyKey::mint(),
            "not-a-payment",
            r#"{"amount_paise":1}"#,
        )
        .await;
    assert_eq!(unknown.status, 404);
    let someone_elses = uuid::Uuid::new_v4().to_string();
    let unknown = flows
        .refund(
            &IdempotencyKey::mint(),
            &someone_elses,
            r#"{"amount_paise":1}"#,
        )
        .await;
    assert_eq!(unknown.status, 404);
    walked.assert_took_after(
        &["recall_same_bytes", "admit", "reply not_admitted"],
        "a refund of a payment the user does not have is 404",
    );
    assert_eq!(flows.bank.calls(), 1);
}

#[tokio::test]
async fn a_request_that_fails_admission_touches_nothing() {
    let (walked, _collecting) = Walked::collect();
    let flows = Flows::against(LedgerBank::replying([])).await;
    let key = IdempotencyKey::mint();
    let refused = flows.pay(&key, r#"{"amount_paise":"#, None).await;
    assert_eq!(refused.status, 400);
    walked.assert_took("a request that fails admission is refused before any look-up");
    let missing_vpa = flows.pay(&key, r#"{"amount_paise":100}"#, None).await;
    assert_eq!(missing_vpa.status, 422);
    walked.assert_took("a request that fails admission is refused before any look-up");
    assert_eq!(flows.bank.calls(), 0);
}

#[tokio::test]
async fn a_missing_or_malformed_key_or_an_oversized_body_is_refused_and_touches_nothing() {
    let (walked, _collecting) = Walked::collect();
    let flows = Flows::against(LedgerBank::replying([])).await;
    let refusals = [
        (
            vec![],
            BODY.as_bytes().to_vec(),
            400,
            "idempotency-key-missing",
        ),
        (
            vec![&b"not-a-uuid"[..]],
            BODY.as_bytes().to_vec(),
            400,
            "idempotency-key-malformed",
        ),
        (vec![], vec![b' '; 64 * 1024], 413, "body-too-large"),
    ];
    for (key_header_values, body, status, problem) in refusals {
        let refused = flows
            .pay_as_sent(key_header_values, &body, None)
            .await
            .expect("a reply");
        assert_eq!(refused.status, status, "{problem}");
        assert_eq!(problem_slug(&refused), problem);
        walked.assert_took("a request that fails admission is refused before any look-up");
    }
    assert_eq!(flows.bank.calls(), 0);
    assert_eq!(flows.rows("idempotency_keys").await, 0);
}

#[tokio::test]
async fn a_released_claim_retried_with_another_body_is_refused_and_calls_nothing() {
    let (walked, _collecting) = Walked::collect();
    let (flows, key) = Flows::with_a_released_claim().await;
    walked.assert_took("a call the bank did not execute is released at once: nothing charged");
    let reused = flows.pay(&key, OTHER_BODY, None).await;
    assert_eq!(reused.status, 422);
    assert_eq!(problem_slug(&reused), "idempotency-key-reused");
    walked.assert_took("another body under a released key is refused");
    assert_eq!(flows.bank.calls(), 1, "only the first, released call");
    let retry = flows.pay(&key, BODY, None).await;
    assert_eq!(retry.status, 201, "the released claim is still the key's");
    assert_eq!(flows.bank.references().len(), 1);
}

#[tokio::test]
async fn a_released_key_reused_after_it_expired_is_checked_once_then_paid_anew() {
    let (walked, _collecting) = Walked::collect();
    let (flows, key) = Flows::with_a_released_claim().await;
    walked.assert_took("a call the bank did not execute is released at once: nothing charged");
    // The bank executed the call it said it had not (a late debit), and the key expired with
    // its last late-debit check still to come (the claim ten minutes old, so the rail allows it).
    let first_reference = flows.bank.references()[0].clone();
    flows.bank.debit_late(&first_reference, 25_000);
    let expired = format!(
        "UPDATE idempotency_keys SET created_at = created_at - 600000000, \
         claimed_at = claimed_at - 600000000, expires_at = {};",
        now_us() - 1
    );
    let flows = flows.reopened_after(&expired).await;
    let retry = flows.pay(&key, BODY, None).await;
    let body = String::from_utf8_lossy(&retry.body);
    assert_eq!((retry.status, retry.replayed), (201, false), "{body}");
    assert_eq!(flows.bank.look_ups(), 1, "the last check, inline");
    walked.assert_took(
        "an expired released key whose last check finds a late debit settles it, then makes way for a new claim",
    );
    assert_eq!(
        flows.bank.calls(),
        2,
        "the released call and the new payment's"
    );
    let references = flows.bank.references();
    assert_eq!(
        references.len(),
        2,
        "the new payment has a reference of its own"
    );
    assert_eq!(json(&retry)["bank_reference"], references[1].as_str());
    let settled = "payments WHERE status = 'succeeded'";
    assert_eq!(
        flows.rows(settled).await,
        2,
        "the old movement settled by its check"
    );
    assert_eq!(flows.rows("idempotency_keys").await, 1, "the key replaced");
}

#[tokio::test]
async fn a_released_key_whose_movement_was_voided_is_paid_anew_and_keeps_the_void() {
    let (walked, _collecting) = Walked::collect();
    let (flows, key) = Flows::with_a_released_claim().await;
    walked.assert_took("a call the bank did not execute is released at once: nothing charged");
    // The last late-debit check found nothing: the movement void, the key's checks ended, and
    // the key expired.
    let voided = format!(
        "UPDATE payments SET status = 'void'; \
         UPDATE idempotency_keys SET next_lookup_at = NULL, expires_at = {};",
        now_us() - 1
    );
    let flows = flows.reopened_after(&voided).await;
    let retry = flows.pay(&key, BODY, None).await;
    assert_eq!((retry.status, retry.replayed), (201, false));
    assert_eq!(flows.bank.look_ups(), 0, "the void needs no check");
    walked
        .assert_took("an expired released key whose movement was voided makes way for a new claim");
    let references = flows.bank.references();
    assert_eq!(
        references.len(),
        2,
        "never a call under the void reference again"
    );
    assert_eq!(json(&retry)["bank_reference"], references[1].as_str());
    assert_eq!(flows.rows("payments WHERE status = 'void'").await, 1);
    assert_eq!(flows.bank.moved_paise(), 25_000);
}

#[tokio::test]
async fn two_attempts_at_the_same_instant_debit_once_over_many_rounds() {
    let flows = Arc::new(Flows::against(LedgerBank::replying([])).await);
    for round in 1..=25 {
        let key = IdempotencyKey::mint();
        let attempts = (0..2).map(|_| {
            let (flows, key) = (Arc::clone(&flows), key.clone());
            tokio::spawn(async move { flows.pay(&key, BODY, None).await })
        });
        let mut statuses = Vec::new();
        for attempt in attempts {
            let reply = attempt.await.expect("an attempt");
            statuses.push((reply.status, reply.replayed));
        }
        statuses.sort();
        let one_claimed = statuses.contains(&(201, false));
        let other = statuses.iter().find(|status| **status != (201, false));
        assert!(
            one_claimed && matches!(other, Some((409, false)) | Some((201, true))),
            "round {round}: {statuses:?}"
        );
        assert_eq!(flows.bank.calls(), round, "round {round}: one call per key");
    }
    assert_eq!(flows.rows("idempotency_keys").await, 25);
}

#[tokio::test]
async fn a_claim_lost_with_the_database_is_made_again_under_its_first_reference() {
    let flows = Flows::against(LedgerBank::replying([])).await;
    let key = IdempotencyKey::mint();
    let first = flows.pay(&key, BODY, None).await;
    assert_eq!(first.status, 201);
    // The database loses the claim, as a promoted asynchronous copy or a restore would: the
    // key, its payment and its trail are gone; a new process serves the phone's retry.
    let flows = flows
        .reopened_after(
            "DELETE FROM key_events; DELETE FROM idempotency_keys; DELETE FROM payments;",
        )
        .await;
    let (walked, _collecting) = Walked::collect();
    let again = flows.pay(&key, BODY, None).await;
    assert_eq!((again.status, again.replayed), (201, false));
    walked.assert_took(
        "a new key is claimed, the bank called once, its final word saved and rendered",
    );
    for field in ["payment_id", "bank_reference", "amount_paise"] {
        assert_eq!(json(&again)[field], json(&first)[field], "{field}");
    }
    assert_eq!(flows.bank.calls(), 2, "the retry calls the bank again");
    assert_eq!(flows.bank.references().len(), 1, "under the same reference");
    assert_eq!(flows.bank.moved_paise(), 25_000, "which the bank dedupes");
}

#[tokio::test]
async fn a_key_reused_after_it_expired_is_a_new_payment_under_a_new_reference() {
    let (walked, _collecting) = Walked::collect();
    let flows = Flows::against(LedgerBank::replying([])).await;
    let key = IdempotencyKey::mint();
    let first = flows.pay(&key, BODY, None).await;
    walked.assert_took(
        "a new key is claimed, the bank called once, its final word saved and rendered",
    );
    // The key passes the expiry on its row before the sweep deletes it (which keeps its
    // payment, SPEC §3): the same request again deletes it and is a new one, whose
    // first-choice id is the kept payment's.
    let expired = format!("UPDATE idempotency_keys SET expires_at = {};", now_us() - 1);
    let flows = flows.reopened_after(&expired).await;
    let again = flows.pay(&key, BODY, None).await;
    assert_eq!((again.status, again.replayed), (201, false));
    walked.assert_took("an expired finished key makes way for a new claim, whatever the body");
    assert_ne!(json(&again)["payment_id"], json(&first)["payment_id"]);
    assert_ne!(
        json(&again)["bank_reference"],
        json(&first)["bank_reference"]
    );
    assert_eq!(flows.bank.references().len(), 2);
    assert_eq!(flows.bank.moved_paise(), 50_000);
}

#[tokio::test]
async fn a_key_reused_past_its_last_generation_is_refused_and_calls_nothing() {
    let mut flows = Flows::against(LedgerBank::replying([])).await;
    let key = IdempotencyKey::mint();
    // Generation 0 and every reuse after expiry up to the last one: each a payment of its own.
    let movements = shared::movement_id::MAX_GENERATIONS + 1;
    for _ in 0..movements {
        assert_eq!(flows.pay(&key, BODY, None).await.status, 201);
        flows = flows.reopened_after("DELETE FROM idempotency_keys;").await;
    }
    // One more is a client reusing a key, not a retry: a 422 naming it, never a 500.
    let refused = flows
        .try_pay(&key, BODY, None)
        .await
        .expect_err("refused")
        .into_response();
    assert_eq!(refused.status(), 422);
    let body = axum::body::to_bytes(refused.into_body(), 64 * 1024)
        .await
        .expect("the problem's body");
    let problem: serde_json::Value = serde_json::from_slice(&body).expect("a JSON problem");
    assert_eq!(slug_of(&problem), "idempotency-key-reused", "{problem}");
    assert!(
        problem["detail"]
            .as_str()
            .unwrap_or("")
            .contains("65 requests")
    );
    assert_eq!(flows.bank.references().len(), movements as usize);
    assert_eq!(flows.rows("payments").await, i64::from(movements));
    assert_eq!(flows.rows("idempotency_keys").await, 0, "nothing claimed");
}

#[tokio::test]
async fn while_the_bank_fails_the_breaker_refuses_before_any_claim() {
    let failing = (0..2).map(|_| CallOutcome::MayBeInFlight {
        reason: "connection reset".into(),
    });
    let breaker = [
        "--bank-breaker-min-calls",
        "2",
        "--bank-breaker-open-seconds",
        "60",
    ];
    let flows = Flows::configured(LedgerBank::replying(failing), &breaker).await;
    for _ in 0..2 {
        assert_eq!(
            flows.pay(&IdempotencyKey::mint(), BODY, None).await.status,
            503
        );
    }
    let (walked, _collecting) = Walked::collect();
    let refused = flows.pay(&IdempotencyKey::mint(), BODY, None).await;
    assert_eq!(refused.status, 503);
    assert_eq!(problem_slug(&refused), "bank-unavailable");
    walked.assert_took(
        "while the breaker refuses, a new key is 503 bank unavailable and nothing is claimed",
    );
    assert_eq!(
        flows.bank.calls(),
        2,
        "the refused payment never reached the bank"
    );
    assert_eq!(
        flows.rows("idempotency_keys").await,
        2,
        "nor claimed its key"
    );
}
