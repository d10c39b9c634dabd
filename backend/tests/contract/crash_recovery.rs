//! Crash safety with real processes (SPEC §5, invariants 1, 2 and 5): the `backend` binary runs
//! as a child process on its own fresh database and is killed with `SIGKILL` at the worst
//! moments, while the bank simulator (in this process, on a real socket) keeps its ledger.
//! A new backend process on the same database then reconciles what the dead one left:
//! - killed after the bank debited but before the reply was saved: exactly one debit, the key
//!   `done` with the true result, and the client's retry replays it;
//! - killed while the bank was still working (it drops the request with the connection): no
//!   debit, the claim is released (kept, with its payment), and the client's retry claims it
//!   again and debits once, under the same reference;
//! - the same for a refund killed after the bank refunded;
//! - `SIGTERM` is a graceful stop: the request in flight still completes, and the exit is 0.
//!
//! - a process killed mid bank call: its claims' leases lapse within seconds and a surviving
//!   replica asks the bank at once; money that moved is final within seconds, a call the bank
//!   never saw is left alone until `stuck_after` (it could still be on its way).
//!
//! Where a test is about what happens after `stuck_after_minutes` (5 in `policy.yaml`), it
//! moves the claim's `claimed_at` back by six minutes in SQL instead of waiting five minutes:
//! that stands in for the passage of time.

use std::time::{Duration, Instant};

use crate::support::process::{BackendEnv, BackendProcess};
use crate::support::{
    TestDatabase, key_state_in, metric_in, new_key, payment_body, send_pay, send_refund, wait_for,
};
use bank_simulator::{BankSimulator, Knobs, RunningBank};
use sqlx::PgPool;

/// Bounds every wait for something the backend or the bank does on its own.
const PATIENCE: Duration = Duration::from_secs(15);

/// A bank, a fresh database, and a client: what outlives the backend processes of one test.
struct World {
    bank: RunningBank,
    pool: PgPool,
    http: reqwest::Client,
    database: TestDatabase,
}

