//! The shutdown signal shared by the server and every worker: SIGTERM (how a container is
//! stopped) or Ctrl-C. The server stops accepting, finishes in-flight requests, and the
//! workers finish their current step.

use std::future::Future;

use tokio::sync::watch;

/// Resolves on SIGTERM or Ctrl-C.
pub async fn terminate_signal() {
    let ctrl_c = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::error!(%error, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let sigterm = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::error!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let sigterm = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = sigterm => {}
    }
    tracing::info!("shutdown requested; draining");
}

/// One shutdown signal, many listeners: [`Shutdown::wait`] futures all resolve once
/// [`Shutdown::trigger`] is called or the `Shutdown` is dropped.
#[derive(Debug)]
pub struct Shutdown {
    sender: watch::Sender<bool>,
}

impl Default for Shutdown {
    fn default() -> Self {
        Shutdown {
            sender: watch::channel(false).0,
        }
    }
}

impl Shutdown {
    /// Signals every listener.
    pub fn trigger(&self) {
        self.sender.send_replace(true);
    }

    /// A future that resolves when shutdown is triggered (or the `Shutdown` is gone).
    pub fn wait(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut receiver = self.sender.subscribe();
        async move {
            // An error means the sender is gone, which also means: stop.
            let _ = receiver.wait_for(|stopped| *stopped).await;
        }
    }
}
