//! The backend's limits, tried as an abusive or overloading client would (issue 12): a body
//! trickled past the read deadline is cut with 408 and nothing claimed; more requests than
//! `MAX_CONCURRENT_REQUESTS` are shed at once with 503 (never left to time out), and after the
//! clients retry the ledger and the tables still agree; a payment that cannot get a bank call
//! within `BANK_QUEUE_WAIT_MS` is released unsent and its retry pays once; a reply past the
//! request deadline is a 503 while the claimed work goes on; the metrics and detailed
//! readiness are only on the admin listener, and a custom method makes no new series.

use std::io::{Read, Write};
use std::time::Duration;

use backend::config::Limits;
use bank_simulator::Knobs;
use futures_util::future::join_all;

use crate::support::load::{ClientRun, assert_ledger_matches_tables, pay_until_final};
use crate::support::{Options, StoreKind, TestApp, new_key, payment_body};

/// Sends a payment's head and the first bytes of its body, then nothing; the reply the
/// server gives without waiting for the rest.
fn trickle_a_body(url: &str, token: &str) -> String {
    let addr = url.trim_start_matches("http://");
    let mut socket = std::net::TcpStream::connect(addr).expect("connect");
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("a read timeout");
    let head = format!(
        "POST /v1/bills/elec-1/pay HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
         Idempotency-Key: {}\r\nContent-Type: application/json\r\nContent-Length: 60\r\n\r\n\
         {{\"amount_paise\": 1",
        new_key()
    );
    socket.write_all(head.as_bytes()).expect("send the head");
    let mut reply = Vec::new();
    let _ = socket.read_to_end(&mut reply);
    String::from_utf8_lossy(&reply).into_owned()
}

async fn a_trickled_body_is_cut_at_the_read_deadline_and_nothing_is_claimed(store: StoreKind) {
    let app = TestApp::spawn_with(Options {
        store,
        limits: Limits {
            body_read_timeout: Duration::from_millis(300),
            ..Limits::default()
        },
        ..Options::default()
    })
    .await;
    let (url, token) = (app.url.clone(), TestApp::token(3));
    let reply = tokio::task::spawn_blocking(move || trickle_a_body(&url, &token))
        .await
        .expect("the client thread");
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
    assert!(reply.contains("/problems/body-timeout"), "{reply}");
    app.assert_nothing_written("a body that never arrived")
        .await;
}

async fn more_requests_than_the_limit_are_shed_with_503_and_the_ledger_still_matches(
    store: StoreKind,
) {
    let app = TestApp::spawn_with(Options {
        store,
        knobs: Knobs {
            latency_ms: 300,
            ..Knobs::default()
        },
        limits: Limits {
            max_concurrent_requests: 4,
            ..Limits::default()
        },
        ..Options::default()
    })
    .await;
    // Forty rule-following clients at once: each retries what was shed, with the same key.
    let runs: Vec<ClientRun> =
        join_all((0..40).map(|i| pay_until_final(&app, i % 20 + 1, new_key()))).await;
    let shed: u32 = runs.iter().map(|run| run.service_unavailable).sum();
    println!(
        "overload ({store:?}): 40 clients at once against MAX_CONCURRENT_REQUESTS=4 and a 300 ms \
         bank: {shed} attempts shed with 503, none timed out; every client paid in the end"
    );
    assert!(shed > 0, "the limit shed some");
    assert_eq!(app.state.metrics.requests_shed.get(), u64::from(shed));
    assert_ledger_matches_tables(&app, &runs).await;
}

async fn a_payment_that_gets_no_bank_call_is_released_unsent_and_its_retry_pays_once(
    store: StoreKind,
) {
    let app = TestApp::spawn_with(Options {
        store,
        knobs: Knobs {
            latency_ms: 800,
            ..Knobs::default()
        },
        limits: Limits {
            max_bank_calls: 1,
            bank_queue_wait: Duration::from_millis(50),
            ..Limits::default()
        },
        ..Options::default()
    })
    .await;
    let (first_key, second_key) = (new_key(), new_key());
    let first_body = payment_body(500);
    let (first, second) =
        tokio::join!(app.pay(1, Some(&first_key), "elec-1", &first_body), async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            app.pay(2, Some(&second_key), "elec-1", &payment_body(700))
                .await
        });
    assert_eq!(first.status, 201);
    let busy = second.assert_problem(503, "service-unavailable");
    assert!(
        busy["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains("at capacity")),
        "{busy}"
    );
    assert_eq!(
        app.key_state(2, &second_key).await.as_deref(),
        Some("released"),
        "nothing was sent, so the claim was released at once"
    );
    let retry = app
        .pay(2, Some(&second_key), "elec-1", &payment_body(700))
        .await;
    assert_eq!(retry.status, 201);
    let ledger = app.ledger().await;
    assert_eq!(ledger.debits.len(), 2, "each payment debited once");
    assert_eq!(
        app.metric(r#"payments_bank_calls_total{call="debit",outcome="busy"}"#)
            .await,
        1.0
    );
}

async fn a_reply_past_the_request_deadline_is_503_and_the_work_goes_on(store: StoreKind) {
    let app = TestApp::spawn_with(Options {
        store,
        knobs: Knobs {
            latency_ms: 1_000,
            ..Knobs::default()
        },
        limits: Limits {
            request_timeout: Duration::from_millis(300),
            ..Limits::default()
        },
        ..Options::default()
    })
    .await;
    let key = new_key();
    let late = app.pay(4, Some(&key), "elec-1", &payment_body(900)).await;
    late.assert_problem(503, "service-unavailable");
    crate::support::wait_for(
        "the claimed work to finish",
        Duration::from_secs(10),
        async || app.key_state(4, &key).await.as_deref() == Some("done"),
    )
    .await;
    let retry = app.pay(4, Some(&key), "elec-1", &payment_body(900)).await;
    assert_eq!(retry.status, 201);
    assert!(
        retry.is_replay(),
        "the work the deadline cut off had finished"
    );
    assert_eq!(app.ledger().await.debits.len(), 1);
}

async fn metrics_and_detailed_readiness_are_only_on_the_admin_listener(store: StoreKind) {
    let app = TestApp::spawn_on(store).await;
    let get = async |url: String| {
        crate::support::Received::from(app.http.get(url).send().await.expect("replies")).await
    };
    get(format!("{}/metrics", app.url))
        .await
        .assert_problem(404, "not-found");
    assert_eq!(get(format!("{}/metrics", app.admin_url)).await.status, 200);
    let readiness = get(format!("{}/readyz", app.admin_url)).await;
    assert_eq!(readiness.status, 200);
    assert_eq!(readiness.json()["database"]["ready"], true);
    assert_eq!(get(format!("{}/readyz", app.url)).await.status, 200);

    // Methods nobody uses make no new series: they count as `other`.
    for method in ["FOO", "BAR", "BAZ"] {
        let reply = app
            .http
            .request(
                method.parse().expect("a token"),
                format!("{}/v1/payments/x", app.url),
            )
            .send()
            .await
            .expect("replies");
        assert!(reply.status().is_client_error(), "{method}");
    }
    let text = get(format!("{}/metrics", app.admin_url)).await;
    let text = String::from_utf8_lossy(&text.bytes);
    assert!(!text.contains("FOO") && !text.contains("BAZ"), "{text}");
    let others: f64 = text
        .lines()
        .filter(|line| line.starts_with("payments_http_requests_total{"))
        .filter(|line| line.contains("method=\"other\""))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert_eq!(others, 3.0, "{text}");
}

for_each_store!(
    a_trickled_body_is_cut_at_the_read_deadline_and_nothing_is_claimed,
    more_requests_than_the_limit_are_shed_with_503_and_the_ledger_still_matches,
    a_payment_that_gets_no_bank_call_is_released_unsent_and_its_retry_pays_once,
    a_reply_past_the_request_deadline_is_503_and_the_work_goes_on,
    metrics_and_detailed_readiness_are_only_on_the_admin_listener,
);
