//! What a database failover does to a payment, on PostgreSQL, each piece on its own (the whole
//! of it, on a Patroni cluster whose leader is killed, is the `failover` suite and the HA soak):
//! - a claim whose commit reached the database but whose reply never came back (the primary
//!   died in between) replies 503 `service-unavailable` and is never followed by a bank call;
//!   the process that made it knows it sent nothing, so it releases the claim once the
//!   database replies, and the retry debits once, under the claim's own reference;
//! - a node gone read-only under the pool (SQLSTATE 25006, as a demoted primary replies) is
//!   "database unavailable", 503 with nothing claimed, never a 500; and the pool drops those
//!   connections, so the first payments once the database takes writes again go through
//!   instead of failing on read-only sessions the pool kept.
//!
//! - a replica cut off from the database past `stuck_after` whose claim was released and claimed
//!   again elsewhere meanwhile releases only its own claim when its link comes back, never the
//!   claim made since (issue 45).
//!
//! Connections cut while idle are the `database_restart` suite's (the failover mark is one per
//! process, and these tests set it).

use std::net::SocketAddr;
use std::time::Duration;

use sqlx::Connection;

use backend::config::Limits;
use backend::reconcile::{Step, try_reconcile_once};
use bank_simulator::Knobs;

use crate::support::{LostReplyProxy, Options, TestApp, new_key, payment_body, send_pay, wait_for};

/// The part of the `pay_bill` claim statement the proxy recognises it by.
const CLAIM_SQL: &str = "INSERT INTO payments (payment_id";

