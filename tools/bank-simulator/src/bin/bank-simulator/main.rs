//! The bank simulator as its own process, for the development stack and outside test suites.
//!
//! Flags and `BANK_*` environment variables set the listen address and the knobs (see
//! `--help`); the knobs can be changed later with `PUT /knobs`. Logs go to stderr, filtered by
//! `RUST_LOG` (default `info`). Ctrl-C or SIGTERM stops it gracefully.

mod flags;

use std::net::SocketAddr;

use anyhow::Context;
use bank_simulator::{BankSimulator, Knobs, serve};
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
    println!("bank simulator listening on http://{addr}");
    tracing::info!(%addr, ?knobs, "bank simulator started");

    serve(listener, BankSimulator::new(knobs), shutdown_signal())
        .await
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
