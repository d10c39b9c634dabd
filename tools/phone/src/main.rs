//! `phone`: a command-line phone on the payments API, built on the rule-following client.
//!
//! ```text
//! export AUTH_JWT_SECRET=…          # development: sign a token for --user (or PHONE_TOKEN=…)
//! phone --user 42 pay --bill elec-1 --amount 230000 --vpa asha@okbank
//! phone --user 42 refund --payment <id> --amount 5000
//! phone pending                     # the saved actions that have no final reply yet
//! phone --user 42 --json resume     # after a crash or restart: same keys, same bodies
//! ```
//!
//! No secret is ever a flag: the token is `PHONE_TOKEN` (or `PHONE_TOKEN_FILE`), the development
//! secret `AUTH_JWT_SECRET` (or `AUTH_JWT_SECRET_FILE`), as the backend reads its own.
//!
//! Every action is saved in `--store` before its first send and deleted at its final reply, so
//! killing the phone mid-payment and running `phone resume` never pays twice. Each attempt asks
//! the server (`Prefer: wait`) to wait up to `--wait-seconds` for the first attempt's reply
//! should it still be running (default: 5 s less than `--timeout-seconds`; 0 turns it off).
//! Progress (attempt number, wait, reply, "got the first attempt's reply after waiting") goes
//! to stderr; the outcome to stdout, as a sentence or (`--json`) one JSON object per line. The
//! exit codes are listed in `--help` ([`show::EXIT_CODES`]).

mod identity;
mod show;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use payments_client::{
    ActionStore, ClientRules, FileStore, HttpTransport, PaymentsClient, RetrySchedule,
};
use serde_json::json;
use shared::Operation;
use shared::api::{PayBillRequest, RefundRequest, check_bill_id};

use identity::Identity;
use secret_settings::process_environment;

/// A phone on the payments API that retries safely: one key per action, saved before sending.
#[derive(Debug, Parser)]
#[command(name = "phone", version, after_help = show::EXIT_CODES)]
struct Cli {
    /// The payments API: the edge (default) or the backend directly (http://127.0.0.1:8080).
    #[arg(long, env = "PHONE_API", default_value = "http://127.0.0.1:8787")]
    api: String,
    #[command(flatten)]
    identity: Identity,
    /// Where pending actions are saved, one JSON file each.
    #[arg(long, env = "PHONE_STORE", default_value = "phone-actions")]
    store: PathBuf,
    /// Give up on one attempt after this many seconds (the article's app: 15).
    #[arg(long, default_value_t = 15.0)]
    timeout_seconds: f64,
    /// Stop sending after this many seconds and ask for the outcome (the article's app: 600).
    #[arg(long, default_value_t = 600.0)]
    deadline_seconds: f64,
    /// Ask the server to wait up to this many whole seconds for the first attempt's reply when
    /// a retry finds it still running (`Prefer: wait`); below --timeout-seconds, 0 turns it off.
    /// Default: 5 s less than --timeout-seconds (10 for 15).
    #[arg(long)]
    wait_seconds: Option<u64>,
    /// Print outcomes (and the pending list) as JSON, one object per line.
    #[arg(long)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Pay a bill: a new action with a new key.
    Pay {
        /// The bill's id.
        #[arg(long)]
        bill: String,
        /// The amount in paise (230000 is Rs 2,300).
        #[arg(long)]
        amount: u64,
        /// The payer's UPI address.
        #[arg(long)]
        vpa: String,
    },
    /// Refund part of a payment: a new action with a new key.
    Refund {
        /// The payment's id.
        #[arg(long)]
        payment: String,
        /// The amount in paise.
        #[arg(long)]
        amount: u64,
    },
    /// List the saved actions that have no final reply yet.
    Pending,
    /// Carry on with this user's saved actions (after a crash or restart).
    Resume,
}

