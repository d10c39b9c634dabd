//! `soak`: the whole system under mixed, repeated faults, audited at the end.
//!
//! A population of phones (the client library, every rule followed) pays bills and refunds part
//! of some payments, through the edge Worker under `workerd`, in front of three backend
//! replicas behind HAProxy on one PostgreSQL database (the machine's server, or a replicated
//! Patroni cluster with `--database ha`) or one replica on a SQLite file, against the bank
//! simulator; meanwhile a seeded, printed schedule of faults strikes ([`faults`]). When the time is up the phones finish their actions, the system settles, and
//! the audit ([`audit`]) compares every record with the bank's ledger and every action with
//! what was recorded, and the history check ([`history`]) every request's reply with both. It
//! prints a table, and exits non-zero, naming each violation and the events around it, if any
//! promise broke.
//!
//! `scripts/soak.sh` builds what it needs and runs it (5 minutes by default); the test command
//! runs short profiles. `--client key-per-retry` runs the broken client instead, and
//! `--database ha --ha-replication asynchronous` a cluster that loses acknowledged commits on
//! failover, to show that the audit fails when money is charged twice or a record is lost.

mod audit;
mod balancer;
mod faults;
mod history;
mod phones;
mod proxy;
mod report;
mod stack;

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use payments_client::FileStore;

use crate::faults::{ClusterFault, Plan};
use crate::phones::{ClientKind, Population, Tally};
use crate::report::Struck;
use crate::stack::{DatabaseKind, HaReplication, Stack};

/// The soak's settings.
#[derive(Debug, Parser)]
#[command(about = "Clients through edge and backend replicas under faults, then an audit")]
struct Args {
    /// How long the phones keep starting actions and the faults strike, in seconds.
    #[arg(long, default_value_t = 300)]
    duration_seconds: u64,
    /// Which database the replicas share.
    #[arg(long, value_enum, default_value_t = DatabaseKind::Postgres)]
    database: DatabaseKind,
    /// How the cluster of `--database ha` replicates commits.
    #[arg(long, value_enum, default_value_t = HaReplication::Strict)]
    ha_replication: HaReplication,
    /// The cluster's faults, in the order they strike (`--database ha`); every kind by default,
    /// the leader killed twice.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = ClusterFault::ALL)]
    cluster_faults: Vec<ClusterFault>,
    /// Whether the replicas, the bank, the edge and the database connections are faulted too.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    other_faults: bool,
    /// Backend replicas (PostgreSQL only; SQLite runs one).
    #[arg(long, default_value_t = 3)]
    replicas: usize,
    /// Phones, each its own user.
    #[arg(long, default_value_t = 30)]
    phones: u64,
    /// The seed of the fault schedule and the phones' amounts.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The client the phones run.
    #[arg(long, value_enum, default_value_t = ClientKind::RuleFollowing)]
    client: ClientKind,
    /// The longest the system may take to settle after the phones are done, in seconds.
    #[arg(long, default_value_t = 180)]
    settle_seconds: u64,
    /// Print the fault schedule for these settings and stop.
    #[arg(long)]
    schedule_only: bool,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    // Interrupted, the soak drops its stack, which kills every process it started.
    let ran = tokio::select! {
        ran = run(args) => ran,
        () = interrupted() => Err(anyhow::anyhow!("interrupted; every process it started is stopped")),
    };
    match ran {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(error) => {
            eprintln!("soak: {error:#}");
            ExitCode::from(2)
        }
    }
}

/// Resolves on `SIGINT` or `SIGTERM`.
async fn interrupted() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut terminate) => tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate.recv() => {}
        },
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// Runs the soak; `true` if the audit passed.
async fn run(args: Args) -> anyhow::Result<bool> {
    let replicas = match args.database {
        DatabaseKind::Postgres | DatabaseKind::Ha => args.replicas.max(1),
        DatabaseKind::Sqlite => 1,
    };
    let duration = Duration::from_secs(args.duration_seconds);
    let plan = Plan {
        duration,
        database: args.database,
        replicas,
        cluster_faults: args.cluster_faults.clone(),
        other_faults: args.other_faults,
    };
    let schedule = faults::schedule(args.seed, &plan);
    report::print_schedule(&args, replicas, &schedule);
    if args.schedule_only {
        return Ok(true);
    }

    let scratch = std::env::temp_dir().join(format!("soak-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&scratch)?;
    let mut stack = Stack::start((args.database, args.ha_replication), replicas, &scratch).await?;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()?;
    faults::set_bank_knobs(&http, &stack.bank_url, &faults::baseline_knobs()).await?;

    let started = Instant::now();
    let tally = Arc::new(Mutex::new(Tally::default()));
    let population = Population {
        api_url: stack.api_url.clone(),
        secret: stack.secret.clone(),
        client: args.client,
        store: FileStore::open(scratch.join("actions"))?,
        tally: Arc::clone(&tally),
        http: http.clone(),
    };
    let calling = Arc::new(AtomicBool::new(true));
    let phones: Vec<_> = (1..=args.phones)
        .map(|user| {
            let calling = Arc::clone(&calling);
            tokio::spawn(population.clone().phone(user, args.seed, calling))
        })
        .collect();

    let mut struck = Vec::new();
    for (at, fault) in &schedule {
        tokio::time::sleep_until((started + *at).into()).await;
        println!(
            "{:>6.1} s  {}",
            started.elapsed().as_secs_f64(),
            fault.kind()
        );
        let strike = Struck::now(*fault);
        faults::strike(&mut stack, *fault, &http)
            .await
            .with_context(|| format!("carrying out {fault:?}"))?;
        struck.push(strike.ended_now());
    }
    // The phones call for the whole duration, and past it while faults that took longer than
    // planned (a failover takes tens of seconds) play out, with a quiet stretch after the last.
    let quiet = duration.mul_f64(0.15);
    tokio::time::sleep_until((started + duration).max(Instant::now() + quiet).into()).await;
    calling.store(false, Ordering::SeqCst);
    for phone in phones {
        phone.await.context("a phone panicked")??;
    }
    let phones_done = started.elapsed();
    println!(
        "{:>6.1} s  every phone has an ending; settling",
        phones_done.as_secs_f64()
    );

    let settle = Duration::from_secs(args.settle_seconds);
    report::settle(&http, &stack, settle).await?;
    population.resume_unresolved().await?;
    let (ledger, records) = report::settle(&http, &stack, settle).await?;
    let tally = std::mem::take(
        &mut *tally
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    let (mut violations, damage) = audit::audit(&ledger, &records, &tally.actions);
    violations.extend(history::check(&tally.history, &ledger, &records));
    let by_kind = faults::count_by_kind(struck.iter().map(|strike| strike.fault));
    report::print_table(&by_kind, &tally, &ledger, &records, damage);
    report::print_history(&tally.history, (started, started + phones_done), &struck);
    report::print_failovers(&stack, &struck, &tally).await?;
    report::print_violations(&violations, &records, &tally.actions);
    drop(stack);
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(violations.is_empty())
}
