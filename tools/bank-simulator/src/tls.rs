//! Serving the simulator over TLS, as a real partner bank serves: [`TlsListener`] wraps a TCP
//! listener for `axum::serve`, and [`server_config`] reads the certificate chain and key (PEM
//! files, e.g. made by a test's own CA).
//!
//! Handshakes run in tasks of their own, so one slow or broken client never holds up the
//! accept loop; a handshake that fails or takes longer than [`HANDSHAKE_TIMEOUT`] drops only
//! its own connection.

use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::server::TlsStream;

/// How long a client may take to complete its handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Handshaken connections waiting for the server to take them.
const ACCEPTED_BACKLOG: usize = 64;

/// The TLS settings for a certificate chain and its private key, both PEM files.
pub fn server_config(certificate_chain: &Path, private_key: &Path) -> io::Result<ServerConfig> {
    let chain = CertificateDer::pem_file_iter(certificate_chain)
        .and_then(|certificates| certificates.collect::<Result<Vec<_>, _>>())
        .map_err(|error| pem_error(certificate_chain, error))?;
    let key =
        PrivateKeyDer::from_pem_file(private_key).map_err(|error| pem_error(private_key, error))?;
    ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_safe_default_protocol_versions()
        .and_then(|builder| builder.with_no_client_auth().with_single_cert(chain, key))
        .map_err(io::Error::other)
}

fn pem_error(path: &Path, error: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{}: {error}", path.display()),
    )
}

/// A listener whose connections have completed a TLS handshake.
pub struct TlsListener {
    handshaken: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local_addr: SocketAddr,
}

impl TlsListener {
    /// Accepts on `listener` in a background task (until this listener is dropped) and hands
    /// each connection over once its handshake under `config` completes.
    pub fn new(listener: TcpListener, config: ServerConfig) -> io::Result<TlsListener> {
        let local_addr = listener.local_addr()?;
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let (handshaken_sender, handshaken) = mpsc::channel(ACCEPTED_BACKLOG);
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    () = handshaken_sender.closed() => break,
                    accepted = listener.accept() => accepted,
                };
                let (connection, peer) = match accepted {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        // Out of file descriptors and the like: pause rather than spin.
                        tracing::warn!(%error, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let acceptor = acceptor.clone();
                let handshaken_sender = handshaken_sender.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(connection)).await
                    {
                        Ok(Ok(stream)) => {
                            let _closed = handshaken_sender.send((stream, peer)).await;
                        }
                        Ok(Err(error)) => tracing::debug!(%peer, %error, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(TlsListener {
            handshaken,
            local_addr,
        })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.handshaken.recv().await {
            Some(connection) => connection,
            // The accept task only ends when this listener is dropped; never reached.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(self.local_addr)
    }
}
