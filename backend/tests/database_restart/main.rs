//! PostgreSQL stopped and started again in the middle of a load run (SPEC §4 "any failure after
//! the claim", §5 invariants 1, 4 and 5): while the database is away the service replies 503
//! (`service-unavailable` before anything was done, `outcome-pending` when the bank may have
//! moved money), never 500, and `/readyz` says 503; once PostgreSQL is back the service recovers
//! by itself (`/readyz` 200, new payments go through), and after reconciliation the bank's
//! ledger and the tables agree exactly, as after any load run.
//!
//! Also: every connection cut while it sat idle (as a restart, an operator's
//! `pg_terminate_backend` or a proxy's idle timeout does) costs nothing: the next payments go
//! through, because a connection idle for a second or more is pinged before it is used, in the
//! pool and among the writer's held connections alike, and a failed ping marks every older
//! connection stale (`store/failover.rs`).
//!
//! The restart stops the machine's one PostgreSQL server, so these tests live in a test binary
//! of their own (cargo runs test binaries one after another, the tests inside one binary at the
//! same time) and take turns ([`ONE_AT_A_TIME`]): the failover mark is one per process, so a
//! test that sets it would disturb the other. The restart needs
//! `pg_ctlcluster` and the right to use it (root, as `tests/run-all.sh` runs); without them it
//! fails, saying so, rather than skip.

#[path = "../support/mod.rs"]
mod support;

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bank_simulator::Knobs;
use shared::Policy;
use sqlx::Connection;
use support::load::{BackgroundReconciler, assert_ledger_matches_tables, pay_until_final};
use support::{Options, TestApp, new_key, payment_body, wait_for};

/// Held by each test for its whole run (see the module docs).
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Clients paying at once, each as its own user.
const CLIENTS: u64 = 8;
/// How many payments finish before PostgreSQL is stopped, and again after it is back.
const PAYMENTS_PER_PHASE: usize = 60;
/// How long PostgreSQL stays away once the service has noticed: long enough that the load's
/// clients, backing off after the outcome-pending replies of the attempts the stop cut short,
/// send new claims while it is away (at 2 s, a fresh clone on a busy machine once saw none).
const OUTAGE: Duration = Duration::from_secs(6);

/// The local PostgreSQL cluster, stopped by [`Cluster::stop`] and started again by
/// [`Cluster::start`] or, should the test fail in between, on drop: a failing test must not
/// leave the machine without its database.
struct Cluster {
    version: String,
    stopped: bool,
}

