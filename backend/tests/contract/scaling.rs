//! The scaling path, proven on the SQL: the migrations applied to tables hash-partitioned by
//! `user_id` (what a distributed PostgreSQL such as Citus does across servers) run the whole
//! service unchanged: claims, replays, the race, refunds, reconciliation and expiry. Every
//! primary key leads with `user_id` and every statement names the user, so each request touches
//! one partition.

use std::collections::HashSet;

use crate::support::{Options, Received, TestApp, new_key, payment_body};
use bank_simulator::{BankSimulator, Knobs};
use futures_util::future::join_all;
use sqlx::{Connection, PgConnection, PgPool};

const PARTITIONS: u32 = 4;
const TABLES: [&str; 3] = ["payments", "refunds", "idempotency_keys"];

/// The migrations in order, the first with each table declared `PARTITION BY HASH (user_id)`
/// and given partitions, the later ones as they are. The partition key is made text from the
/// start, as a partitioned deployment has it after the rebuild that opaque subjects need
/// (PostgreSQL cannot change a partition key's type in place; docs/operations.md), so the
/// migration that converts `user_id` leaves these tables as they are.
fn partitioned_migration() -> String {
    let directory = concat!(env!("CARGO_MANIFEST_DIR"), "/../migrations");
    let mut files: Vec<_> = std::fs::read_dir(directory)
        .expect("the migrations directory")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "sql"))
        .collect();
    files.sort();
    let read = |path: &std::path::PathBuf| std::fs::read_to_string(path).expect("a migration");
    let (first, later) = files.split_first().expect("some migrations");
    let mut sql = read(first);
    for table in TABLES {
        let start = sql
            .find(&format!("CREATE TABLE {table} ("))
            .expect("table in migration");
        let end = start + sql[start..].find("\n);").expect("end of table");
        sql.replace_range(end..end + 3, "\n) PARTITION BY HASH (user_id);");
        for remainder in 0..PARTITIONS {
            sql.push_str(&format!(
                "\nCREATE TABLE {table}_p{remainder} PARTITION OF {table} \
                 FOR VALUES WITH (MODULUS {PARTITIONS}, REMAINDER {remainder});"
            ));
        }
    }
    for migration in later {
        sql.push('\n');
        sql.push_str(&read(migration));
    }
    with_text_user_ids(&sql)
}

/// `sql` with every table's `user_id` column declared text, not bigint.
fn with_text_user_ids(sql: &str) -> String {
    let lines = sql.lines().map(|line| {
        if line.trim_start().starts_with("user_id ") {
            line.replacen(" bigint ", " text COLLATE \"C\" ", 1)
        } else {
            line.to_owned()
        }
    });
    lines.collect::<Vec<_>>().join("\n")
}

struct PartitionedApp {
    url: String,
    http: reqwest::Client,
    bank: bank_simulator::RunningBank,
    state: backend::state::AppState,
    pool: PgPool,
    _database: crate::support::TestDatabase,
}

async fn spawn_partitioned() -> PartitionedApp {
    let database = crate::support::TestDatabase::create().await;
    let database_url = database.url().to_owned();
    let mut conn = PgConnection::connect(&database_url).await.expect("connect");
    sqlx::raw_sql(&partitioned_migration())
        .execute(&mut conn)
        .await
        .expect("the migration applies to partitioned tables");
    let bank = BankSimulator::spawn(Knobs {
        dedupe: false,
        ..Knobs::default()
    })
    .await
    .expect("bank");
    let config = crate::support::test_config(database_url.clone(), &bank.url, &Options::default());
    let pool = PgPool::connect(&database_url).await.expect("pool");
    let store = backend::store::connect(&database_url, 10, std::time::Duration::from_secs(3))
        .await
        .expect("the store connects");
    let state = backend::startup::build_state(&config, store).expect("state");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let router = backend::http::router(state.clone());
    tokio::spawn(async move { axum::serve(listener, router).await.expect("serve") });
    PartitionedApp {
        url,
        http: reqwest::Client::new(),
        bank,
        state,
        pool,
        _database: database,
    }
}

