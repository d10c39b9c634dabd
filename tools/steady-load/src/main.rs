//! `steady-load`: sends payments to the backend at a fixed rate and prints their latency
//! percentiles, for `bench/latency.sh` (and `bench/fixed-rate-cpu.sh`, which compares the
//! backend's CPU a request for replays and `GET /healthz` at one rate, and
//! `bench/commit-flush-tail.sh`, which compares the tail with and without the commit's flush).
//!
//! Open loop, as wrk2 does it: request *i* is due at `start + i / rate` (`schedule`) and goes
//! out then over whichever of the run's keep-alive connections is free (`connection`), whether
//! or not the earlier ones have been replied to, and its latency runs from when it was due, not
//! from when it went out. A stall therefore shows in every request it delayed, as a user would
//! see it, instead of only in the one request that met it (the coordinated omission of a
//! closed-loop tool such as wrk). oha's fixed rate does the same, but sends one set of headers,
//! and a new-key payment needs a fresh `Idempotency-Key` each time (`requests`).
//!
//! The generator is built to cost little per request, since it shares the machine's cores with
//! the server it measures: one thread, HTTP/1.1 connections opened once (hyper's own client
//! connection, no pool), each driven by the task that sends on it. A reply other than 2xx, or
//! no reply, is an error and is counted, not timed.

mod connection;
mod requests;
mod schedule;
#[cfg(test)]
mod tests;

use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use hyper::Uri;

use connection::{RequestResult, send_over_one_connection};
use requests::{Requests, Traffic};
use schedule::Schedule;

#[derive(Parser)]
#[command(about = "Payments at a fixed rate, open loop; prints p50, p99 and p99.9")]
struct Args {
    /// The backend's base URL, plain HTTP, e.g. http://127.0.0.1:18080.
    #[arg(long)]
    api: String,
    /// A customer's bearer token.
    #[arg(long)]
    token: String,
    /// Requests a second.
    #[arg(long)]
    rate: u32,
    /// How long to send, in seconds.
    #[arg(long, default_value_t = 10)]
    seconds: u32,
    /// New keys, one key replayed, or the health check.
    #[arg(long, value_enum, default_value_t = Traffic::NewKey)]
    traffic: Traffic,
    /// The key `replay` repeats.
    #[arg(long, required_if_eq("traffic", "replay"))]
    replay_key: Option<String>,
    /// Keep-alive connections: the most requests in flight at once. A request due while every
    /// connection waits for a reply goes out late, and is timed from when it was due.
    #[arg(long, default_value_t = 128)]
    connections: u32,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args).await {
        Ok(results) => {
            report(&results, &args);
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("steady-load: {error}");
            ExitCode::FAILURE
        }
    }
}

/// What every connection of a run shares.
struct Run {
    schedule: Schedule,
    /// The server's `host:port`.
    address: String,
    requests: Requests,
}

/// Sends the run's requests, each when it is due, and gathers their outcomes.
async fn run(args: &Args) -> Result<Vec<RequestResult>, String> {
    if args.rate == 0 || args.seconds == 0 || args.connections == 0 {
        return Err("--rate, --seconds and --connections must be positive".to_owned());
    }
    let address = address_of(&args.api)?;
    let requests = Requests::new(
        args.traffic,
        &address,
        &args.token,
        args.replay_key.as_deref(),
    )?;
    let run = Arc::new(Run {
        schedule: Schedule::new(args.rate, args.seconds),
        address,
        requests,
    });
    let mut connections = tokio::task::JoinSet::new();
    for _ in 0..args.connections {
        let run = Arc::clone(&run);
        connections.spawn(async move {
            send_over_one_connection(&run.address, &run.schedule, &run.requests).await
        });
    }
    let mut results = Vec::with_capacity(usize::try_from(run.schedule.total()).unwrap_or(0));
    while let Some(sent) = connections.join_next().await {
        results.extend(sent.map_err(|error| format!("a connection's task failed: {error}"))?);
    }
    Ok(results)
}

/// The `host:port` of a plain-HTTP base URL.
fn address_of(api: &str) -> Result<String, String> {
    let uri: Uri = api
        .parse()
        .map_err(|error| format!("--api {api:?}: {error}"))?;
    if uri.scheme_str() != Some("http") {
        return Err(format!("--api {api:?}: only plain http:// is sent"));
    }
    let authority = uri
        .authority()
        .ok_or_else(|| format!("--api {api:?}: no host"))?;
    let port = authority.port_u16().unwrap_or(80);
    Ok(format!("{}:{port}", authority.host()))
}

/// One line: `requests N errors E p50 P p99 P p99.9 P max P` (milliseconds), then the first
/// error if there was one.
fn report(results: &[RequestResult], args: &Args) {
    let mut latencies: Vec<_> = results
        .iter()
        .filter_map(|o| o.as_ref().ok().copied())
        .collect();
    latencies.sort_unstable();
    let errors = results.len() - latencies.len();
    let at = |quantile: f64| -> f64 {
        if latencies.is_empty() {
            return f64::NAN;
        }
        let index = ((latencies.len() as f64 * quantile).ceil() as usize).clamp(1, latencies.len());
        latencies[index - 1].as_secs_f64() * 1e3
    };
    println!(
        "rate {} requests {} errors {errors} p50 {:.2} p99 {:.2} p99.9 {:.2} max {:.2}",
        args.rate,
        results.len(),
        at(0.5),
        at(0.99),
        at(0.999),
        at(1.0)
    );
    if let Some(Err(first)) = results.iter().find(|result| result.is_err()) {
        println!("first error: {first}");
    }
}