fn local_postgres() -> SocketAddr {
    let url = test_harness::admin_url();
    let authority = url
        .split_once("://")
        .and_then(|(_, rest)| rest.split('/').next())
        .expect("TEST_DATABASE_URL names a server");
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, at)| at);
    let host_port = if host_port.contains(':') {
        host_port.to_owned()
    } else {
        format!("{host_port}:5432")
    };
    host_port
        .replace("localhost", "127.0.0.1")
        .parse()
        .expect("an IP address and port")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_claim_whose_commit_lost_its_reply_is_never_followed_by_a_bank_call() {
    let proxy = LostReplyProxy::start(local_postgres()).await;
    let app = TestApp::spawn_with(Options {
        database_via: Some(proxy.clone()),
        ..Options::default()
    })
    .await;
    let (key, body) = (new_key(), payment_body(230_000));

    proxy.lose_the_reply_to(CLAIM_SQL);
    let first = app.pay(7, Some(&key), "elec-1", &body).await;
    first.assert_problem(503, "service-unavailable");
    assert!(first.header("retry-after").is_some());
    assert_eq!(
        proxy.replies_lost(),
        1,
        "the claim's reply was the one lost"
    );
    assert_eq!(
        app.key_state(7, &key).await.as_deref(),
        Some("started"),
        "the claim committed; only its reply was lost"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(app.ledger().await.debits.is_empty(), "no bank call");

    // This process knows it never called the bank for that claim: it releases it as soon as
    // the database replies, so the retry need not wait for reconciliation (stuck_after).
    wait_for(
        "the claim without a reply released",
        Duration::from_secs(10),
        async || app.key_state(7, &key).await.as_deref() == Some("released"),
    )
    .await;
    let paid = app.pay(7, Some(&key), "elec-1", &body).await;
    assert_eq!(paid.status, 201, "{}", String::from_utf8_lossy(&paid.bytes));
    let ledger = app.ledger().await;
    assert_eq!(ledger.debits.len(), 1, "one debit: {ledger:?}");
    assert_eq!(
        ledger.debits[0].reference,
        paid.json()["bank_reference"].as_str().expect("a reference"),
        "under the first claim's reference"
    );
    assert_eq!(
        app.count("payments").await,
        1,
        "one payment row, the first claim's"
    );
    assert_eq!(
        app.trail_of_length(7, 4).await,
        ["claimed", "released", "claimed_again", "bank_answered"]
    );
}

/// Issue 45's stale release, end to end: replica A's claim commits but its link is cut before
/// the reply (the proxy holds the connection silent for 4 s, then closes it). Meanwhile the key
/// is released by reconciliation (past `stuck_after`) and claimed again through replica B, whose
/// bank call takes 8 s. A's link comes back during that call, and A releases the claim it made,
/// as it should; the release must not touch B's claim, or the next retry would call the bank a
/// second time under the same reference (dedupe off: a second debit).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cut_off_replicas_late_release_never_releases_the_key_claimed_again_elsewhere() {
    let proxy = LostReplyProxy::start(local_postgres()).await;
    let options = Options {
        knobs: Knobs {
            dedupe: false,
            ..Knobs::default()
        },
        bank_timeout: Duration::from_secs(10),
        limits: Limits {
            request_timeout: Duration::from_secs(20),
            ..Limits::default()
        },
        ..Options::default()
    };
    let replica_a = TestApp::spawn_with(Options {
        database_via: Some(proxy.clone()),
        ..options.clone()
    })
    .await;
    let replica_b = replica_a.spawn_replica(&options).await;
    let (key, body) = (new_key(), payment_body(45_000));
    let http = replica_a.http.clone();

    proxy.lose_the_reply_and_hold(CLAIM_SQL, Duration::from_secs(4));
    let cut_off = {
        let (http, url, key, body) = (
            http.clone(),
            replica_a.url.clone(),
            key.clone(),
            body.clone(),
        );
        tokio::spawn(async move { send_pay(&http, &url, 7, Some(&key), "elec-1", &body).await })
    };
    wait_for("A's claim committed", Duration::from_secs(10), async || {
        replica_a.key_state(7, &key).await.as_deref() == Some("started")
    })
    .await;
    replica_a
        .age_keys(Some(&key), Duration::from_secs(6 * 60))
        .await;
    while try_reconcile_once(&replica_a.state).await.expect("a step") != Step::NothingDue {}
    assert_eq!(
        replica_a.key_state(7, &key).await.as_deref(),
        Some("released")
    );

    replica_a.bank.simulator.set_knobs(Knobs {
        latency_ms: 8_000,
        dedupe: false,
        ..Knobs::default()
    });
    let reclaimed = {
        let (http, url, key, body) = (
            http.clone(),
            replica_b.url.clone(),
            key.clone(),
            body.clone(),
        );
        tokio::spawn(async move { send_pay(&http, &url, 7, Some(&key), "elec-1", &body).await })
    };
    wait_for("B's re-claim", Duration::from_secs(10), async || {
        replica_a.key_state(7, &key).await.as_deref() == Some("started")
    })
    .await;
    let lost = cut_off
        .await
        .expect("ran")
        .expect("A replies once its link is back");
    lost.assert_problem(503, "service-unavailable");
    assert_eq!(proxy.replies_lost(), 1);
    // A's release runs half a second after its error; give it that and a little more.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(
        replica_a.key_state(7, &key).await.as_deref(),
        Some("started"),
        "B's claim was not A's to release"
    );
    let meanwhile = send_pay(&http, &replica_b.url, 7, Some(&key), "elec-1", &body)
        .await
        .expect("B replies");
    meanwhile.assert_problem(409, "request-in-progress");

    let paid = reclaimed.await.expect("ran").expect("B replies");
    assert_eq!(paid.status, 201, "{paid:?}");
    let reference = paid.json()["bank_reference"].clone();
    let debits = replica_a.ledger().await.debits;
    assert_eq!(
        debits
            .iter()
            .filter(|debit| debit.reference == reference.as_str().expect("a reference"))
            .count(),
        1,
        "one call under the reference: {debits:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_gone_read_only_is_a_503_and_the_pool_drops_its_connections() {
    let app = TestApp::spawn().await;
    let database: String = sqlx::query_scalar("SELECT current_database()")
        .fetch_one(app.pg_pool())
        .await
        .expect("the database's name");
    let paid = app
        .pay(8, Some(&new_key()), "elec-1", &payment_body(100))
        .await;
    assert_eq!(paid.status, 201, "the pool is warm and writable");

    // The node goes read-only under the pool: every session opened from now on is read-only,
    // and the open ones are cut, as a demotion does. (Done from the maintenance database,
    // whose sessions stay writable.)
    let mut admin = sqlx::PgConnection::connect(&test_harness::admin_url())
        .await
        .expect("the maintenance database");
    for statement in [
        format!("ALTER DATABASE {database} SET default_transaction_read_only = on"),
        format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{database}'"
        ),
    ] {
        sqlx::raw_sql(&statement)
            .execute(&mut admin)
            .await
            .expect(&statement);
    }
    let mut refused = 0;
    for attempt in 0..5 {
        let reply = app
            .pay(
                8,
                Some(&new_key()),
                &format!("read-only-{attempt}"),
                &payment_body(100),
            )
            .await;
        reply.assert_problem(503, "service-unavailable");
        refused += 1;
    }
    assert_eq!(refused, 5);
    let payments: i64 = sqlx::query_scalar("SELECT count(*) FROM payments")
        .fetch_one(app.pg_pool())
        .await
        .expect("a read-only session still reads");
    assert_eq!(payments, 1, "nothing claimed while read-only");
    assert_eq!(
        app.ledger().await.debits.len(),
        1,
        "no bank call while read-only"
    );

    // Writable again for new sessions; the pool's read-only sessions are still open.
    let reset = format!("ALTER DATABASE {database} RESET default_transaction_read_only");
    sqlx::raw_sql(&reset)
        .execute(&mut admin)
        .await
        .expect(&reset);
    let mut statuses = Vec::new();
    for attempt in 0..3 {
        let reply = app
            .pay(
                8,
                Some(&new_key()),
                &format!("writable-{attempt}"),
                &payment_body(100),
            )
            .await;
        statuses.push(reply.status);
        if reply.status == 201 {
            break;
        }
        reply.assert_problem(503, "service-unavailable");
    }
    assert_eq!(
        statuses.last(),
        Some(&201),
        "the pool kept handing out read-only sessions: {statuses:?}"
    );
}