impl Cluster {
    /// The newest cluster under `/etc/postgresql` (as `scripts/start-postgres.sh` picks it).
    fn local() -> Cluster {
        let mut versions: Vec<String> = std::fs::read_dir("/etc/postgresql")
            .expect(
                "this test restarts PostgreSQL with pg_ctlcluster and needs /etc/postgresql \
                 (a Debian-style PostgreSQL install, as scripts/start-postgres.sh sets up)",
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
        if let Err(error) = run_pg_ctlcluster(&self.version, "start").await {
            // Another run on this machine (its scripts/start-postgres.sh) may have started it
            // first; what matters is that it runs.
            run_pg_ctlcluster(&self.version, "status")
                .await
                .unwrap_or_else(|_| panic!("PostgreSQL did not start again: {error}"));
        }
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
            "pg_ctlcluster {action} failed ({}): {} {}",
            output.status,
            String::from_utf8_lossy(&output.stdout).trim(),
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

async fn readyz(app: &TestApp) -> u16 {
    app.http
        .get(format!("{}/readyz", app.url))
        .send()
        .await
        .expect("the backend replies /readyz")
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restart_mid_load_is_met_with_503s_and_recovered_without_a_double_debit() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let mut cluster = Cluster::local();
    let policy = Policy {
        stuck_after: Duration::from_secs(1),
        ..support::test_policy()
    };
    let app = Arc::new(
        TestApp::spawn_with(Options {
            knobs: Knobs {
                latency_ms: 20,
                jitter_ms: 60,
                lost_reply_rate: 0.1,
                lost_reply_delay_ms: 500,
                seed: 5,
                // The ledger shows every call that moved money: no double debit is hidden.
                dedupe: false,
                ..Knobs::default()
            },
            policy,
            bank_timeout: Duration::from_millis(300),
            ..Options::default()
        })
        .await,
    );
    assert_eq!(readyz(&app).await, 200);
    // Flush the dirty pages earlier tests left, so the stop's own checkpoint is short and the
    // outage is the database being away, not a long shutdown.
    sqlx::query("CHECKPOINT")
        .execute(app.pg_pool())
        .await
        .expect("checkpoint before the load");
    let reconciler = BackgroundReconciler::start(&app);

    // Clients pay with new keys, one payment after another, until told to stop: before, during
    // and after the outage, however long each phase takes.
    let finished = Arc::new(AtomicUsize::new(0));
    let keep_paying = Arc::new(AtomicBool::new(true));
    let clients: Vec<_> = (1..=CLIENTS)
        .map(|user| {
            let (app, finished, keep_paying) = (
                Arc::clone(&app),
                Arc::clone(&finished),
                Arc::clone(&keep_paying),
            );
            tokio::spawn(async move {
                let mut runs = Vec::new();
                while keep_paying.load(Ordering::SeqCst) {
                    runs.push(pay_until_final(&app, user, new_key()).await);
                    finished.fetch_add(1, Ordering::SeqCst);
                }
                runs
            })
        })
        .collect();
    let payments_finish = async |count: usize| {
        wait_for(
            &format!("{count} payments to finish"),
            Duration::from_secs(60),
            async || finished.load(Ordering::SeqCst) >= count,
        )
        .await;
    };
    payments_finish(PAYMENTS_PER_PHASE).await;

    let stopped_at = Instant::now();
    let finished_before_stop = finished.load(Ordering::SeqCst);
    cluster.stop().await;
    let stop_took = stopped_at.elapsed();
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
    // Recovered by itself: new payments go through again.
    payments_finish(finished.load(Ordering::SeqCst) + PAYMENTS_PER_PHASE).await;
    keep_paying.store(false, Ordering::SeqCst);
    let mut runs = Vec::new();
    for client in clients {
        runs.extend(client.await.expect("every payment got a final reply"));
    }

    // The probe saved nothing while the database was away, so its retry is a new request.
    assert_eq!(
        app.key_state(99, &probe_key).await,
        None,
        "nothing was saved"
    );
    let probe_run = pay_until_final(&app, 99, probe_key).await;
    assert_eq!(probe_run.reply.status, 201);
    runs.push(probe_run);
    reconciler.stop().await;

    let reconciled = assert_ledger_matches_tables(&app, &runs).await;
    let unavailable: u32 = runs.iter().map(|run| run.service_unavailable).sum();
    let outcome_pending: u32 = runs.iter().map(|run| run.outcome_pending).sum();
    let in_progress: u32 = runs.iter().map(|run| run.in_progress).sum();
    println!(
        "PostgreSQL restart mid-load: {} payments, {finished_before_stop} finished before the \
         stop; the stop took {stop_took:?}; /readyz said 503 {noticed_after:?} after the stop \
         began and 200 again after {ready_again_after:?}; clients saw {unavailable} \
         service-unavailable, {outcome_pending} outcome-pending and {in_progress} in-progress \
         replies, no 500; {} debits, {} declines",
        runs.len(),
        reconciled.debits,
        reconciled.declined,
    );
    assert!(
        unavailable > 0,
        "clients of the load saw the database go away as 503 service-unavailable"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payments_go_through_after_every_idle_connection_was_closed_under_the_backend() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let app = TestApp::spawn().await;
    let database: String = sqlx::query_scalar("SELECT current_database()")
        .fetch_one(app.pg_pool())
        .await
        .expect("the database's name");
    let mut admin = sqlx::PgConnection::connect(&test_harness::admin_url())
        .await
        .expect("the maintenance database");
    let rounds = 3;
    for round in 0..rounds {
        let paid = app
            .pay(
                9,
                Some(&new_key()),
                &format!("idle-{round}"),
                &payment_body(100),
            )
            .await;
        assert_eq!(
            paid.status,
            201,
            "round {round}: {}",
            String::from_utf8_lossy(&paid.bytes)
        );
        // Idle past the one second after which a connection is pinged before use, then every
        // session of the app's database is cut, as a proxy's idle timeout or a restart does.
        tokio::time::sleep(Duration::from_millis(1_200)).await;
        // (With a timeout, `pg_terminate_backend` waits until each session has ended, so the
        // next payment cannot reach one still alive.)
        let cut: i64 = sqlx::query_scalar(&format!(
            "SELECT count(*) FILTER (WHERE ended) FROM (SELECT pg_terminate_backend(pid, 5000) \
             AS ended FROM pg_stat_activity WHERE datname = '{database}') AS cut"
        ))
        .fetch_one(&mut admin)
        .await
        .expect("terminate the sessions");
        assert!(cut >= 1, "round {round}: the backend's sessions were open");
    }
    let paid = app
        .pay(9, Some(&new_key()), "idle-last", &payment_body(100))
        .await;
    assert_eq!(paid.status, 201, "{}", String::from_utf8_lossy(&paid.bytes));
    assert_eq!(
        app.ledger().await.debits.len(),
        rounds + 1,
        "one debit per payment"
    );
    assert_eq!(
        app.count("payments").await,
        i64::try_from(rounds + 1).expect("small")
    );
}