impl World {
    async fn new(knobs: Knobs) -> World {
        let bank = BankSimulator::spawn(knobs).await.expect("bank starts");
        let database = TestDatabase::create().await;
        let pool = PgPool::connect(database.url())
            .await
            .expect("connect to the test database");
        World {
            bank,
            database,
            pool,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(60))
                .build()
                .expect("client"),
        }
    }

    async fn start_backend(&self) -> BackendProcess {
        BackendProcess::start(&BackendEnv::new(self.database.url(), &self.bank.url)).await
    }

    /// Ages every unfinished claim past `stuck_after_minutes` (standing in for five minutes).
    async fn age_unfinished_claims(&self) {
        let aged = sqlx::query(
            "UPDATE idempotency_keys SET claimed_at = claimed_at - interval '6 minutes' \
             WHERE state <> 'done'",
        )
        .execute(&self.pool)
        .await
        .expect("age the claims");
        assert_eq!(aged.rows_affected(), 1, "exactly one unfinished key");
    }

    async fn count(&self, sql: &str) -> i64 {
        sqlx::query_scalar(sql)
            .fetch_one(&self.pool)
            .await
            .expect("count rows")
    }

    async fn metrics(&self, backend: &BackendProcess) -> String {
        self.http
            .get(format!("{}/metrics", backend.admin_url))
            .send()
            .await
            .expect("metrics reply")
            .text()
            .await
            .expect("metrics text")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_killed_after_the_debit_is_reconciled_by_the_next_process_and_the_retry_replays() {
    // The bank debits, then holds its reply for a minute: the backend is waiting when it dies.
    let world = World::new(Knobs {
        lost_reply_rate: 1.0,
        lost_reply_delay_ms: 60_000,
        ..Knobs::default()
    })
    .await;
    let mut first = world.start_backend().await;
    let (user, key, body) = (21, new_key(), payment_body(230_000));

    let in_flight = tokio::spawn({
        let (http, url, key, body) = (
            world.http.clone(),
            first.url.clone(),
            key.clone(),
            body.clone(),
        );
        async move { send_pay(&http, &url, user, Some(&key), "elec-1", &body).await }
    });
    wait_for("the bank to record the debit", PATIENCE, async || {
        world.bank.simulator.ledger().debits.len() == 1
    })
    .await;
    first.kill_hard();
    let lost = in_flight.await.expect("the client task ran");
    assert!(lost.is_err(), "the killed backend never replied: {lost:?}");
    assert_eq!(
        key_state_in(&world.pool, user, &key).await.as_deref(),
        Some("started"),
        "the dead process left its claim behind"
    );
    let pending = "SELECT count(*) FROM payments WHERE status = 'pending'";
    assert_eq!(world.count(pending).await, 1);

    world.age_unfinished_claims().await;
    let second = world.start_backend().await;
    wait_for(
        "the new process's reconciler to finish the key",
        PATIENCE,
        async || key_state_in(&world.pool, user, &key).await.as_deref() == Some("done"),
    )
    .await;

    let ledger = world.bank.simulator.ledger();
    assert_eq!(ledger.debits.len(), 1, "one debit, never a second");
    let reference = ledger.debits[0].reference.clone();
    let payment_id: uuid::Uuid = sqlx::query_scalar(
        "SELECT payment_id FROM payments WHERE status = 'succeeded' AND bank_reference = $1",
    )
    .bind(&reference)
    .fetch_one(&world.pool)
    .await
    .expect("the payment row under the debited reference was finished as succeeded");
    assert_eq!(reference, format!("pay-{payment_id}"), "the claim's own");
    assert_eq!(world.count("SELECT count(*) FROM payments").await, 1);
    let metrics = world.metrics(&second).await;
    assert_eq!(
        metric_in(
            &metrics,
            r#"payments_reconcile_keys_resolved_total{operation="pay_bill",outcome="succeeded"}"#
        ),
        1.0,
        "{metrics}"
    );

    let retry = send_pay(&world.http, &second.url, user, Some(&key), "elec-1", &body)
        .await
        .expect("the new backend replies");
    assert_eq!(
        retry.status,
        201,
        "{}",
        String::from_utf8_lossy(&retry.bytes)
    );
    assert!(retry.is_replay(), "the first attempt's result, replayed");
    let reply = retry.json();
    assert_eq!(reply["payment_id"], payment_id.to_string());
    assert_eq!(reply["status"], "succeeded");
    assert_eq!(reply["bank_reference"], reference);
    assert_eq!(
        retry.header("location"),
        Some(format!("/v1/payments/{payment_id}").as_str())
    );
    assert_eq!(world.bank.simulator.ledger().debits.len(), 1, "still one");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_killed_before_the_bank_acted_is_released_and_the_retry_debits_once() {
    // The bank takes 1.5 s before it decides anything; the backend dies while it waits, and the
    // bank drops the request with the closed connection.
    let world = World::new(Knobs {
        latency_ms: 1_500,
        ..Knobs::default()
    })
    .await;
    let mut first = world.start_backend().await;
    let (user, key, body) = (22, new_key(), payment_body(1_000));

    let in_flight = tokio::spawn({
        let (http, url, key, body) = (
            world.http.clone(),
            first.url.clone(),
            key.clone(),
            body.clone(),
        );
        async move { send_pay(&http, &url, user, Some(&key), "elec-1", &body).await }
    });
    wait_for("the claim to be committed", PATIENCE, async || {
        key_state_in(&world.pool, user, &key).await.is_some()
    })
    .await;
    // The bank call follows the claim at once; give it a moment to reach the sleeping bank.
    tokio::time::sleep(Duration::from_millis(200)).await;
    first.kill_hard();
    assert!(in_flight.await.expect("the client task ran").is_err());
    // Past the bank's latency: a request it had kept would have debited by now.
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    assert!(
        world.bank.simulator.ledger().debits.is_empty(),
        "the bank never debited the dead backend's request"
    );
    assert_eq!(
        key_state_in(&world.pool, user, &key).await.as_deref(),
        Some("started")
    );

    world.bank.simulator.set_knobs(Knobs::default());
    world.age_unfinished_claims().await;
    let second = world.start_backend().await;
    wait_for(
        "the new process's reconciler to release the key",
        PATIENCE,
        async || key_state_in(&world.pool, user, &key).await.as_deref() == Some("released"),
    )
    .await;
    let pending = "SELECT count(*) FROM payments WHERE status = 'pending'";
    assert_eq!(
        world.count(pending).await,
        1,
        "the released claim keeps its payment for the retry"
    );
    let metrics = world.metrics(&second).await;
    assert_eq!(
        metric_in(
            &metrics,
            r#"payments_reconcile_keys_resolved_total{operation="pay_bill",outcome="released"}"#
        ),
        1.0,
        "{metrics}"
    );

    let retry = send_pay(&world.http, &second.url, user, Some(&key), "elec-1", &body)
        .await
        .expect("the new backend replies");
    assert_eq!(
        retry.status,
        201,
        "{}",
        String::from_utf8_lossy(&retry.bytes)
    );
    assert!(!retry.is_replay(), "the retry did the work itself");
    let ledger = world.bank.simulator.ledger();
    assert_eq!(ledger.debits.len(), 1, "debited once, by the retry");
    assert_eq!(
        ledger.debits[0].reference,
        retry.json()["bank_reference"],
        "under the released claim's reference"
    );
    assert_eq!(
        key_state_in(&world.pool, user, &key).await.as_deref(),
        Some("done")
    );
    let succeeded = "SELECT count(*) FROM payments WHERE status = 'succeeded'";
    assert_eq!(world.count(succeeded).await, 1);
    assert_eq!(world.count("SELECT count(*) FROM payments").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_killed_after_the_refund_is_reconciled_and_the_retry_replays_one_refund() {
    let world = World::new(Knobs::default()).await;
    let mut first = world.start_backend().await;
    let user = 23;
    let paid = send_pay(
        &world.http,
        &first.url,
        user,
        Some(&new_key()),
        "elec-1",
        &payment_body(10_000),
    )
    .await
    .expect("backend replies");
    assert_eq!(paid.status, 201);
    let payment_id = paid.json()["payment_id"]
        .as_str()
        .expect("payment id")
        .to_owned();

    // From now on the bank refunds, then holds its reply.
    world.bank.simulator.set_knobs(Knobs {
        lost_reply_rate: 1.0,
        lost_reply_delay_ms: 60_000,
        ..Knobs::default()
    });
    let key = new_key();
    let in_flight = tokio::spawn({
        let (http, url, key, payment_id) = (
            world.http.clone(),
            first.url.clone(),
            key.clone(),
            payment_id.clone(),
        );
        async move { send_refund(&http, &url, user, &key, &payment_id, 4_000).await }
    });
    wait_for("the bank to record the refund", PATIENCE, async || {
        world.bank.simulator.ledger().refunds.len() == 1
    })
    .await;
    first.kill_hard();
    assert!(in_flight.await.expect("the client task ran").is_err());
    assert_eq!(
        key_state_in(&world.pool, user, &key).await.as_deref(),
        Some("started")
    );

    world.age_unfinished_claims().await;
    let second = world.start_backend().await;
    wait_for(
        "the new process's reconciler to finish the refund key",
        PATIENCE,
        async || key_state_in(&world.pool, user, &key).await.as_deref() == Some("done"),
    )
    .await;
    let refund_id: uuid::Uuid =
        sqlx::query_scalar("SELECT refund_id FROM refunds WHERE status = 'succeeded'")
            .fetch_one(&world.pool)
            .await
            .expect("the refund row was finished as succeeded");
    let reference = format!("refund-{refund_id}");

    let retry = send_refund(&world.http, &second.url, user, &key, &payment_id, 4_000)
        .await
        .expect("the new backend replies");
    assert_eq!(
        retry.status,
        201,
        "{}",
        String::from_utf8_lossy(&retry.bytes)
    );
    assert!(retry.is_replay(), "the first attempt's refund, replayed");
    let reply = retry.json();
    assert_eq!(reply["refund_id"], refund_id.to_string());
    assert_eq!(reply["payment_id"], payment_id);
    assert_eq!(reply["amount_paise"], 4_000);
    assert_eq!(reply["bank_reference"], reference);

    let ledger = world.bank.simulator.ledger();
    assert_eq!(ledger.debits.len(), 1);
    assert_eq!(ledger.refunds.len(), 1, "one refund, never a second");
    assert_eq!(ledger.refunds[0].reference, reference);
    assert_eq!(ledger.refunds[0].amount_paise, 4_000);
    assert_eq!(world.count("SELECT count(*) FROM refunds").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_the_request_in_flight_finish_and_the_backend_exits_zero() {
    let world = World::new(Knobs {
        latency_ms: 1_000,
        ..Knobs::default()
    })
    .await;
    let mut backend = world.start_backend().await;
    let (user, key, body) = (24, new_key(), payment_body(5_000));

    let in_flight = tokio::spawn({
        let (http, url, key, body) = (
            world.http.clone(),
            backend.url.clone(),
            key.clone(),
            body.clone(),
        );
        async move { send_pay(&http, &url, user, Some(&key), "elec-1", &body).await }
    });
    wait_for("the claim to be committed", PATIENCE, async || {
        key_state_in(&world.pool, user, &key).await.is_some()
    })
    .await;
    backend.terminate();

    let reply = in_flight
        .await
        .expect("the client task ran")
        .expect("the draining backend still replies");
    assert_eq!(
        reply.status,
        201,
        "{}",
        String::from_utf8_lossy(&reply.bytes)
    );
    assert!(!reply.is_replay());
    let status = backend.wait_exit(PATIENCE).await;
    assert_eq!(status.code(), Some(0), "a clean exit: {status:?}");
    assert_eq!(
        key_state_in(&world.pool, user, &key).await.as_deref(),
        Some("done")
    );
    assert_eq!(world.bank.simulator.ledger().debits.len(), 1);
}

/// Starts `count` payments through `backend` (each its own key) and returns their keys once
/// every one is claimed.
async fn payments_in_flight(world: &World, backend: &BackendProcess, count: usize) -> Vec<String> {
    let keys: Vec<String> = (0..count).map(|_| new_key()).collect();
    for key in &keys {
        let (http, url, key) = (world.http.clone(), backend.url.clone(), key.clone());
        tokio::spawn(async move {
            send_pay(&http, &url, 31, Some(&key), "elec-1", &payment_body(1_000)).await
        });
    }
    let started = "SELECT count(*) FROM idempotency_keys WHERE state = 'started'";
    wait_for("every payment claimed", PATIENCE, async || {
        world.count(started).await == count as i64
    })
    .await;
    keys
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_mid_call_has_its_debited_keys_final_within_seconds() {
    // The bank debits 2 s after each call, whether or not the caller is still there.
    let world = World::new(Knobs {
        latency_ms: 2_000,
        executes_abandoned_calls: true,
        ..Knobs::default()
    })
    .await;
    let survivor = world.start_backend().await;
    let mut dying = world.start_backend().await;
    payments_in_flight(&world, &dying, 5).await;
    // Killed once every call is at the bank, not merely claimed: a call still on its way when
    // its sender dies never arrives, and its key rightly waits for stuck_after (the next test).
    wait_for("every call at the bank", PATIENCE, async || {
        world.bank.simulator.check_stats().money_calls_received == 5
    })
    .await;
    dying.kill_hard();
    let killed = Instant::now();
    let done = "SELECT count(*) FROM idempotency_keys WHERE state = 'done'";
    // Without the claim's lease this would wait for stuck_after (5 minutes).
    wait_for(
        "the survivor to finish every key the dead replica held",
        Duration::from_secs(60),
        async || world.count(done).await == 5,
    )
    .await;
    eprintln!(
        "every debited key the killed replica held was final {:.1?} after the kill",
        killed.elapsed()
    );
    assert_eq!(world.bank.simulator.ledger().debits.len(), 5);
    let succeeded = "SELECT count(*) FROM payments WHERE status = 'succeeded'";
    assert_eq!(world.count(succeeded).await, 5);
    assert!(
        metric_in(
            &world.metrics(&survivor).await,
            "payments_reconcile_stuck_keys_found_total"
        ) >= 5.0,
        "the survivor's reconciler resolved them"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_the_bank_never_saw_is_not_released_before_stuck_after_when_its_holder_dies() {
    // The bank drops each call with its caller: it never sees them.
    let world = World::new(Knobs {
        latency_ms: 2_000,
        ..Knobs::default()
    })
    .await;
    let survivor = world.start_backend().await;
    let mut dying = world.start_backend().await;
    payments_in_flight(&world, &dying, 3).await;
    dying.kill_hard();
    wait_for(
        "the survivor to ask the bank about the lapsed claims",
        Duration::from_secs(60),
        async || {
            metric_in(
                &world.metrics(&survivor).await,
                "payments_reconcile_stuck_keys_found_total",
            ) >= 3.0
        },
    )
    .await;
    // "Never seen" before stuck_after: a call could still be on its way, so nothing is
    // released, however often the bank is asked; the keys wait for their claims to be
    // stuck_after old.
    wait_for(
        "the survivor to ask again",
        Duration::from_secs(30),
        async || {
            metric_in(
                &world.metrics(&survivor).await,
                "payments_reconcile_stuck_keys_found_total",
            ) >= 6.0
        },
    )
    .await;
    let started = "SELECT count(*) FROM idempotency_keys WHERE state = 'started'";
    assert_eq!(world.count(started).await, 3);
    let pending = "SELECT count(*) FROM payments WHERE status = 'pending'";
    assert_eq!(world.count(pending).await, 3);
    assert!(world.bank.simulator.ledger().debits.is_empty());
}
