//! Stopping a replica the way a load balancer can follow (`config::drain`), with the real
//! binary as a child process under a steady stream of payments: on SIGTERM `/readyz` replies 503
//! at once (within 100 ms of the signal); every payment sent during the grace period is served
//! (201, debited once); then the listeners close and the process exits 0 within the grace period
//! plus the deadline. Three rounds. And a request that outlives the deadline (a bank that
//! holds its reply for 20 s) does not hold the process: it exits within grace plus deadline,
//! the claim left for reconciliation.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bank_simulator::{BankSimulator, Knobs, RunningBank};

use crate::support::process::{BackendEnv, BackendProcess};
use crate::support::{TestDatabase, key_state_in, new_key, payment_body, send_pay, wait_for};

const GRACE: Duration = Duration::from_secs(2);
const DEADLINE: Duration = Duration::from_secs(5);
/// How many clients pay, one payment after another, while the backend stops.
const CLIENTS: usize = 4;
/// The load stops this long before the grace period ends, so no payment is sent as the
/// listener closes (that one may find it closed, which is the point of the grace period).
const MARGIN: Duration = Duration::from_millis(500);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigterm_turns_readyz_503_at_once_serves_through_the_grace_period_and_exits_in_time() {
    for round in 1..=3 {
        drain_round(round).await;
    }
}

async fn drain_round(round: u32) {
    let (bank, _database, mut backend) = stopping_backend(50, GRACE, DEADLINE).await;
    let http = reqwest::Client::new();

    let sending = Arc::new(AtomicBool::new(true));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let (http, url, sending) = (http.clone(), backend.url.clone(), Arc::clone(&sending));
            tokio::spawn(async move {
                let mut replies = Vec::new();
                while sending.load(Ordering::Relaxed) {
                    let key = new_key();
                    let body = payment_body(1_000);
                    let sent =
                        send_pay(&http, &url, 70 + client as u64, Some(&key), "elec-1", &body);
                    replies.push(sent.await.map(|reply| reply.status));
                }
                replies
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await; // the load is under way

    let signalled = Instant::now();
    backend.terminate();
    let not_ready_after = loop {
        let status = http
            .get(format!("{}/readyz", backend.url))
            .send()
            .await
            .expect("the backend still replies /readyz")
            .status();
        if status == 503 {
            break signalled.elapsed();
        }
        assert!(signalled.elapsed() < GRACE, "/readyz never turned 503");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    tokio::time::sleep(GRACE - MARGIN - signalled.elapsed().min(GRACE - MARGIN)).await;
    sending.store(false, Ordering::Relaxed);
    let mut served = 0;
    for client in clients {
        for reply in client.await.expect("the client ran") {
            let status = reply.expect("every payment sent in the grace period is replied to");
            assert_eq!(
                status, 201,
                "round {round}: a payment refused while draining"
            );
            served += 1;
        }
    }
    let status = backend
        .wait_exit(GRACE + DEADLINE + Duration::from_secs(2))
        .await;
    let exited_after = signalled.elapsed();
    assert_eq!(status.code(), Some(0), "a clean exit: {status:?}");
    assert!(
        not_ready_after < Duration::from_millis(100),
        "round {round}: /readyz turned 503 only {not_ready_after:?} after SIGTERM"
    );
    assert_eq!(bank.simulator.ledger().debits.len(), served);
    println!(
        "round {round}: /readyz 503 {not_ready_after:?} after SIGTERM, {served} payments \
         served while draining and before, exit after {exited_after:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_past_the_deadline_does_not_hold_the_process() {
    let (grace, deadline) = (Duration::from_secs(1), Duration::from_secs(2));
    let (_bank, database, mut backend) = stopping_backend(20_000, grace, deadline).await;
    let pool = sqlx::PgPool::connect(database.url())
        .await
        .expect("connect");
    let (user, key) = (81, new_key());
    let in_flight = tokio::spawn({
        let (url, key) = (backend.url.clone(), key.clone());
        async move {
            let http = reqwest::Client::new();
            send_pay(
                &http,
                &url,
                user,
                Some(&key),
                "elec-1",
                &payment_body(1_000),
            )
            .await
        }
    });
    wait_for(
        "the payment to be claimed",
        Duration::from_secs(15),
        async || key_state_in(&pool, user, &key).await.is_some(),
    )
    .await;

    let signalled = Instant::now();
    backend.terminate();
    let status = backend
        .wait_exit(grace + deadline + Duration::from_secs(2))
        .await;
    assert_eq!(status.code(), Some(0), "a clean exit: {status:?}");
    println!(
        "exited {:?} after SIGTERM, the request still in flight",
        signalled.elapsed()
    );
    assert!(
        in_flight.await.expect("the client ran").is_err(),
        "the cut request got no reply"
    );
}

/// A bank replying after `latency_ms`, a fresh database, and the backend binary on them that
/// drains for `grace`, then gives requests in flight `deadline`.
async fn stopping_backend(
    latency_ms: u64,
    grace: Duration,
    deadline: Duration,
) -> (RunningBank, TestDatabase, BackendProcess) {
    let knobs = Knobs {
        latency_ms,
        ..Knobs::default()
    };
    let bank = BankSimulator::spawn(knobs).await.expect("the bank starts");
    let database = TestDatabase::create().await;
    let mut env = BackendEnv::new(database.url(), &bank.url);
    env.extra = vec![
        ("SHUTDOWN_GRACE_SECONDS".into(), grace.as_secs().to_string()),
        (
            "SHUTDOWN_DEADLINE_SECONDS".into(),
            deadline.as_secs().to_string(),
        ),
    ];
    let backend = BackendProcess::start(&env).await;
    (bank, database, backend)
}
