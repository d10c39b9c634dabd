//! `incident-replay`: the article's bill-payments night, rerun against the real stack at a
//! compressed time scale, once per client, with the damage side by side.
//!
//! N customers pay one bill each over an evening while the bank's latency climbs from 1 s past
//! the phones' 15 s timeout to 20 s, with lost replies (the bank debits, the reply never comes)
//! and declines mixed in, and the bank deduplicating by reference. Five phones take turns on
//! the same night: (a) no key with plain retries, as the app did; (b) a new key per retry; (c)
//! the rule-following client library without `Prefer: wait`; (d) the library with it; (e) the
//! TypeScript package under Node, with it. Debits
//! are counted at the bank's ledger (`GET /ledger`), unresolved keys in the backend's table once
//! its reconciler has asked the bank about every uncertain key, 409s from the phones' replies.
//!
//! Client (a) needs a backend whose policy does not require a key for `pay_bill` (the shipped
//! policy refuses such requests with 400): `--no-key-api` names one, run with a policy file whose
//! `required_for` is empty; without a key it mints one per request, so each retry is a new
//! payment, exactly the night's bug. `scripts/incident-replay.sh` starts everything and runs this.
//!
//! With `--chart PATH` it also draws the night as an SVG (see the `chart` module): the bank's
//! latency against the timeout, and per client its attempts and debits over the night.
//!
//! Seeded: the same `--seed` draws the same customers, amounts, arrival times, bank behaviour
//! per step and jitter; the bank's per-request draws follow arrival order, which concurrency
//! can shuffle slightly, so counts repeat closely rather than to the unit.

mod bank;
mod chart;
mod key_table;
mod night;
mod phones;
mod scaled_clock;
mod seeded;
mod tally;
mod typescript_phones;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use payments_client::{ClientRules, FileStore};
use shared::UserId;
use tokio::task::JoinSet;

use bank::Bank;
use chart::{ClientRun, NightChart};
use key_table::KeyTable;
use night::{Night, NightSettings};
use phones::{ClientKind, Payer, PhoneResult, Phones};
use scaled_clock::ScaledClock;
use tally::Tally;

/// How long a lost reply is held back, in the night's seconds: longer than the backend waits
/// for the bank (30 s of the night in `scripts/incident-replay.sh`), so the backend gives up,
/// marks the key `unknown` and leaves it to reconciliation.
const LOST_REPLY_DELAY: Duration = Duration::from_secs(60);