impl PartitionedApp {
    async fn pay(&self, user: u64, key: &str, bill: &str) -> Received {
        let response = self
            .http
            .post(format!("{}/v1/bills/{bill}/pay", self.url))
            .bearer_auth(TestApp::token(user))
            .header("Idempotency-Key", key)
            .json(&payment_body(1_000))
            .send()
            .await
            .expect("replies");
        Received::from(response).await
    }

    async fn partitions_used(&self, table: &str) -> usize {
        let partitions: Vec<String> = sqlx::query_scalar(&format!(
            "SELECT DISTINCT tableoid::regclass::text FROM {table}"
        ))
        .fetch_all(&self.pool)
        .await
        .expect("partitions");
        partitions.len()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_runs_unchanged_on_tables_partitioned_by_user() {
    let app = spawn_partitioned().await;

    // Payments from 40 users, each retried once: 40 debits, 40 replays.
    let mut payment_ids = Vec::new();
    for user in 1..=40 {
        let key = new_key();
        let first = app.pay(user, &key, "elec-1").await;
        assert_eq!(first.status, 201);
        let again = app.pay(user, &key, "elec-1").await;
        assert!(again.is_replay());
        assert_eq!(again.bytes, first.bytes);
        payment_ids.push((
            user,
            first.json()["payment_id"].as_str().expect("id").to_owned(),
        ));
    }

    // The race, 100 rounds of two simultaneous attempts.
    for round in 0..100u64 {
        let key = new_key();
        let user = 100 + round % 7;
        let replies = join_all([app.pay(user, &key, "race"), app.pay(user, &key, "race")]).await;
        let fresh = replies
            .iter()
            .filter(|a| a.status == 201 && !a.is_replay())
            .count();
        assert_eq!(fresh, 1, "round {round}");
    }

    // Refunds: each payment partly refunded.
    for (user, payment_id) in payment_ids.iter().take(10) {
        let response = app
            .http
            .post(format!("{}/v1/payments/{payment_id}/refunds", app.url))
            .bearer_auth(TestApp::token(*user))
            .header("Idempotency-Key", new_key())
            .json(&serde_json::json!({ "amount_paise": 400 }))
            .send()
            .await
            .expect("replies");
        assert_eq!(response.status(), 201);
    }

    // A key left `unknown` is reconciled; old keys expire.
    sqlx::query("UPDATE idempotency_keys SET state = 'unknown' WHERE user_id = '1' AND operation = 'pay_bill'")
        .execute(&app.pool)
        .await
        .expect("mark unknown");
    let step = backend::reconcile::try_reconcile_once(&app.state)
        .await
        .expect("reconcile");
    assert_eq!(step, backend::reconcile::Step::Handled);
    sqlx::query(
        "UPDATE idempotency_keys SET created_at = now() - interval '49 hours', \
                expires_at = now() - interval '1 hour' \
         WHERE user_id IN (SELECT generate_series(1, 20)::text)",
    )
    .execute(&app.pool)
    .await
    .expect("age keys");
    let expired = backend::janitor::expire_all(&app.state, 7)
        .await
        .expect("expire");
    assert_eq!(
        expired, 30,
        "20 payment keys and 10 refund keys of users 1-20"
    );

    let ledger: bank_simulator::Ledger = app
        .http
        .get(format!("{}/ledger", app.bank.url))
        .send()
        .await
        .expect("ledger")
        .json()
        .await
        .expect("json");
    let references: HashSet<_> = ledger.debits.iter().map(|d| &d.reference).collect();
    assert_eq!(
        ledger.debits.len(),
        140,
        "one debit per key, with the bank's dedupe off"
    );
    assert_eq!(references.len(), 140);
    assert_eq!(ledger.refunds.len(), 10);
    for table in TABLES {
        let used = app.partitions_used(table).await;
        assert!(used >= 2, "{table}: rows spread over {used} partitions");
    }
}
