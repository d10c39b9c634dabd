//! `Prefer: wait=N` at the edge, under the real runtime (`workerd`) in front of a real backend,
//! PostgreSQL and bank simulator (SPEC §4): the key's Durable Object holds the attempts that find
//! the key in flight and hands each the first attempt's reply, with no backend request for any
//! of them. Requests that reached the backend are counted at its `/metrics`, debits at the
//! bank's `/ledger`.
#![cfg(not(target_arch = "wasm32"))]

mod support;

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use serde_json::json;
use support::{Call, PAY_ROUTE, Received, Stack, StackOptions, Via};

const PAY_BODY: &str = r#"{"amount_paise":230000,"payer_vpa":"asha@okbank"}"#;

fn waiting_call(key: &str, wait: &str) -> Call {
    Call::pay(7, key, "elec-42", PAY_BODY).with_header("prefer", wait)
}

/// Starts the first attempt (no wait) and returns once the backend has claimed its key, so the
/// attempts sent after find the key in flight at the edge.
async fn first_attempt_in_flight(stack: &Stack, key: &str) -> tokio::task::JoinHandle<Received> {
    let first = tokio::spawn({
        let (http, url, call) = (
            stack.http.clone(),
            stack.edge_url.clone(),
            Call::pay(7, key, "elec-42", PAY_BODY),
        );
        async move {
            let response = call.request(&http, &url).send().await;
            Received::from(response.expect("the edge replies")).await
        }
    });
    let status = Call::get(&format!("/v1/idempotency-keys/{key}"), Some(7));
    let deadline = Instant::now() + Duration::from_secs(10);
    while stack.send(Via::Backend, &status).await.status != 200 {
        assert!(
            Instant::now() < deadline,
            "the first attempt reached the backend"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    first
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_waiting_attempts_get_the_first_reply_and_the_backend_sees_one_request() {
    let stack = Stack::start(StackOptions {
        bank_latency_ms: 2_000,
        ..StackOptions::default()
    })
    .await;
    const ROUNDS: u64 = 3;
    for round in 1..=ROUNDS {
        let key = uuid::Uuid::new_v4().to_string();
        let call = waiting_call(&key, "wait=10");
        let started = Instant::now();
        let attempts = (0..20).map(|_| async {
            let reply = stack.send(Via::Edge, &call).await;
            (reply, started.elapsed())
        });
        let timed: Vec<(Received, Duration)> = join_all(attempts).await;
        let first_took = timed.iter().find(|(a, _)| !a.is_replay()).map(|(_, t)| *t);
        let slowest_waited = timed
            .iter()
            .filter(|(a, _)| a.is_replay())
            .map(|(_, t)| *t)
            .max();
        eprintln!(
            "round {round}: first attempt {first_took:?}, slowest waited replay {slowest_waited:?}"
        );
        let replies: Vec<&Received> = timed.iter().map(|(reply, _)| reply).collect();
        let first: Vec<&&Received> = replies.iter().filter(|a| !a.is_replay()).collect();
        assert_eq!(
            first.len(),
            1,
            "round {round}: one attempt went to the backend"
        );
        for reply in &replies {
            assert_eq!(reply.status, 201, "round {round}: no 409, no error");
            assert_eq!(reply.bytes, first[0].bytes, "round {round}: the same body");
            assert_eq!(reply.header("location"), first[0].header("location"));
        }
        let replays: Vec<&&Received> = replies.iter().filter(|a| a.is_replay()).collect();
        assert_eq!(replays.len(), 19, "round {round}");
        for replay in replays {
            assert_eq!(replay.header("preference-applied"), Some("wait=10"));
        }
        assert_eq!(
            stack.backend_requests(PAY_ROUTE).await,
            round,
            "round {round}: the waiters never reached the backend"
        );
        let reference = first[0].json()["bank_reference"].clone();
        let debits = stack.debits().await;
        let for_key = debits
            .iter()
            .filter(|d| d["reference"] == reference)
            .count();
        assert_eq!(for_key, 1, "round {round}: one debit");
    }
    stack.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_that_runs_out_is_409_and_a_pending_outcome_reaches_every_waiter() {
    let stack = Stack::start(StackOptions {
        bank_latency_ms: 3_000,
        ..StackOptions::default()
    })
    .await;

    // The wait runs out before the 3 s bank replies: 409, as without waiting.
    let key = uuid::Uuid::new_v4().to_string();
    let first = first_attempt_in_flight(&stack, &key).await;
    let ran_out = stack.send(Via::Edge, &waiting_call(&key, "wait=1")).await;
    ran_out.assert_problem(409, "request-in-progress");
    assert_eq!(ran_out.header("retry-after"), Some("1"));
    assert_eq!(ran_out.header("preference-applied"), Some("wait=1"));
    assert_eq!(first.await.expect("task").status, 201);
    assert_eq!(stack.backend_requests(PAY_ROUTE).await, 1);

    // The bank's reply is lost: the backend replies 503 outcome pending to the first attempt when
    // its bank call times out, and every waiter gets that same reply from the edge.
    stack
        .set_bank_knobs(json!({ "latency_ms": 0, "lost_reply_rate": 1.0 }))
        .await;
    let key = uuid::Uuid::new_v4().to_string();
    let first = first_attempt_in_flight(&stack, &key).await;
    let call = waiting_call(&key, "wait=10");
    let waiters = join_all((0..5).map(|_| stack.send(Via::Edge, &call))).await;
    let first = first.await.expect("task");
    first.assert_problem(503, "outcome-pending");
    for waiter in &waiters {
        waiter.assert_problem(503, "outcome-pending");
        assert_eq!(waiter.bytes, first.bytes);
        assert_eq!(waiter.header("retry-after"), Some("5"));
        assert_eq!(waiter.header("preference-applied"), Some("wait=10"));
        assert!(!waiter.is_replay(), "a pending outcome is not a replay");
    }
    assert_eq!(
        stack.backend_requests(PAY_ROUTE).await,
        2,
        "the waiters never reached the backend"
    );
    stack.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_that_hang_up_disturb_nothing() {
    let stack = Stack::start(StackOptions {
        bank_latency_ms: 2_000,
        ..StackOptions::default()
    })
    .await;
    let key = uuid::Uuid::new_v4().to_string();
    let first = first_attempt_in_flight(&stack, &key).await;
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .expect("client");
    let call = waiting_call(&key, "wait=10");
    let gave_up = join_all((0..10).map(|_| call.request(&impatient, &stack.edge_url).send())).await;
    assert!(gave_up.iter().all(Result::is_err), "every waiter hung up");
    // One patient waiter still gets the reply; the first attempt was not disturbed.
    let patient = stack.send(Via::Edge, &call).await;
    let first = first.await.expect("task");
    assert_eq!(first.status, 201);
    assert_eq!(patient.status, 201);
    assert!(patient.is_replay());
    assert_eq!(patient.bytes, first.bytes);
    assert_eq!(stack.backend_requests(PAY_ROUTE).await, 1);
    assert_eq!(stack.debits().await.len(), 1);
    stack.stop().await;
}
