//! The accept loop: serves a router on a listener over HTTP/1.1 with a deadline on every
//! request head, and drains on shutdown.
//!
//! axum's `serve` gives hyper no timer, so it cannot bound how long a request's head takes: a
//! client sending its headers a byte a second (tried: 75 s, still open) or sending nothing
//! keeps a connection, and its file descriptor, for as long as it likes. Here hyper gets a
//! timer and `header_read_timeout`: a head that has not fully arrived within the limit closes
//! the connection, and since hyper starts that clock whenever it waits for a head, an idle
//! keep-alive connection is closed after the same time. Bodies have their own deadline
//! (`BODY_READ_TIMEOUT_MS`, [`super::body`]); whole requests theirs ([`super::limits`]).
//!
//! On shutdown the loop stops accepting, every open connection finishes the request it is
//! serving and closes (hyper's graceful shutdown), and [`serve`] returns once all have.

use std::future::Future;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tower::ServiceExt;

/// How long accepting pauses after it fails (out of file descriptors, say) before trying again.
const ACCEPT_RETRY_PAUSE: Duration = Duration::from_millis(50);

/// Serves `router` on `listener` until `shutdown` completes, then drains. Every request head
/// must arrive within `head_deadline`.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    head_deadline: Duration,
    shutdown: impl Future<Output = ()>,
) {
    let mut connection_settings = http1::Builder::new();
    connection_settings
        .timer(TokioTimer::new())
        .header_read_timeout(head_deadline);
    let connections = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "accepting a connection failed");
                tokio::time::sleep(ACCEPT_RETRY_PAUSE).await;
                continue;
            }
        };
        let service = TowerToHyperService::new(
            router
                .clone()
                .map_request(|request: axum::http::Request<Incoming>| request.map(Body::new)),
        );
        let connection = connection_settings.serve_connection(TokioIo::new(stream), service);
        let connection = connections.watch(connection);
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                // A head past its deadline, a client that hung up: the connection's own end.
                tracing::debug!(%peer, %error, "connection ended with an error");
            }
        });
    }
    drop(listener);
    connections.shutdown().await;
}
