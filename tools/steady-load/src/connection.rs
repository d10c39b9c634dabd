//! One keep-alive connection of a run, as wrk2 keeps them: it takes the next request of the
//! schedule when it is free, waits until the request may go out, sends it, reads the whole
//! reply and records how long it took. The requests and the connection's own I/O are driven in
//! one task, so a request costs no hand-over between tasks. A connection the server closes
//! between replies is opened again; one that fails under a request is opened again for the next
//! request, and the request it failed on is an error.

use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::requests::Requests;
use crate::schedule::{Due, Schedule};

/// What one request came to: its latency, or why it failed.
pub type RequestResult = Result<Duration, String>;

/// How long a reply may take before the request counts as failed.
const REPLY_TIMEOUT: Duration = Duration::from_secs(30);

/// Sends requests of `schedule` over one connection at a time to `address` (`host:port`)
/// until every request has been taken; returns the outcome of each request it sent.
pub async fn send_over_one_connection(
    address: &str,
    schedule: &Schedule,
    requests: &Requests,
) -> Vec<RequestResult> {
    let mut results = Vec::new();
    let mut next = schedule.take();
    while let Some(due) = next {
        due.wait().await;
        next = match connect(address).await {
            Ok((sender, connection)) => {
                let sending = send_while_open(due, sender, schedule, requests, &mut results);
                tokio::join!(sending, connection).0
            }
            Err(error) => {
                results.push(Err(error));
                schedule.take()
            }
        };
    }
    results
}

/// Opens a connection: the handle to send on, and the connection's I/O to drive.
async fn connect(
    address: &str,
) -> Result<
    (
        SendRequest<Full<Bytes>>,
        http1::Connection<TokioIo<TcpStream>, Full<Bytes>>,
    ),
    String,
> {
    let stream = TcpStream::connect(address)
        .await
        .map_err(|error| format!("connecting to {address}: {error}"))?;
    stream
        .set_nodelay(true)
        .map_err(|error| format!("setting TCP_NODELAY: {error}"))?;
    http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|error| format!("starting HTTP/1.1: {error}"))
}

/// Sends `first`, then each request taken next, on `sender`, recording each outcome, while
/// the connection lasts. Returns the request to send on a new connection: one the server
/// closed this connection before (it had not gone out), or the next after one the connection
/// failed under (that one is an error); `None` once the schedule is done. Dropping `sender` on
/// return lets the connection end.
async fn send_while_open(
    first: Due,
    mut sender: SendRequest<Full<Bytes>>,
    schedule: &Schedule,
    requests: &Requests,
    results: &mut Vec<RequestResult>,
) -> Option<Due> {
    let mut due = first;
    let mut replied_here = false;
    loop {
        if sender.ready().await.is_err() {
            if replied_here {
                return Some(due);
            }
            // A server that closes every new connection would have this loop forever.
            results.push(Err("the server closed a new connection".to_owned()));
            return schedule.take();
        }
        let sent = Instant::now();
        let exchanged = tokio::time::timeout(REPLY_TIMEOUT, exchange(&mut sender, requests, due))
            .await
            .unwrap_or_else(|_| {
                let waited = REPLY_TIMEOUT.as_secs();
                Err(Failure::Connection(format!("no reply within {waited} s")))
            });
        match exchanged {
            Ok(()) => results.push(Ok(due.latency(sent, Instant::now()))),
            // A 4xx or 5xx reply leaves the connection usable.
            Err(Failure::Status(status)) => results.push(Err(format!("status {status}"))),
            Err(Failure::Connection(error)) => {
                results.push(Err(error));
                return schedule.take();
            }
        }
        replied_here = true;
        due = schedule.take()?;
        due.wait().await;
    }
}

/// Why a request failed.
enum Failure {
    /// The server replied, but not with a 2xx.
    Status(hyper::StatusCode),
    /// No whole reply: the connection is not to be used again.
    Connection(String),
}

impl From<String> for Failure {
    fn from(error: String) -> Failure {
        Failure::Connection(error)
    }
}

/// Sends request `due` and reads its whole reply (the body is part of what a client waits
/// for).
async fn exchange(
    sender: &mut SendRequest<Full<Bytes>>,
    requests: &Requests,
    due: Due,
) -> Result<(), Failure> {
    let reply = sender
        .send_request(requests.build(due.index))
        .await
        .map_err(|error| format!("sending: {error}"))?;
    let status = reply.status();
    reply
        .into_body()
        .collect()
        .await
        .map_err(|error| format!("reading the reply: {error}"))?;
    if status.is_success() {
        Ok(())
    } else {
        Err(Failure::Status(status))
    }
}