#[tokio::main]
async fn main() -> ExitCode {
    match run(Cli::parse()).await {
        Ok(code) => code,
        Err(error) => {
            eprintln!("phone: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let store = FileStore::open(&cli.store)
        .with_context(|| format!("opening the store {}", cli.store.display()))?;
    let report = |event: &payments_client::Event| eprintln!("phone: {event}");
    let format = if cli.json {
        show::Format::Json
    } else {
        show::Format::Text
    };
    let completions = match &cli.command {
        Command::Pending => {
            show::pending(&store.load_all()?, format);
            return Ok(ExitCode::SUCCESS);
        }
        Command::Pay { bill, amount, vpa } => {
            check_bill_id(bill).map_err(show::refused)?;
            let body =
                PayBillRequest::from_json(&json!({"amount_paise": amount, "payer_vpa": vpa}))
                    .map_err(show::refused)?;
            let phone = connect(&cli, store).await?;
            let saved = phone.begin(Operation::PayBill, bill, &body).await?;
            eprintln!("phone: saved the payment with key {}", saved.key());
            vec![phone.run(&saved, &report).await]
        }
        Command::Refund { payment, amount } => {
            let body = RefundRequest::from_json(&json!({"amount_paise": amount}))
                .map_err(show::refused)?;
            let phone = connect(&cli, store).await?;
            let saved = phone
                .begin(Operation::RefundPayment, payment, &body)
                .await?;
            eprintln!("phone: saved the refund with key {}", saved.key());
            vec![phone.run(&saved, &report).await]
        }
        Command::Resume => {
            let phone = connect(&cli, store).await?;
            let completions = phone.resume_all(&report).await?;
            if completions.is_empty() {
                eprintln!("phone: nothing to resume");
            }
            completions
        }
    };
    Ok(completions
        .iter()
        .map(|completion| show::result(completion, format))
        .max()
        .map_or(ExitCode::SUCCESS, ExitCode::from))
}

/// The client for the signed-in user. A new action does not wait for older ones, but the user
/// should know they exist.
async fn connect(cli: &Cli, store: FileStore) -> anyhow::Result<PaymentsClient<HttpTransport>> {
    let attempt_timeout = seconds(cli.timeout_seconds, "--timeout-seconds")?;
    let config = ClientRules {
        schedule: RetrySchedule {
            deadline: seconds(cli.deadline_seconds, "--deadline-seconds")?,
            ..RetrySchedule::default()
        },
        attempt_timeout,
        prefer_wait: prefer_wait(cli.wait_seconds, attempt_timeout)?,
        ..ClientRules::default()
    };
    let (user, token) = cli.identity.resolve(process_environment)?;
    let transport = HttpTransport::new(reqwest::Client::new(), &cli.api, &token);
    let phone = PaymentsClient::new(user.clone(), transport, store, config);
    let pending = phone.pending().await?.len();
    if pending > 0 && !matches!(cli.command, Command::Resume) {
        eprintln!(
            "phone: {pending} earlier action(s) of user {user} have no final reply yet; \
             `phone resume` carries them on"
        );
    }
    Ok(phone)
}

fn seconds(value: f64, flag: &str) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(value)
        .ok()
        .filter(|duration| !duration.is_zero())
        .with_context(|| format!("{flag} must be a positive number of seconds"))
}

/// The wait to ask for from `--wait-seconds`: the library's default for the timeout when not
/// given, none for 0. A wait at or past the timeout is refused rather than cut short, so the
/// user learns that the server's 409 after a wait must arrive before the phone gives up.
fn prefer_wait(
    wait_seconds: Option<u64>,
    attempt_timeout: Duration,
) -> anyhow::Result<Option<Duration>> {
    match wait_seconds.map(Duration::from_secs) {
        None => Ok(ClientRules::default_prefer_wait(attempt_timeout)),
        Some(Duration::ZERO) => Ok(None),
        Some(wait) if wait >= attempt_timeout => bail!(
            "--wait-seconds must be below --timeout-seconds ({} s): when the server's wait runs \
             out, its reply must reach the phone before the phone gives up",
            attempt_timeout.as_secs_f64()
        ),
        Some(wait) => Ok(Some(wait)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn the_wait_defaults_below_the_timeout_and_zero_turns_it_off() {
        assert_eq!(prefer_wait(None, 15 * SECOND).ok(), Some(Some(10 * SECOND)));
        assert_eq!(prefer_wait(None, 30 * SECOND).ok(), Some(Some(25 * SECOND)));
        assert_eq!(prefer_wait(None, 4 * SECOND).ok(), Some(None));
        assert_eq!(prefer_wait(Some(0), 15 * SECOND).ok(), Some(None));
        assert_eq!(
            prefer_wait(Some(7), 15 * SECOND).ok(),
            Some(Some(7 * SECOND))
        );
    }

    #[test]
    fn a_wait_at_or_past_the_timeout_is_refused() {
        for wait in [15, 60] {
            let error = prefer_wait(Some(wait), 15 * SECOND).expect_err("refused");
            assert!(error.to_string().contains("--wait-seconds"), "{error}");
        }
        assert!(prefer_wait(Some(15), SECOND * 31 / 2).is_ok());
    }
}
