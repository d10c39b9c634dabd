//! PostgreSQL stopped and started again in the middle of a load run (SPEC §4 "any failure after
//! the claim", §5 invariants 1, 4 and 5): while the database is away the service answers 503
//! (`service-unavailable` before anything was done, `outcome-pending` when the bank may have
//! moved money), never 500, and `/readyz` says 503; once PostgreSQL is back the service recovers
//! by itself (`/readyz` 200, new payments go through), and after reconciliation the bank's
//! ledger and the tables agree exactly, as after any load run.
//!
//! This stops the machine's one PostgreSQL server, so it lives alone in its test binary: cargo
//! runs test binaries one after another, the tests inside one binary at the same time. It needs
//! `pg_ctlcluster` and the right to use it (root, as `tests/run-all.sh` runs); without them it
//! fails, saying so, rather than skip.

mod support;

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use backend::bank_simulator::Knobs;
use futures_util::{StreamExt, stream};
use shared::Policy;
use support::load::{
    BackgroundReconciler, ClientRun, assert_ledger_matches_tables, pay_until_final,
};
use support::{Options, TestApp, new_key, payment_body, wait_for};

const PAYMENTS: u64 = 200;
const CONCURRENCY: usize = 8;
/// How many payments finish before PostgreSQL is stopped.
const FINISHED_BEFORE_STOP: usize = 40;
/// How long PostgreSQL stays away once the service has noticed.
const OUTAGE: Duration = Duration::from_secs(2);

/// The local PostgreSQL cluster, stopped by [`Cluster::stop`] and started again by
/// [`Cluster::start`] or, should the test fail in between, on drop: a failing test must not
/// leave the machine without its database.
struct Cluster {
    version: String,
    stopped: bool,
}

impl Cluster {
    /// The newest cluster under `/etc/postgresql` (as `tests/start-postgres.sh` picks it).
    fn local() -> Cluster {
        let mut versions: Vec<String> = std::fs::read_dir("/etc/postgresql")
            .expect(
                "this test restarts PostgreSQL with pg_ctlcluster and needs /etc/postgresql \
                 (a Debian-style PostgreSQL install, as tests/start-postgres.sh sets up)",
            )
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .collect();
        versions.sort_by_key(|version| version.parse::<u32>().unwrap_or(0));
        let version = versions.pop().expect("a cluster under /etc/postgresql");
        Cluster {
            version,
            stopped: false,
        }
    }

    async fn stop(&mut self) {
        run_pg_ctlcluster(&self.version, "stop")
            .await
            .unwrap_or_else(|error| {
                panic!(
                    "this test must be able to stop and start PostgreSQL (run it as root, as \
                     tests/run-all.sh does): {error}"
                )
            });
        self.stopped = true;
    }

    async fn start(&mut self) {
        run_pg_ctlcluster(&self.version, "start")
            .await
            .unwrap_or_else(|error| panic!("PostgreSQL did not start again: {error}"));
        self.stopped = false;
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.stopped
            && let Err(error) = pg_ctlcluster(&self.version, "start")
        {
            eprintln!("could not start PostgreSQL again after a failed test: {error}");
        }
    }
}

/// `pg_ctlcluster VERSION main ACTION`, off the async threads.
async fn run_pg_ctlcluster(version: &str, action: &'static str) -> Result<(), String> {
    let version = version.to_owned();
    tokio::task::spawn_blocking(move || pg_ctlcluster(&version, action))
        .await
        .expect("pg_ctlcluster ran")
}

