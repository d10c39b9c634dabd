//! `steady-load` against a small HTTP server of the test's own (hyper's), which can stall an
//! reply, reply 503, or close each connection after one reply: the run must send every
//! request of the schedule exactly once, time a stall against every request it delayed, and
//! count failures as errors without losing the requests after them.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use super::{Args, run};
use crate::connection::RequestResult;
use crate::requests::Traffic;

/// What the test's server does, and what it saw.
#[derive(Default)]
struct Server {
    /// The request (counted from 1) held before its reply, and for how long.
    stall: Option<(u64, Duration)>,
    /// The request got 503.
    refuse: Option<u64>,
    /// Close each connection after one reply (`Connection: close`).
    one_reply_per_connection: bool,
    requests: AtomicU64,
    connections: AtomicU64,
}

/// Starts `server` on a port of its own; returns the API's base URL.
async fn serve(server: Arc<Server>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a free port");
    let address = listener.local_addr().expect("a bound address");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            server.connections.fetch_add(1, Ordering::SeqCst);
            let mut connection = http1::Builder::new();
            connection.keep_alive(!server.one_reply_per_connection);
            let server = Arc::clone(&server);
            let reply = service_fn(move |request| reply(Arc::clone(&server), request));
            tokio::spawn(connection.serve_connection(TokioIo::new(stream), reply));
        }
    });
    format!("http://{address}")
}

async fn reply(
    server: Arc<Server>,
    _request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, hyper::Error> {
    let number = server.requests.fetch_add(1, Ordering::SeqCst) + 1;
    if let Some((stalled, pause)) = server.stall
        && stalled == number
    {
        tokio::time::sleep(pause).await;
    }
    let mut response = Response::new(Full::new(Bytes::from_static(b"{}")));
    if server.refuse == Some(number) {
        *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    }
    Ok(response)
}

fn args(api: String, rate: u32, connections: u32) -> Args {
    Args {
        api,
        token: "a-token".to_owned(),
        rate,
        seconds: 1,
        traffic: Traffic::Replay,
        replay_key: Some("a-key".to_owned()),
        connections,
    }
}

fn latencies(results: &[RequestResult]) -> Vec<Duration> {
    results
        .iter()
        .filter_map(|o| o.as_ref().ok().copied())
        .collect()
}

#[tokio::test]
async fn a_stall_counts_against_every_request_it_delayed() {
    let server = Arc::new(Server {
        stall: Some((100, Duration::from_millis(300))),
        ..Server::default()
    });
    let api = serve(Arc::clone(&server)).await;
    // One connection: while the 100th request is held, the ones due after it cannot go out.
    let results = run(&args(api, 1_000, 1)).await.expect("a run");
    let latencies = latencies(&results);
    assert_eq!(results.len(), 1_000, "every request of the schedule");
    assert_eq!(latencies.len(), 1_000, "no errors");
    assert_eq!(
        server.requests.load(Ordering::SeqCst),
        1_000,
        "each sent once"
    );
    // Timed from when they were due, the ~300 requests due during the stall waited for it:
    // a closed-loop count would show one slow request, not a third of a second's worth.
    let delayed = latencies
        .iter()
        .filter(|l| **l >= Duration::from_millis(100))
        .count();
    assert!(delayed >= 150, "{delayed} requests were timed as delayed");
    assert!(latencies.iter().any(|l| *l >= Duration::from_millis(290)));
    let quick = latencies
        .iter()
        .filter(|l| **l < Duration::from_millis(100))
        .count();
    assert!(
        quick >= 500,
        "the requests before and well after the stall: {quick}"
    );
}

#[tokio::test]
async fn a_connection_the_server_closes_after_each_reply_is_opened_again_and_nothing_is_lost() {
    let server = Arc::new(Server {
        one_reply_per_connection: true,
        ..Server::default()
    });
    let api = serve(Arc::clone(&server)).await;
    let results = run(&args(api, 300, 2)).await.expect("a run");
    assert_eq!(results.len(), 300);
    assert_eq!(
        latencies(&results).len(),
        300,
        "no errors: {:?}",
        results.iter().find(|o| o.is_err())
    );
    assert_eq!(
        server.requests.load(Ordering::SeqCst),
        300,
        "each sent once"
    );
    assert_eq!(
        server.connections.load(Ordering::SeqCst),
        300,
        "one connection a reply"
    );
}

#[tokio::test]
async fn a_refused_request_is_an_error_and_the_connection_goes_on() {
    let server = Arc::new(Server {
        refuse: Some(10),
        ..Server::default()
    });
    let api = serve(Arc::clone(&server)).await;
    let results = run(&args(api, 200, 1)).await.expect("a run");
    assert_eq!(results.len(), 200);
    let errors: Vec<_> = results.iter().filter_map(|o| o.as_ref().err()).collect();
    assert_eq!(errors.len(), 1);
    assert!(errors[0].contains("503"), "{}", errors[0]);
    assert_eq!(server.requests.load(Ordering::SeqCst), 200);
    assert_eq!(server.connections.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn with_no_server_every_request_is_an_error() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a free port");
    let api = format!("http://{}", listener.local_addr().expect("a bound address"));
    drop(listener);
    let results = run(&args(api, 100, 4)).await.expect("a run");
    assert_eq!(results.len(), 100);
    assert!(
        results
            .iter()
            .all(|o| o.as_ref().is_err_and(|e| e.contains("connecting")))
    );
}

#[tokio::test]
async fn a_base_url_that_is_not_plain_http_is_refused_before_anything_is_sent() {
    for api in ["https://127.0.0.1:1", "127.0.0.1:1", "http://"] {
        let refused = run(&args(api.to_owned(), 10, 1)).await;
        assert!(refused.is_err(), "{api} was accepted");
    }
}
