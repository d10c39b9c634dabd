//! The bank simulator as its own process, for the development stack and outside test suites.
//!
//! Flags and `BANK_*` environment variables set the listen address, https (`--tls-cert`,
//! `--tls-key`), where signed callbacks go (`--callback-url`, `--callback-secret`) and the
//! knobs (see
//! `--help`); the knobs can be changed later with `PUT /knobs`. Logs go to stderr, filtered by
//! `RUST_LOG` (default `info`). Ctrl-C or SIGTERM stops it gracefully.

mod flags;

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use bank_simulator::{BankSimulator, Knobs, TlsListener, serve, server_config};
use clap::Parser;
use tokio::net::TcpListener;
use tracing_subscriber::EnvFilter;

use flags::KnobFlags;

/// Plays the partner bank over HTTP: debits, refunds, a ledger, and knobs for trouble.
#[derive(Debug, Parser)]
#[command(name = "bank-simulator", version)]
struct Cli {
    /// Address to listen on.
    #[arg(long, env = "BANK_LISTEN_ADDR", default_value = "127.0.0.1:8081")]
    listen: SocketAddr,
    /// Serve https with this PEM certificate chain (with --tls-key).
    #[arg(long, env = "BANK_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, env = "BANK_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Post each decided call's final status to this URL (the PSP's `…/bank/callbacks`),
    /// signed with --callback-secret.
    #[arg(long, env = "BANK_CALLBACK_URL", requires = "callback_secret")]
    callback_url: Option<String>,
    /// The secret callbacks are signed with (the PSP's `BANK_CALLBACK_SECRET`).
    #[arg(
        long,
        env = "BANK_CALLBACK_SECRET",
        requires = "callback_url",
        hide_env_values = true
    )]
    callback_secret: Option<String>,
    #[command(flatten)]
    knobs: KnobFlags,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let knobs = Knobs::from(cli.knobs);
    knobs.validate().context("invalid knobs")?;

    let listener = TcpListener::bind(cli.listen)
        .await
        .with_context(|| format!("cannot listen on {}", cli.listen))?;
    let addr = listener
        .local_addr()
        .context("cannot read the bound address")?;
    let simulator = BankSimulator::new(knobs.clone());
    if let (Some(url), Some(secret)) = (&cli.callback_url, &cli.callback_secret) {
        simulator.send_callbacks_to(url, secret.as_bytes());
    }
    match (cli.tls_cert, cli.tls_key) {
        (Some(certificate), Some(key)) => {
            let config = server_config(&certificate, &key).context("reading the TLS files")?;
            let listener = TlsListener::new(listener, config).context("serving TLS")?;
            println!("bank simulator listening on https://{addr}");
            tracing::info!(%addr, ?knobs, "bank simulator started (https)");
            serve(listener, simulator, shutdown_signal()).await
        }
        _ => {
            println!("bank simulator listening on http://{addr}");
            tracing::info!(%addr, ?knobs, "bank simulator started");
            serve(listener, simulator, shutdown_signal()).await
        }
    }
    .context("serving failed")?;
    tracing::info!("bank simulator stopped");
    Ok(())
}

/// Completes on Ctrl-C or, on Unix, SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::error!(%error, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut sigterm) => {
                sigterm.recv().await;
            }
            Err(error) => {
                tracing::error!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();

    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}