fn pg_ctlcluster(version: &str, action: &str) -> Result<(), String> {
    let mut command = Command::new("pg_ctlcluster");
    command.args(["--skip-systemctl-redirect", version, "main", action]);
    if action == "stop" {
        // Fast: statements in flight are cut off, as when a database server fails.
        command.args(["-m", "fast"]);
    }
    let output = command
        .output()
        .map_err(|error| format!("cannot run pg_ctlcluster: {error}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "pg_ctlcluster {action} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

async fn readyz(app: &TestApp) -> u16 {
    app.http
        .get(format!("{}/readyz", app.url))
        .send()
        .await
        .expect("the backend answers /readyz")
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restart_mid_load_is_answered_with_503s_and_recovered_without_a_double_debit() {
    let mut cluster = Cluster::local();
    let policy = Policy {
        stuck_after: Duration::from_secs(1),
        ..Policy::default_policy()
    };
    let app = Arc::new(
        TestApp::spawn_with(Options {
            knobs: Knobs {
                latency_ms: 20,
                jitter_ms: 60,
                lost_reply_rate: 0.1,
                lost_reply_delay_ms: 500,
                seed: 5,
                ..Knobs::default()
            },
            policy,
            bank_timeout: Duration::from_millis(300),
        })
        .await,
    );
    assert_eq!(readyz(&app).await, 200);
    let reconciler = BackgroundReconciler::start(&app);

    let finished = Arc::new(AtomicUsize::new(0));
    let load = tokio::spawn({
        let (app, finished) = (Arc::clone(&app), Arc::clone(&finished));
        async move {
            stream::iter(0..PAYMENTS)
                .map(|i| {
                    let (app, finished) = (Arc::clone(&app), Arc::clone(&finished));
                    async move {
                        let run = pay_until_final(&app, i % 10 + 1, new_key()).await;
                        finished.fetch_add(1, Ordering::SeqCst);
                        run
                    }
                })
                .buffer_unordered(CONCURRENCY)
                .collect::<Vec<ClientRun>>()
                .await
        }
    });
    wait_for(
        "the first payments to finish",
        Duration::from_secs(30),
        async || finished.load(Ordering::SeqCst) >= FINISHED_BEFORE_STOP,
    )
    .await;

    let stopped_at = Instant::now();
    let finished_before_stop = finished.load(Ordering::SeqCst);
    cluster.stop().await;
    wait_for("/readyz to say 503", Duration::from_secs(15), async || {
        readyz(&app).await == 503
    })
    .await;
    let noticed_after = stopped_at.elapsed();
    let probe_key = new_key();
    let probe = app
        .pay(99, Some(&probe_key), "elec-1", &payment_body(777))
        .await;
    probe.assert_problem(503, "service-unavailable");
    assert!(probe.header("retry-after").is_some());
    tokio::time::sleep(OUTAGE).await;
    cluster.start().await;
    wait_for(
        "/readyz to say 200 again",
        Duration::from_secs(30),
        async || readyz(&app).await == 200,
    )
    .await;
    let ready_again_after = stopped_at.elapsed();

    let mut runs = load.await.expect("every payment got a final answer");
    // The probe saved nothing while the database was away: its retry is a new request.
    let probe_run = pay_until_final(&app, 99, probe_key).await;
    assert!(
        probe_run.answer.status == 201 && !probe_run.answer.is_replay(),
        "the probe's retry did the work"
    );
    runs.push(probe_run);
    // Keys left `started` by requests the outage cut off are due after `stuck_after`.
    let unfinished = async || -> i64 {
        sqlx::query_scalar("SELECT count(*) FROM idempotency_keys WHERE state <> 'done'")
            .fetch_one(app.state.store.pool())
            .await
            .expect("count unfinished keys")
    };
    wait_for(
        "the reconciler to finish every key",
        Duration::from_secs(30),
        async || unfinished().await == 0,
    )
    .await;
    reconciler.stop().await;

    let reconciled = assert_ledger_matches_tables(&app, &runs).await;
    let unavailable: u32 = runs.iter().map(|run| run.service_unavailable).sum();
    let outcome_pending: u32 = runs.iter().map(|run| run.outcome_pending).sum();
    let in_progress: u32 = runs.iter().map(|run| run.in_progress).sum();
    println!(
        "PostgreSQL restart mid-load: {} payments, {finished_before_stop} finished before the \
         stop; /readyz said 503 {noticed_after:?} after the stop and 200 again after \
         {ready_again_after:?}; clients saw {unavailable} service-unavailable, {outcome_pending} \
         outcome-pending and {in_progress} in-progress answers, no 500; {} debits, {} declines",
        runs.len(),
        reconciled.debits,
        reconciled.declined,
    );
    assert!(
        unavailable > 0,
        "clients of the load saw the database go away as 503 service-unavailable"
    );
}
