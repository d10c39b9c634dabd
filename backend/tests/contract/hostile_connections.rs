//! Clients that attack the connection rather than the API, over raw sockets (what a hostile
//! client sends, not what an HTTP library would): a request head trickled a byte at a time, a
//! connection opened and left silent, a flood of headers, one enormous header. Each is cut or
//! refused before any work, nothing is written, and the server goes on serving.
//!
//! What came back (the README's bad-input table repeats it): a head that has not arrived
//! within `HEAD_READ_TIMEOUT_MS` closes the connection (with `408` if hyper can still say it);
//! a silent connection is closed after the same time; more than 100 headers, or a head over
//! hyper's buffer (about 400 KB), is `431 Request Header Fields Too Large` from hyper itself,
//! without a body: the request never reaches the application, so no problem document can be
//! written for it.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use backend::config::Limits;

use crate::support::{Options, StoreKind, TestApp, new_key, payment_body};

/// The head deadline these tests run with.
const HEAD_DEADLINE: Duration = Duration::from_millis(500);

/// How long a test waits for the server to close a connection before failing.
const PATIENCE: Duration = Duration::from_secs(10);

async fn app_with_a_short_head_deadline(store: StoreKind) -> TestApp {
    TestApp::spawn_with(Options {
        store,
        limits: Limits {
            head_read_timeout: HEAD_DEADLINE,
            ..Limits::default()
        },
        ..Options::default()
    })
    .await
}

fn connect(url: &str) -> TcpStream {
    let socket = TcpStream::connect(url.trim_start_matches("http://")).expect("connect");
    socket
        .set_read_timeout(Some(Duration::from_millis(100)))
        .expect("a read timeout");
    socket
}

/// Sends `head` a byte every 100 ms (never finishing it) until the server closes the
/// connection; what the server sent, and after how long. Panics past [`PATIENCE`].
fn trickle_until_closed(url: &str, head: &[u8]) -> (String, Duration) {
    let mut socket = connect(url);
    let started = Instant::now();
    let mut reply = Vec::new();
    for byte in head.iter().cycle() {
        assert!(
            started.elapsed() < PATIENCE,
            "the connection was still open after {PATIENCE:?}"
        );
        if socket.write_all(&[*byte]).is_err() {
            break;
        }
        let mut buffer = [0; 1024];
        match socket.read(&mut buffer) {
            Ok(0) => break,
            Ok(read) => reply.extend_from_slice(&buffer[..read]),
            Err(error) if error.kind() == ErrorKind::WouldBlock => {}
            Err(_) => break,
        }
    }
    (
        String::from_utf8_lossy(&reply).into_owned(),
        started.elapsed(),
    )
}

/// Sends `request` whole and reads the reply to its end.
fn exchange(url: &str, request: &[u8]) -> String {
    let mut socket = connect(url);
    socket
        .set_read_timeout(Some(PATIENCE))
        .expect("a read timeout");
    // The server may reply and close before it has read everything: a failed write is fine.
    let _ = socket.write_all(request);
    let mut reply = Vec::new();
    let _ = socket.read_to_end(&mut reply);
    String::from_utf8_lossy(&reply).into_owned()
}

fn pay_request(token: &str, extra_headers: &str) -> Vec<u8> {
    let body = payment_body(10_000).to_string();
    format!(
        "POST /v1/bills/elec-1/pay HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer {token}\r\n\
         Idempotency-Key: {}\r\nContent-Type: application/json\r\n{extra_headers}\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        new_key(),
        body.len()
    )
    .into_bytes()
}

async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(work)
        .await
        .expect("the client thread")
}

async fn a_head_trickled_a_byte_at_a_time_is_cut_at_the_head_deadline(store: StoreKind) {
    let app = app_with_a_short_head_deadline(store).await;
    let url = app.url.clone();
    let head = b"POST /v1/bills/elec-1/pay HTTP/1.1\r\nHost: test\r\nX-Slow: aaaaaaaaaaaaaaaaaaaa";
    let (reply, open_for) = blocking(move || trickle_until_closed(&url, head)).await;
    assert!(
        reply.is_empty() || reply.starts_with("HTTP/1.1 408"),
        "{reply}"
    );
    assert!(open_for >= HEAD_DEADLINE, "closed after {open_for:?}");
    app.assert_nothing_written("a head that never arrived")
        .await;
}

async fn a_silent_connection_is_closed_at_the_head_deadline(store: StoreKind) {
    let app = app_with_a_short_head_deadline(store).await;
    let url = app.url.clone();
    let closed_after = blocking(move || {
        let mut socket = connect(&url);
        let started = Instant::now();
        loop {
            assert!(
                started.elapsed() < PATIENCE,
                "a silent connection was still open after {PATIENCE:?}"
            );
            match socket.read(&mut [0; 64]) {
                Err(error) if error.kind() == ErrorKind::WouldBlock => continue,
                _ => return started.elapsed(),
            }
        }
    })
    .await;
    assert!(
        closed_after >= HEAD_DEADLINE,
        "closed after {closed_after:?}"
    );
}

async fn a_flood_of_headers_or_one_huge_header_is_refused_before_any_work(store: StoreKind) {
    let app = TestApp::spawn_on(store).await;
    let token = TestApp::token(5);
    let flood: String = (0..200)
        .map(|i| format!("X-Flood-{i}: {}\r\n", "a".repeat(100)))
        .collect();
    let huge = format!("X-Huge: {}\r\n", "a".repeat(1 << 20));
    for (what, extra) in [("200 headers", flood), ("a 1 MiB header", huge)] {
        let (url, request) = (app.url.clone(), pay_request(&token, &extra));
        let reply = blocking(move || exchange(&url, &request)).await;
        assert!(
            reply.starts_with("HTTP/1.1 431 Request Header Fields Too Large"),
            "{what}: {reply}"
        );
    }
    app.assert_nothing_written("refused heads").await;
    assert_eq!(app.ledger().await.debits.len(), 0);

    // The server goes on: a normal payment right after is taken.
    let (url, request) = (app.url.clone(), pay_request(&token, ""));
    let reply = blocking(move || exchange(&url, &request)).await;
    assert!(reply.starts_with("HTTP/1.1 201"), "{reply}");
}

for_each_store!(
    a_head_trickled_a_byte_at_a_time_is_cut_at_the_head_deadline,
    a_silent_connection_is_closed_at_the_head_deadline,
    a_flood_of_headers_or_one_huge_header_is_refused_before_any_work,
);
