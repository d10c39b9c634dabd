//! The backend on a replicated PostgreSQL that fails over: three nodes under Patroni with
//! synchronous replication in strict mode, one etcd, HAProxy in front sending connections to
//! the leader (`scripts/ha-cluster.sh`, started here on ports of its own and taken down at the
//! end), as a payments team runs its database. In order, on one cluster:
//! 1. production start-up finds its synchronous standby, and readiness and the
//!    `payments_database_synchronous_standbys` metric report it;
//! 2. the leader is killed (its Patroni and PostgreSQL, as a machine dies) while clients pay:
//!    every request is replied to, with 201 or a retryable 409/503 and never a 500; a new leader
//!    is elected; every client's payment ends final; and the bank's ledger and the tables on
//!    the new leader agree exactly: no acknowledged payment lost, no double debit;
//! 3. every standby is lost: with strict replication writes stop, so readiness turns not-ready
//!    and a payment gets 503 at its deadline, with nothing debited; once a standby is
//!    back the claim that was waiting commits, and its retry gets the one payment.
//!
//! Failover takes the cluster's whole TTL (about 20 s), so the phases share one cluster in one
//! test, and the binary stands alone (cargo runs test binaries one after another).

#[path = "../support/mod.rs"]
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use backend::config::Limits;
use backend::durability::Replication;
use support::load::{
    BackgroundReconciler, ClientRun, assert_ledger_matches_tables, pay_until_final,
};
use support::{Options, TestApp, metric_at, new_key, payment_body, wait_for};
use test_harness::{HaCluster, HaMode};

/// This suite's cluster ports (`HA_PORT_BASE`): apart from the default a person's cluster uses.
const PORT_BASE: u16 = 15530;
/// Clients paying at once while the leader is killed, each as its own user.
const CLIENTS: u64 = 6;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_patroni_cluster_fails_over_and_no_payment_is_lost_or_paid_twice() {
    let repo = test_harness::workerd::repo_root_of(env!("CARGO_MANIFEST_DIR"));
    let cluster =
        tokio::task::spawn_blocking(move || HaCluster::up(&repo, PORT_BASE, HaMode::Strict))
            .await
            .expect("the cluster starts");

    start_up_sees_the_synchronous_standby(&cluster).await;
    the_leader_killed_under_load_loses_nothing(&cluster).await;
    losing_every_standby_stops_writes_and_loses_nothing(&cluster).await;
}

fn on(cluster: &HaCluster) -> Options {
    Options {
        postgres_server: Some(cluster.maintenance_url()),
        replication: Replication::SynchronousStrict,
        ..Options::default()
    }
}

async fn start_up_sees_the_synchronous_standby(cluster: &HaCluster) {
    let app = TestApp::spawn_with(on(cluster)).await;
    let readiness: serde_json::Value = app
        .http
        .get(format!("{}/readyz", app.admin_url))
        .send()
        .await
        .expect("the admin listener replies")
        .json()
        .await
        .expect("JSON");
    assert_eq!(readiness["database"]["ready"], true, "{readiness}");
    // The first check after start-up reads the standbys.
    wait_for(
        "the readiness check counts the standby",
        Duration::from_secs(10),
        async || {
            metric_at(
                &app.http,
                &app.admin_url,
                "payments_database_synchronous_standbys",
            )
            .await
                >= 1.0
        },
    )
    .await;
}

async fn the_leader_killed_under_load_loses_nothing(cluster: &HaCluster) {
    let app = Arc::new(TestApp::spawn_with(on(cluster)).await);
    let reconciler = BackgroundReconciler::start(&app);
    let paying = Arc::new(AtomicBool::new(true));
    let clients: Vec<_> = (1..=CLIENTS)
        .map(|user| {
            let (app, paying) = (Arc::clone(&app), Arc::clone(&paying));
            tokio::spawn(async move {
                let mut runs = Vec::new();
                while paying.load(Ordering::SeqCst) {
                    runs.push(pay_until_final(&app, user, new_key()).await);
                }
                runs
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(2)).await;

    let killed_at = Instant::now();
    let killed = cluster.kill_leader().await.expect("the leader is killed");
    cluster
        .wait_healthy(90)
        .await
        .expect("a new leader with a synchronous standby");
    let elected_in = killed_at.elapsed();
    // Payments on the new leader for a while, then the old leader rejoins as a standby.
    tokio::time::sleep(Duration::from_secs(3)).await;
    paying.store(false, Ordering::SeqCst);
    let mut runs: Vec<ClientRun> = Vec::new();
    for client in clients {
        runs.extend(client.await.expect("a client ran"));
    }
    cluster
        .run(&["start-node", &killed])
        .await
        .expect("the old leader starts again");
    wait_for("every key is final", Duration::from_secs(60), async || {
        app.scalar("SELECT count(*) FROM idempotency_keys WHERE state <> 'done'")
            .await
            == 0
    })
    .await;
    reconciler.stop().await;

    let reconciled = assert_ledger_matches_tables(&app, &runs).await;
    let unavailable: u32 = runs.iter().map(|run| run.service_unavailable).sum();
    println!(
        "leader {killed} killed: a new leader took writes after {:.1} s; {} payments, {} debits, \
         {unavailable} replies 503 service-unavailable on the way",
        elected_in.as_secs_f64(),
        runs.len(),
        reconciled.debits
    );
    assert!(
        runs.iter().any(|run| run.service_unavailable > 0),
        "the failover was seen by the clients (503s while no leader)"
    );
}

async fn losing_every_standby_stops_writes_and_loses_nothing(cluster: &HaCluster) {
    let request_timeout = Duration::from_secs(3);
    let app = TestApp::spawn_with(Options {
        bank_timeout: Duration::from_secs(1),
        limits: Limits {
            request_timeout,
            ..Limits::default()
        },
        ..on(cluster)
    })
    .await;
    let reconciler = BackgroundReconciler::start(&app);
    let lost = cluster
        .run(&["kill-standbys"])
        .await
        .expect("the standbys are killed");
    wait_for(
        "readiness turns not-ready with no standby",
        Duration::from_secs(10),
        async || {
            let reply = app
                .http
                .get(format!("{}/readyz", app.url))
                .send()
                .await
                .expect("the API replies");
            reply.status() == 503
        },
    )
    .await;

    let key = new_key();
    let asked = Instant::now();
    // The body and bill `pay_until_final` sends for user 9, so its retry is the same request.
    let refused = app.pay(9, Some(&key), "elec-1", &payment_body(1_009)).await;
    refused.assert_problem(503, "service-unavailable");
    assert!(
        asked.elapsed() < request_timeout + Duration::from_secs(2),
        "replied at its deadline, not when the database came back: {:?}",
        asked.elapsed()
    );
    assert!(app.ledger().await.debits.is_empty(), "nothing debited");

    for node in lost.split_whitespace() {
        cluster
            .run(&["start-node", node])
            .await
            .expect("a standby starts again");
    }
    cluster.wait_healthy(90).await.expect("a standby is back");
    let run = pay_until_final(&app, 9, key).await;
    reconciler.stop().await;
    assert_eq!(run.reply.status, 201);
    let reconciled = assert_ledger_matches_tables(&app, &[run]).await;
    assert_eq!(reconciled.debits, 1, "the waiting claim paid once");
}
