//! `steady-load`: sends payments to the backend at a fixed rate and prints their latency
//! percentiles, for `bench/latency.sh` (and `bench/fixed-rate-cpu.sh`, which compares the
//! backend's CPU a request for replays and `GET /healthz` at one rate).
//!
//! Open loop: request *i* is due at `start + i / rate` and is sent then, whether or not the
//! earlier ones have been answered, and its latency runs from when it was due, not from when it
//! went out. A stall therefore shows in every request it delayed, as a user would see it, instead
//! of only in the one request that met it (the coordinated omission of a closed-loop tool such
//! as wrk). oha's fixed rate does the same, but sends one set of headers, and a new-key payment
//! needs a fresh `Idempotency-Key` each time.
//!
//! Every payment pays the same amount from the same account; `new-key` uses a fresh key and
//! bill id per request, `replay` repeats one key (which must already be answered); `healthz`
//! sends `GET /healthz` instead, the server's baseline. A reply other than 2xx, or no reply, is
//! an error and is counted, not timed.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use tokio::time::Instant;

#[derive(Parser)]
#[command(about = "Payments at a fixed rate, open loop; prints p50, p99 and p99.9")]
struct Args {
    /// The backend's base URL, e.g. http://127.0.0.1:18080.
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
}

#[derive(Clone, Copy, ValueEnum)]
enum Traffic {
    NewKey,
    Replay,
    Healthz,
}

/// What one request came to: its latency, or an error.
type Outcome = Result<Duration, String>;

const BODY: &str = r#"{"amount_paise":230000,"payer_vpa":"asha@okbank"}"#;
/// The bill the replayed key paid (`bench/lib.sh` pays `elec-replay` with it).
const REPLAYED_BILL: &str = "elec-replay";

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    if args.rate == 0 || args.seconds == 0 {
        eprintln!("steady-load: --rate and --seconds must be positive");
        return ExitCode::FAILURE;
    }
    let client = match reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
    {
        Ok(client) => client,
        Err(error) => {
            eprintln!("steady-load: {error}");
            return ExitCode::FAILURE;
        }
    };
    let outcomes = send_at_rate(&client, &args).await;
    report(&outcomes, &args);
    ExitCode::SUCCESS
}

/// Sends `rate × seconds` requests, each when it is due, and gathers their outcomes.
async fn send_at_rate(client: &reqwest::Client, args: &Args) -> Vec<Outcome> {
    let total = args.rate * args.seconds;
    let interval = Duration::from_secs(1) / args.rate;
    let start = Instant::now();
    let mut requests = Vec::with_capacity(total as usize);
    for index in 0..total {
        let due = start + interval * index;
        tokio::time::sleep_until(due).await;
        let request = build_request(client, args, index);
        requests.push(tokio::spawn(async move {
            let reply = request.send().await.map_err(|error| error.to_string())?;
            let status = reply.status();
            // The body is part of the answer the client waits for.
            reply.bytes().await.map_err(|error| error.to_string())?;
            if status.is_success() {
                Ok(due.elapsed())
            } else {
                Err(format!("status {status}"))
            }
        }));
    }
    let mut outcomes = Vec::with_capacity(requests.len());
    for request in requests {
        outcomes.push(request.await.unwrap_or_else(|error| Err(error.to_string())));
    }
    outcomes
}

fn build_request(client: &reqwest::Client, args: &Args, index: u32) -> reqwest::RequestBuilder {
    if let Traffic::Healthz = args.traffic {
        return client.get(format!("{}/healthz", args.api));
    }
    let (bill, key) = match (&args.traffic, &args.replay_key) {
        (Traffic::Replay, Some(key)) => (REPLAYED_BILL.to_owned(), key.clone()),
        _ => (format!("steady-{index}"), uuid::Uuid::new_v4().to_string()),
    };
    client
        .post(format!("{}/v1/bills/{bill}/pay", args.api))
        .bearer_auth(&args.token)
        .header("Idempotency-Key", key)
        .header("Content-Type", "application/json")
        .body(BODY)
}

/// One line: `requests N errors E p50 P p99 P p99.9 P max P` (milliseconds), then the first
/// error if there was one.
fn report(outcomes: &[Outcome], args: &Args) {
    let mut latencies: Vec<Duration> = outcomes
        .iter()
        .filter_map(|o| o.as_ref().ok().copied())
        .collect();
    latencies.sort_unstable();
    let errors = outcomes.len() - latencies.len();
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
        outcomes.len(),
        at(0.5),
        at(0.99),
        at(0.999),
        at(1.0)
    );
    if let Some(Err(first)) = outcomes.iter().find(|outcome| outcome.is_err()) {
        println!("first error: {first}");
    }
}