/// Reruns the bill-payments night for five clients and prints what each did to the customers.
#[derive(Debug, Parser)]
#[command(name = "incident-replay", version)]
struct Cli {
    /// The payments API for clients (b), (c) and (d): the backend, or the edge in front of it.
    #[arg(long, env = "REPLAY_API", default_value = "http://127.0.0.1:8080")]
    api: String,
    /// A backend for client (a) whose policy file has `required_for: []`, on the same database
    /// and bank as --api.
    #[arg(long, env = "REPLAY_NO_KEY_API")]
    no_key_api: String,
    /// The bank simulator (its knobs are set and its ledger read).
    #[arg(long, env = "BANK_URL", default_value = "http://127.0.0.1:8081")]
    bank: String,
    /// The backend's database, to count unresolved keys.
    #[arg(long, env = "DATABASE_URL")]
    database_url: String,
    /// The backend's AUTH_JWT_SECRET, to sign each customer's token.
    #[arg(long, env = "AUTH_JWT_SECRET", hide_env_values = true)]
    secret: String,
    /// How many customers pay a bill.
    #[arg(long, default_value_t = 200)]
    customers: usize,
    /// The seed of the night.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Real milliseconds per second of the night (10: the night runs 100 times faster).
    #[arg(long, default_value_t = 10.0)]
    time_scale: f64,
    /// Seconds of the night over which customers arrive.
    #[arg(long, default_value_t = 300.0)]
    evening_seconds: f64,
    /// The phones give up on an attempt after this many seconds of the night.
    #[arg(long, default_value_t = 15.0)]
    timeout_seconds: f64,
    /// The bank's latency at the start of the evening, in seconds of the night.
    #[arg(long, default_value_t = 1.0)]
    latency_from_seconds: f64,
    /// The bank's latency at the end of the evening.
    #[arg(long, default_value_t = 20.0)]
    latency_to_seconds: f64,
    /// Extra latency per request, uniformly up to this.
    #[arg(long, default_value_t = 4.0)]
    jitter_seconds: f64,
    /// How many times the latency steps up over the evening.
    #[arg(long, default_value_t = 10)]
    ramp_steps: u32,
    /// Probability that the bank debits and its reply is lost.
    #[arg(long, default_value_t = 0.05)]
    lost_reply_rate: f64,
    /// Probability that the bank declines a debit.
    #[arg(long, default_value_t = 0.05)]
    decline_rate: f64,
    /// Probability that the bank replies to a call with a 503 before doing anything.
    #[arg(long, default_value_t = 0.0)]
    bank_error_rate: f64,
    /// How many times the plain phones (a) and (b) try before giving up.
    #[arg(long, default_value_t = 3)]
    plain_attempts: u32,
    /// Real seconds to wait for the backend's reconciler to resolve every key after a run.
    #[arg(long, default_value_t = 30.0)]
    settle_seconds: f64,
    /// Print the results as JSON on stdout (the narration goes to stderr).
    #[arg(long)]
    json: bool,
    /// Client (e)'s Node script, compiled by `npm run build:stack` in `clients/typescript/`.
    #[arg(
        long,
        env = "REPLAY_TYPESCRIPT_PHONES",
        default_value = "clients/typescript/.build-stack/tools/replay-phones.js"
    )]
    typescript_phones: PathBuf,
    /// Also draw the night as an SVG chart at this path: the bank's latency against the
    /// timeout, and per client its attempts and debits over the night, double debits marked.
    #[arg(long, env = "REPLAY_CHART")]
    chart: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> ExitCode {
    match replay(Cli::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("incident-replay: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn replay(cli: Cli) -> anyhow::Result<()> {
    let say = |text: &str| {
        if cli.json {
            eprintln!("{text}");
        } else {
            println!("{text}");
        }
    };
    let real_per_second = Duration::try_from_secs_f64(cli.time_scale / 1000.0)
        .ok()
        .filter(|scale| !scale.is_zero())
        .context("--time-scale must be a positive number of milliseconds")?;
    let night = Night::draw(night_settings(&cli)?);
    let http = reqwest::Client::new();
    let bank = Bank::new(http.clone(), &cli.bank);
    let keys = KeyTable::connect(&cli.database_url).await?;
    check_requires_no_key(&http, &cli.no_key_api).await?;
    let timeout = seconds(cli.timeout_seconds, "--timeout-seconds")?;
    say(&introduction(
        &cli,
        ClientRules::default_prefer_wait(timeout),
    ));

    let mut tallies = Vec::new();
    let mut runs = Vec::new();
    // Each client gets its own users (and so its own accounts): taken after the highest user the
    // table has seen and after the previous client's, since a client's phones may never have
    // reached the server and left no key to count.
    let mut first_user = keys.next_free_user_id().await?;
    for kind in ClientKind::ALL {
        let api = match kind {
            ClientKind::NoKey => &cli.no_key_api,
            ClientKind::NewKeyPerRetry
            | ClientKind::RuleFollowing
            | ClientKind::RuleFollowingWithWait
            | ClientKind::TypeScriptPackage => &cli.api,
        };
        let phones = Phones {
            http: http.clone(),
            api: api.trim_end_matches('/').to_owned(),
            secret: cli.secret.clone().into_bytes(),
            clock: ScaledClock::new(real_per_second),
            timeout,
            plain_attempts: cli.plain_attempts.max(1),
            store: FileStore::open(
                std::env::temp_dir()
                    .join(format!("incident-replay-{}-{kind:?}", std::process::id())),
            )?,
            seed: cli.seed,
            typescript_phones: cli.typescript_phones.clone(),
        };
        let settle = seconds(cli.settle_seconds, "--settle-seconds")?;
        let users = first_user..first_user + night.customers.len() as u64;
        first_user = users.end;
        let replayed = replay_one(
            kind,
            users.start,
            &night,
            &phones,
            &bank,
            &keys,
            settle,
            &say,
        )
        .await;
        let _ = std::fs::remove_dir_all(phones.store.dir());
        let (tally, run) = replayed?;
        tallies.push(tally);
        runs.push(run);
    }
    bank.calm().await?;

    say("");
    say(&tally::render(&tallies));
    say(&format!(
        "Repeat with: incident-replay --seed {} --customers {} --time-scale {} \
         --evening-seconds {} (and the same URLs)",
        cli.seed, cli.customers, cli.time_scale, cli.evening_seconds
    ));
    if let Some(path) = &cli.chart {
        let chart = NightChart {
            night: &night,
            timeout,
            runs: &runs,
        };
        chart.write(path)?;
        say(&format!("The night's chart: {}", path.display()));
    }
    if cli.json {
        println!("{}", serde_json::to_string(&tallies)?);
    }
    Ok(())
}

/// Runs the night once with phones of `kind`, waits for reconciliation, and counts; with the
/// run's attempts and debits on its night's clock, for the chart.
#[allow(clippy::too_many_arguments)] // The run's parts, each named; a struct would only rename them.
async fn replay_one(
    kind: ClientKind,
    first_user: u64,
    night: &Night,
    phones: &Phones,
    bank: &Bank,
    keys: &KeyTable,
    settle: Duration,
    say: &impl Fn(&str),
) -> anyhow::Result<(Tally, ClientRun)> {
    let payers = night
        .customers
        .iter()
        .map(|customer| {
            let user = UserId::numbered(first_user + customer.index as u64);
            Ok((customer.arrival, Payer::new(user, customer)))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let last_user = first_user + payers.len().saturating_sub(1) as u64;
    let started = Instant::now();

    let ramp = tokio::spawn(climb_latency(night.clone(), bank.clone(), phones.clock));
    let results = if kind == ClientKind::TypeScriptPackage {
        typescript_phones::pay_all(&phones.typescript_phones, phones, &payers).await?
    } else {
        pay_each(kind, phones, &payers).await?
    };
    ramp.await.context("the latency ramp's task failed")??;
    let phones_done = started.elapsed();

    let (unresolved, waited) = keys.settle(first_user, last_user, settle).await?;
    let accounts: Vec<String> = payers.iter().map(|(_, payer)| payer.vpa.clone()).collect();
    let debits = bank.debits_of(&accounts).await?;
    say(&format!(
        "{:<35} phones done after {:.1} s, reconciliation settled {:.1} s later (users {first_user}-{last_user})",
        kind.label(),
        phones_done.as_secs_f64(),
        waited.as_secs_f64()
    ));
    Ok((
        Tally::count(kind, &results, &debits, unresolved),
        ClientRun::from_replay(kind, &results, &debits, &phones.clock),
    ))
}

/// Each payer pays at their arrival, with a phone of `kind` of its own.
async fn pay_each(
    kind: ClientKind,
    phones: &Phones,
    payers: &[(Duration, Payer)],
) -> anyhow::Result<Vec<PhoneResult>> {
    let mut customers = JoinSet::new();
    for (arrival, payer) in payers.iter().cloned() {
        let phones = phones.clone();
        customers.spawn(async move {
            tokio::time::sleep(phones.clock.real(arrival)).await;
            phones.pay(kind, &payer).await
        });
    }
    let mut results: Vec<PhoneResult> = Vec::with_capacity(payers.len());
    while let Some(result) = customers.join_next().await {
        results.push(result.context("a customer's task failed")??);
    }
    Ok(results)
}

/// Steps the bank's latency up over the evening.
async fn climb_latency(night: Night, bank: Bank, clock: ScaledClock) -> anyhow::Result<()> {
    let mut now = Duration::ZERO;
    for (step, ramp) in (0..).zip(&night.ramp) {
        tokio::time::sleep(clock.real(ramp.at.saturating_sub(now))).await;
        now = ramp.at;
        bank.set_knobs(&night.settings, ramp.latency, step, |t| clock.real(t))
            .await?;
    }
    Ok(())
}

/// Client (a) is only meaningful against a backend that accepts a payment without a key.
async fn check_requires_no_key(http: &reqwest::Client, api: &str) -> anyhow::Result<()> {
    let url = format!("{}/idempotency-policy", api.trim_end_matches('/'));
    let policy: serde_json::Value = http
        .get(&url)
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .with_context(|| format!("reading {url}"))?
        .json()
        .await
        .with_context(|| format!("{url} is not JSON"))?;
    let requires_key = policy["required_for"]
        .as_array()
        .is_some_and(|operations| operations.iter().any(|op| op["operation"] == "pay_bill"));
    if requires_key {
        bail!(
            "--no-key-api {api} requires a key for pay_bill, so client (a) would only get 400s; \
             run a backend with a policy file whose `required_for` is empty for it \
             (scripts/incident-replay.sh does)"
        );
    }
    Ok(())
}

/// What the replay does, with the wait phones (d) ask for (`None`: the timeout leaves none).
fn introduction(cli: &Cli, prefer_wait: Option<Duration>) -> String {
    format!(
        "The bill-payments night, replayed: {customers} customers, seed {seed}, \
         1 s of the night = {scale} ms here.\n\
         The bank's latency climbs {from} s -> {to} s (+ up to {jitter} s) over {evening} s; \
         phones give up after {timeout} s. Lost replies {lost:.0} %, declines {declines:.0} %, \
         500s before debiting {errors:.0} %, bank dedupe by reference ON.\n\
         (a) no key, plain retries ({plain} tries)  -> {no_key}\n    \
             a backend whose policy has `required_for: []`: without a key it mints one per \
             request, so every retry is a new payment (the shipped policy would reply 400)\n\
         (b) new key per retry ({plain} tries)      -> {api}\n\
         (c) one key per action (the library) -> {api}\n    \
             key saved before the first send, backoff with full jitter, Retry-After, status \
             look-up at the 10-minute deadline; no Prefer: wait, so a retry during the first \
             attempt gets 409\n\
         (d) the library with Prefer: wait={wait} -> {api}\n    \
             the same, and a retry during the first attempt may get its reply instead (the \
             server counts the wait in real seconds, so here it outlasts the phone's timeout)\n\
         (e) the TypeScript package under Node, Prefer: wait={wait} -> {api}\n",
        customers = cli.customers,
        seed = cli.seed,
        scale = cli.time_scale,
        from = cli.latency_from_seconds,
        to = cli.latency_to_seconds,
        jitter = cli.jitter_seconds,
        evening = cli.evening_seconds,
        timeout = cli.timeout_seconds,
        lost = cli.lost_reply_rate * 100.0,
        declines = cli.decline_rate * 100.0,
        errors = cli.bank_error_rate * 100.0,
        plain = cli.plain_attempts,
        no_key = cli.no_key_api,
        api = cli.api,
        wait = prefer_wait.map_or(0, |wait| wait.as_secs()),
    )
}

fn night_settings(cli: &Cli) -> anyhow::Result<NightSettings> {
    Ok(NightSettings {
        customers: cli.customers,
        evening: seconds(cli.evening_seconds, "--evening-seconds")?,
        latency_from: seconds(cli.latency_from_seconds, "--latency-from-seconds")?,
        latency_to: seconds(cli.latency_to_seconds, "--latency-to-seconds")?,
        jitter: Duration::try_from_secs_f64(cli.jitter_seconds)
            .context("--jitter-seconds must be zero or positive")?,
        ramp_steps: cli.ramp_steps,
        lost_reply_rate: rate(cli.lost_reply_rate, "--lost-reply-rate")?,
        lost_reply_delay: LOST_REPLY_DELAY,
        decline_rate: rate(cli.decline_rate, "--decline-rate")?,
        error_rate: rate(cli.bank_error_rate, "--bank-error-rate")?,
        seed: cli.seed,
    })
}

fn seconds(value: f64, flag: &str) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(value)
        .ok()
        .filter(|duration| !duration.is_zero())
        .with_context(|| format!("{flag} must be a positive number of seconds"))
}

fn rate(value: f64, flag: &str) -> anyhow::Result<f64> {
    if (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        bail!("{flag} must be between 0 and 1")
    }
}
