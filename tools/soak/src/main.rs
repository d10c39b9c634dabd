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
//! With `--database ha --network namespaces` the cluster, the bank and each replica run in
//! network namespaces of their own, and the cluster's faults are partitions and bad links
//! instead of crashes: the leader cut off, a backend left on the cut-off leader, the
//! synchronous standby cut, a lossy and a slow database link, the bank's link cut mid-call.
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
use crate::stack::{DatabaseKind, HaReplication, Network, Setup, Stack};

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
    /// Where the bank, the replicas and the cluster talk to each other: `namespaces` (with
    /// `--database ha` only) puts each in a network namespace, for the partition faults.
    #[arg(long, value_enum, default_value_t = Network::Loopback)]
    network: Network,
    /// The cluster's faults, in the order they strike (`--database ha`). By default every
    /// process fault, the leader killed twice; with `--network namespaces` every partition.
    #[arg(long, value_enum, value_delimiter = ',')]
    cluster_faults: Option<Vec<ClusterFault>>,
    /// Whether the replicas, the bank, the edge and the database connections are faulted too.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    other_faults: bool,
    /// Backend replicas (PostgreSQL only; SQLite runs one). By default 3; with `--network
    /// namespaces` 2, one per backend namespace, and at least 2 (a split brain needs a backend
    /// on each side).
    #[arg(long)]
    replicas: Option<usize>,
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

/// The stack and the cluster's faults `args` ask for, or why they cannot go together.
fn setup_of(args: &Args) -> anyhow::Result<(Setup, Vec<ClusterFault>)> {
    let namespaces = args.network == Network::Namespaces;
    anyhow::ensure!(
        !namespaces || args.database == DatabaseKind::Ha,
        "--network namespaces runs only with --database ha (the namespaces are the cluster's)"
    );
    let replicas = match (args.database, args.network, args.replicas) {
        (DatabaseKind::Sqlite, _, _) => 1,
        (_, Network::Namespaces, Some(replicas)) if replicas < 2 => anyhow::bail!(
            "--network namespaces needs --replicas 2 or more: a split brain leaves backend 1 on \
             the cut-off leader and needs another on the new one"
        ),
        (_, Network::Namespaces, replicas) => replicas.unwrap_or(2),
        (_, Network::Loopback, replicas) => replicas.unwrap_or(3).max(1),
    };
    let cluster_faults = match &args.cluster_faults {
        Some(faults) => faults.clone(),
        None if namespaces => ClusterFault::PARTITIONS.to_vec(),
        None => ClusterFault::PROCESS_FAULTS.to_vec(),
    };
    if let Some(fault) = cluster_faults.iter().find(|fault| fault.needs_namespaces()) {
        anyhow::ensure!(
            namespaces,
            "the cluster fault {fault:?} cuts a link between namespaces: it needs --network namespaces"
        );
    }
    let setup = Setup {
        database: args.database,
        replication: args.ha_replication,
        network: args.network,
        replicas,
    };
    Ok((setup, cluster_faults))
}

/// Runs the soak; `true` if the audit passed.
async fn run(args: Args) -> anyhow::Result<bool> {
    let (setup, cluster_faults) = setup_of(&args)?;
    let duration = Duration::from_secs(args.duration_seconds);
    let plan = Plan {
        duration,
        database: args.database,
        replicas: setup.replicas,
        cluster_faults,
        other_faults: args.other_faults,
    };
    let schedule = faults::schedule(args.seed, &plan);
    report::print_schedule(&args, setup.replicas, &schedule);
    if args.schedule_only {
        return Ok(true);
    }

    let scratch = std::env::temp_dir().join(format!("soak-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&scratch)?;
    let mut stack = Stack::start(setup, &scratch).await?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn setup_for(flags: &str) -> anyhow::Result<(Setup, Vec<ClusterFault>)> {
        setup_of(&Args::parse_from(
            ["soak"].into_iter().chain(flags.split_whitespace()),
        ))
    }

    #[test]
    fn namespaces_take_a_cluster_two_replicas_and_the_partitions_by_default() {
        let (setup, faults) = setup_for("--database ha --network namespaces").expect("valid");
        assert_eq!(setup.replicas, 2);
        assert_eq!(faults, ClusterFault::PARTITIONS);
        let (setup, faults) = setup_for("--database ha").expect("valid");
        assert_eq!((setup.replicas, setup.network), (3, Network::Loopback));
        assert_eq!(faults, ClusterFault::PROCESS_FAULTS);
        let (_, faults) = setup_for(
            "--database ha --network namespaces --cluster-faults isolate-leader,kill-leader",
        )
        .expect("process faults work in namespaces too");
        assert_eq!(
            faults,
            [ClusterFault::IsolateLeader, ClusterFault::KillLeader]
        );
    }

    #[test]
    fn namespaces_refuse_other_databases_one_replica_and_partitions_on_loopback() {
        for flags in [
            "--network namespaces",
            "--database sqlite --network namespaces",
            "--database ha --network namespaces --replicas 1",
            "--database ha --cluster-faults split-brain",
        ] {
            assert!(setup_for(flags).is_err(), "{flags} must be refused");
        }
    }
}
