//! Serving a simulator on a socket: [`serve`] for the binary, [`BankSimulator::spawn`] for tests.
//!
//! Shutdown is a future passed in. When it completes the server stops accepting, lets requests
//! in flight finish, and sends the replies held back as "lost" so the process stops promptly.

use std::future::Future;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};

use bank_api::Knobs;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::simulator::BankSimulator;

/// A simulator serving on a local port in a background task; dropping it shuts the server down.
#[derive(Debug)]
pub struct RunningBank {
    /// The bound address.
    pub addr: SocketAddr,
    /// The base URL, `http://127.0.0.1:PORT`, without a trailing slash.
    pub url: String,
    /// The simulator behind the server, to read the ledger or change the knobs in-process.
    pub simulator: BankSimulator,
    /// Completes the server's shutdown future when sent to or dropped.
    _stop: oneshot::Sender<()>,
}

impl BankSimulator {
    /// Starts a fresh simulator on `127.0.0.1` on a free port, served by a tokio task until the
    /// returned [`RunningBank`] is dropped.
    pub async fn spawn(knobs: Knobs) -> io::Result<RunningBank> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let simulator = Self::new(knobs);
        let (stop, stopped) = oneshot::channel::<()>();
        let served = simulator.clone();
        tokio::spawn(async move {
            let shutdown = async move {
                // Either a send or the sender's drop means stop.
                stopped.await.ok();
            };
            if let Err(error) = serve(listener, served, shutdown).await {
                tracing::error!(%error, "bank simulator stopped serving");
            }
        });
        Ok(RunningBank {
            addr,
            url: format!("http://{addr}"),
            simulator,
            _stop: stop,
        })
    }
}

/// Serves `simulator` on `listener` (a `TcpListener`, or a [`crate::TlsListener`] for https)
/// until `shutdown` completes, then drains gracefully.
pub async fn serve<L>(
    listener: L,
    simulator: BankSimulator,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()>
where
    L: axum::serve::Listener,
    L::Addr: std::fmt::Debug,
{
    let router = simulator.router();
    axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            shutdown.await;
            tracing::info!("bank simulator shutting down");
            simulator.let_held_replies_go();
        })
        .await
}
