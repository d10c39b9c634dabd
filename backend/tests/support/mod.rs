//! The backend's part of the test harness (the shared part is the `test-harness` crate): a real
//! backend on a real socket, with its own fresh database and its own bank simulator on a real
//! socket. Every test gets a new database, so tests run in parallel without seeing each other's
//! rows, and it is dropped when the test ends: on PostgreSQL a `test_harness::TestDatabase`, on
//! SQLite a file in a temporary directory of its own.
//!
//! The contract suite is written once, as `async fn(StoreKind)` test bodies, and
//! [`for_each_store!`](crate::for_each_store) runs each against both stores; SPEC §4's rows are
//! `async fn(Setup)` bodies that [`for_each_store_and_entry!`](crate::for_each_store_and_entry)
//! also runs through the edge ([`edge_in_front`]).
#![allow(dead_code)] // The two test binaries use different parts of the harness.

pub mod edge_in_front;
pub mod load;
pub mod process;

use std::time::Duration;

use backend::config::{AllowedOrigins, BankConfig, Config, Drain, Identity, Limits};
use backend::durability::Replication;
use backend::startup::Application;
use backend::state::AppState;
use backend::store::{ClaimResult, ClaimToken, KeyRef, NewPayment};
use bank_simulator::{BankSimulator, Knobs, Ledger, RunningBank};
pub use edge_in_front::{EdgeInFront, Entry, Setup};
use secret_settings::SecretString;
use serde_json::{Value, json};
use shared::{IdempotencyKey, Policy, UserId};
use tokio::sync::oneshot;

pub use test_harness::{BankGateway, LostReplyProxy, Received, TestDatabase, metric_in, wait_for};

/// Instantiates each named `async fn(StoreKind)` test body as two tests, `on_postgres::NAME`
/// and `on_sqlite::NAME`: one contract, checked against each store.
#[macro_export]
macro_rules! for_each_store {
    ($($test:ident),+ $(,)?) => {
        mod on_postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $test() {
                    super::$test($crate::support::StoreKind::Postgres).await
                }
            )+
        }
        mod on_sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $test() {
                    super::$test($crate::support::StoreKind::Sqlite).await
                }
            )+
        }
    };
}

/// Instantiates each named `async fn(Setup)` test body on both stores, directly
/// (`on_postgres::NAME`, `on_sqlite::NAME`) and through the edge keeping replies
/// (`through_the_edge_on_*`) and keeping none (`through_the_residency_edge_on_*`). The bodies
/// after `only_directly:` run on both stores directly, for a reason their call site gives.
#[macro_export]
macro_rules! for_each_store_and_entry {
    ($($test:ident),+ $(,)?) => {
        $crate::for_each_store_and_entry!(@all [$($test),+] [$($test),+]);
    };
    ($($test:ident),+ $(,)?; only_directly: $($direct:ident),+ $(,)?) => {
        $crate::for_each_store_and_entry!(@all [$($test),+] [$($test,)+ $($direct),+]);
    };
    (@all [$($through:ident),+] [$($direct:ident),+]) => {
        $crate::for_each_store_and_entry!(@at on_postgres, Postgres, Backend; $($direct),+);
        $crate::for_each_store_and_entry!(@at on_sqlite, Sqlite, Backend; $($direct),+);
        $crate::for_each_store_and_entry!(@at through_the_edge_on_postgres, Postgres, EdgeKeepingReplies; $($through),+);
        $crate::for_each_store_and_entry!(@at through_the_edge_on_sqlite, Sqlite, EdgeKeepingReplies; $($through),+);
        $crate::for_each_store_and_entry!(@at through_the_residency_edge_on_postgres, Postgres, EdgeKeepingNone; $($through),+);
        $crate::for_each_store_and_entry!(@at through_the_residency_edge_on_sqlite, Sqlite, EdgeKeepingNone; $($through),+);
    };
    (@at $module:ident, $store:ident, $entry:ident; $($test:ident),+) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $test() {
                    super::$test($crate::support::Setup {
                        store: $crate::support::StoreKind::$store,
                        entry: $crate::support::Entry::$entry,
                    })
                    .await
                }
            )+
        }
    };
}

/// Which store a test backend keeps its keys and payments in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    /// A fresh PostgreSQL database.
    Postgres,
    /// A fresh SQLite file in a temporary directory.
    Sqlite,
}

/// The JWT secret the test backends use.
pub const SECRET: &str = "test-secret-that-is-at-least-32-bytes-long";
/// The operator tokens' secret of every test backend (`OPERATOR_JWT_SECRET`): not the customers'.
pub const OPERATOR_SECRET: &str = "test-operator-secret-at-least-32-bytes";

/// How a test app is set up.
#[derive(Clone)]
pub struct Options {
    /// The bank simulator's knobs.
    pub knobs: Knobs,
    /// The idempotency policy.
    pub policy: Policy,
    /// The backend's bank call timeout.
    pub bank_timeout: Duration,
    /// The store.
    pub store: StoreKind,
    /// A path put before every bank route (`/wrong` sends `/wrong/debits`): a misrouted
    /// `BANK_URL`.
    pub bank_path: &'static str,
    /// The backend's bounds on requests and bank calls.
    pub limits: Limits,
    /// The bank's proxy and breaker (the production defaults unless a test sets them).
    pub bank: BankConfig,
    /// Whether the backend reaches the bank simulator through a [`BankGateway`] (a load
    /// balancer the test switches between behaviours: [`TestApp::gateway`]).
    pub behind_gateway: bool,
    /// The bank the backend calls, when not the simulator the test started (whose ledger the
    /// test still reads): a port where nothing listens yet, say.
    pub bank_url: Option<String>,
    /// How commits must be replicated (`DATABASE_REPLICATION`).
    pub replication: Replication,
    /// A proxy the backend reaches PostgreSQL through (the test's own pool goes direct).
    pub database_via: Option<LostReplyProxy>,
    /// Tokens' keys and rules: the test secrets by default.
    pub identity: Identity,
    /// The PostgreSQL server the fresh database is made on, by its maintenance database's URL
    /// (a replicated cluster's); the local server when `None`.
    pub postgres_server: Option<String>,
    /// Whether the backend runs its own workers (the reconciler's drain, the janitor), as a
    /// deployed replica does; tests drive their steps themselves otherwise.
    pub run_workers: bool,
    /// The origins whose pages may call the API from a browser (`CORS_ALLOWED_ORIGINS`): none.
    pub cors_allowed_origins: AllowedOrigins,
    /// Where the test's customer requests enter: the backend, or an edge in front of it.
    pub entry: Entry,
}

/// The policy tests run under (`tests/policy-for-tests.yaml`): the shipped one with the rail's
/// status-check rules scaled from hours to seconds.
pub fn test_policy() -> Policy {
    Policy::from_yaml(TEST_POLICY_YAML).expect("tests/policy-for-tests.yaml is valid")
}

/// The text of `tests/policy-for-tests.yaml`.
pub const TEST_POLICY_YAML: &str = include_str!("../../../tests/policy-for-tests.yaml");

impl Default for Options {
    fn default() -> Self {
        Options {
            knobs: Knobs::default(),
            policy: test_policy(),
            bank_timeout: Duration::from_secs(5),
            store: StoreKind::Postgres,
            bank_path: "",
            limits: Limits::default(),
            bank: BankConfig::default(),
            behind_gateway: false,
            run_workers: false,
            cors_allowed_origins: AllowedOrigins::default(),
            bank_url: None,
            replication: Replication::None,
            database_via: None,
            postgres_server: None,
            identity: Identity::with_secrets(SECRET, Some(OPERATOR_SECRET)),
            entry: Entry::Backend,
        }
    }
}

impl Setup {
    /// The default options on this store and entry.
    pub fn options(self) -> Options {
        Options::default().entering(self)
    }
}

impl Options {
    /// These options on `setup`'s store, entered where it says.
    pub fn entering(self, setup: Setup) -> Options {
        Options {
            store: setup.store,
            entry: setup.entry,
            ..self
        }
    }

    /// On `store`, a bank that debits but holds every reply back for 3 s, past the backend's
    /// 300 ms bank timeout: every payment's key ends `unknown`, with its debit at the bank.
    pub fn replies_lost_past_the_timeout(store: StoreKind) -> Options {
        Options {
            store,
            knobs: Knobs {
                lost_reply_rate: 1.0,
                lost_reply_delay_ms: 3_000,
                ..Knobs::default()
            },
            bank_timeout: Duration::from_millis(300),
            ..Options::default()
        }
    }

    /// On `store`, a bank that takes `latency_ms` over every call, so that a request stays
    /// in flight while a test does something beside it.
    pub fn slow_bank(store: StoreKind, latency_ms: u64) -> Options {
        Options {
            store,
            knobs: Knobs {
                latency_ms,
                ..Knobs::default()
            },
            ..Options::default()
        }
    }

    /// On `store`, a bank that replies to every call with its own 503 (naming the reference) before it moves any money.
    pub fn bank_errors_before_debiting(store: StoreKind) -> Options {
        Options {
            store,
            knobs: Knobs {
                error_rate: 1.0,
                ..Knobs::default()
            },
            ..Options::default()
        }
    }
}

/// A pool on a test's database, whichever store it is.
pub enum TestDb {
    /// A PostgreSQL database.
    Postgres(sqlx::PgPool),
    /// A SQLite file.
    Sqlite(sqlx::SqlitePool),
}

impl TestDb {
    /// A small pool on the database `database_url` names (already migrated by the backend).
    pub async fn connect(database_url: &str) -> TestDb {
        let connected = if database_url.starts_with("sqlite://") {
            sqlx::SqlitePool::connect(database_url)
                .await
                .map(TestDb::Sqlite)
        } else {
            sqlx::PgPool::connect(database_url)
                .await
                .map(TestDb::Postgres)
        };
        connected.unwrap_or_else(|error| panic!("connect to {database_url}: {error}"))
    }
}

/// A running backend with its database and bank.
pub struct TestApp {
    /// The backend's `http://127.0.0.1:PORT`.
    pub url: String,
    /// Where customer requests enter ([`Options::entry`]): the edge's URL, or the backend's.
    pub entry_url: String,
    /// The admin listener's `http://127.0.0.1:PORT` (metrics, detailed readiness).
    pub admin_url: String,
    /// A client with a short timeout.
    pub http: reqwest::Client,
    /// The bank simulator (its ledger is read over HTTP, as an outside observer would).
    pub bank: RunningBank,
    /// The gateway in front of it, if [`Options::behind_gateway`].
    gateway: Option<BankGateway>,
    /// The backend's state: store (for row counts) and metrics.
    pub state: AppState,
    /// The URL of its fresh database (for a second "replica" on the same rows).
    pub database_url: String,
    /// A pool of the test's own on that database, to count and change rows directly.
    pub db: TestDb,
    _stop: oneshot::Sender<()>,
    /// The edge in front, if the test enters through one.
    _edge: Option<EdgeInFront>,
    /// The database or SQLite file, dropped when the app is dropped.
    _store: FreshStore,
}

/// A fresh, empty store of one kind, deleted when dropped.
pub struct FreshStore {
    /// `postgres://…` or `sqlite://…`.
    pub url: String,
    _database: Option<TestDatabase>,
    _sqlite_dir: Option<tempfile::TempDir>,
}

impl FreshStore {
    /// A fresh, empty store of `kind`: a PostgreSQL database (on `postgres_server`, else the
    /// local server), or a SQLite file in a temporary directory of its own.
    pub async fn create(kind: StoreKind, postgres_server: Option<&str>) -> FreshStore {
        match kind {
            StoreKind::Postgres => {
                let database = match postgres_server {
                    Some(server) => TestDatabase::create_on(server).await,
                    None => TestDatabase::create().await,
                };
                FreshStore {
                    url: database.url().to_owned(),
                    _database: Some(database),
                    _sqlite_dir: None,
                }
            }
            StoreKind::Sqlite => {
                let dir = tempfile::tempdir().expect("a temporary directory");
                FreshStore {
                    url: format!("sqlite://{}", dir.path().join("payments.sqlite").display()),
                    _database: None,
                    _sqlite_dir: Some(dir),
                }
            }
        }
    }
}

/// The configuration of a test backend on a free port.
pub fn test_config(database_url: String, bank_url: &str, options: &Options) -> Config {
    Config {
        database_url: database_url.into(),
        bank_url: bank_url.to_owned(),
        bank_ca_file: None,
        listen_addr: "127.0.0.1:0".parse().expect("valid address"),
        admin_addr: "127.0.0.1:0".parse().expect("valid address"),
        cors_allowed_origins: options.cors_allowed_origins.clone(),
        identity: options.identity.clone(),
        // The local PostgreSQL is one server; the failover suite runs on a replicated cluster.
        replication: options.replication,
        policy: options.policy.clone(),
        bank_timeout: options.bank_timeout,
        bank: options.bank.clone(),
        database_acquire_timeout: Duration::from_secs(3),
        reconcile_interval: Duration::from_millis(50),
        janitor_interval: Duration::from_secs(3600),
        trail_kept_after_key: Duration::from_secs(90 * 24 * 3600),
        // Tests drive the workers' steps themselves, unless they ask for them.
        run_workers: options.run_workers,
        limits: options.limits,
        // Stopped by dropping: nothing to drain for.
        migrate_on_start: true,
        drain: Drain {
            grace: Duration::ZERO,
            deadline: Duration::from_secs(15),
        },
    }
}

impl TestApp {
    /// A backend with default options, on PostgreSQL.
    pub async fn spawn() -> TestApp {
        TestApp::spawn_with(Options::default()).await
    }

    /// A backend with default options on `store`.
    pub async fn spawn_on(store: StoreKind) -> TestApp {
        TestApp::spawn_with(Options {
            store,
            ..Options::default()
        })
        .await
    }

    /// A backend with the given options.
    pub async fn spawn_with(mut options: Options) -> TestApp {
        if options.entry != Entry::Backend {
            options.identity.edge_proof_secrets =
                vec![SecretString::from(edge_in_front::PROOF_SECRET)];
        }
        let bank = BankSimulator::spawn(options.knobs.clone())
            .await
            .expect("bank simulator starts");
        let store = FreshStore::create(options.store, options.postgres_server.as_deref()).await;
        let database_url = store.url.clone();
        let gateway = match options.behind_gateway {
            true => Some(BankGateway::start(&bank.url).await),
            false => None,
        };
        let bank_url = (options.bank_url.clone())
            .or_else(|| gateway.as_ref().map(BankGateway::url))
            .unwrap_or_else(|| format!("{}{}", bank.url, options.bank_path));
        let backend_database_url = (options.database_via.as_ref()).map_or_else(
            || database_url.clone(),
            |proxy| proxy.url_for(&database_url),
        );
        let config = test_config(backend_database_url, &bank_url, &options);
        let app = Application::build(config).await.expect("backend builds");
        let url = format!("http://{}", app.local_addr());
        let admin_url = format!("http://{}", app.admin_addr());
        let db = TestDb::connect(&database_url).await;
        let state = app.state().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            app.run_until_stopped(async move {
                stopped.await.ok();
            })
            .await
            .expect("backend serves");
        });
        let edge = match options.entry {
            Entry::Backend => None,
            Entry::EdgeKeepingReplies => Some(EdgeInFront::start(true, &url).await),
            Entry::EdgeKeepingNone => Some(EdgeInFront::start(false, &url).await),
        };
        TestApp {
            entry_url: edge
                .as_ref()
                .map_or_else(|| url.clone(), |edge| edge.url.clone()),
            _edge: edge,
            url,
            admin_url,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .expect("client"),
            bank,
            gateway,
            state,
            database_url,
            db,
            _stop: stop,
            _store: store,
        }
    }

    /// The gateway between the backend and the bank ([`Options::behind_gateway`]).
    pub fn gateway(&self) -> &BankGateway {
        self.gateway
            .as_ref()
            .expect("the test app was spawned behind_gateway")
    }

    /// A valid token for `user`, valid for an hour.
    pub fn token(user: u64) -> String {
        Self::token_with_claims(&serde_json::json!({ "sub": user.to_string() }))
    }

    /// A token with `claims` (a `sub` or none) and an `exp` an hour ahead, signed with the
    /// test secret: any subject, well formed or not.
    pub fn token_with_claims(claims: &Value) -> String {
        let mut claims = claims.clone();
        claims["exp"] = (time::OffsetDateTime::now_utc().unix_timestamp() + 3600).into();
        shared::auth::sign_claims(&claims, SECRET.as_bytes())
    }

    /// An operator token for `name` (claim `role: "operator"`), valid for an hour.
    pub fn operator_token(name: &str) -> String {
        let exp = time::OffsetDateTime::now_utc().unix_timestamp() + 3600;
        let now = exp - 3600;
        let claims = serde_json::json!({
            "sub": name, "roles": ["payments-operator"], "iat": now, "exp": exp,
        });
        shared::auth::sign_claims(&claims, OPERATOR_SECRET.as_bytes())
    }

    /// `POST /v1/bills/{bill}/pay` as `user` with `key` (sent bare) and `body`.
    pub async fn pay(&self, user: u64, key: Option<&str>, bill: &str, body: &Value) -> Received {
        send_pay(&self.http, &self.entry_url, user, key, bill, body)
            .await
            .expect("backend replies")
    }

    /// `POST /v1/payments/{payment}/refunds`.
    pub async fn refund(&self, user: u64, key: &str, payment_id: &str, amount: u64) -> Received {
        send_refund(&self.http, &self.entry_url, user, key, payment_id, amount)
            .await
            .expect("backend replies")
    }

    /// `GET /v1/payments/{payment}`.
    pub async fn read_payment(&self, user: u64, payment_id: &str) -> Received {
        let response = self
            .http
            .get(format!("{}/v1/payments/{payment_id}", self.entry_url))
            .bearer_auth(Self::token(user))
            .send()
            .await
            .expect("backend replies");
        Received::from(response).await
    }

    /// The bank's ledger, over HTTP.
    pub async fn ledger(&self) -> Ledger {
        self.http
            .get(format!("{}/ledger", self.bank.url))
            .send()
            .await
            .expect("bank replies")
            .json()
            .await
            .expect("ledger is JSON")
    }

    /// The PostgreSQL pool behind the app, for the tests that only run on PostgreSQL.
    pub fn pg_pool(&self) -> &sqlx::PgPool {
        match &self.db {
            TestDb::Postgres(pool) => pool,
            TestDb::Sqlite(_) => panic!("this test runs on PostgreSQL only"),
        }
    }

    /// How many rows `table` holds.
    pub async fn count(&self, table: &str) -> i64 {
        self.scalar(&format!("SELECT count(*) FROM {table}")).await
    }

    /// The one integer a query that reads the same on both stores returns.
    pub async fn scalar(&self, sql: &str) -> i64 {
        match &self.db {
            TestDb::Postgres(pool) => sqlx::query_scalar(sql).fetch_one(pool).await,
            TestDb::Sqlite(pool) => sqlx::query_scalar(sql).fetch_one(pool).await,
        }
        .unwrap_or_else(|error| panic!("{sql}: {error}"))
    }

    /// The rows a query that reads the same on both stores returns.
    pub async fn rows<T>(&self, sql: &str) -> Vec<T>
    where
        T: for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow>
            + for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow>
            + Send
            + Unpin,
    {
        match &self.db {
            TestDb::Postgres(pool) => sqlx::query_as(sql).fetch_all(pool).await,
            TestDb::Sqlite(pool) => sqlx::query_as(sql).fetch_all(pool).await,
        }
        .unwrap_or_else(|error| panic!("{sql}: {error}"))
    }

    /// The texts a query that reads the same on both stores returns.
    pub async fn texts(&self, sql: &str) -> Vec<String> {
        match &self.db {
            TestDb::Postgres(pool) => sqlx::query_scalar(sql).fetch_all(pool).await,
            TestDb::Sqlite(pool) => sqlx::query_scalar(sql).fetch_all(pool).await,
        }
        .unwrap_or_else(|error| panic!("{sql}: {error}"))
    }

    /// Runs a statement that reads the same on both stores.
    pub async fn execute(&self, sql: &str) {
        match &self.db {
            TestDb::Postgres(pool) => sqlx::raw_sql(sql).execute(pool).await.map(drop),
            TestDb::Sqlite(pool) => sqlx::raw_sql(sql).execute(pool).await.map(drop),
        }
        .unwrap_or_else(|error| panic!("{sql}: {error}"))
    }

    /// The names of `user`'s audit trail events, in the order they were written: the view
    /// `key_trail`, which adds to `key_events` the routine events PostgreSQL keeps on movement
    /// rows.
    pub async fn trail(&self, user: u64) -> Vec<String> {
        self.texts(&format!(
            "SELECT CAST(event AS TEXT) FROM key_trail WHERE user_id = '{user}' ORDER BY event_id"
        ))
        .await
    }

    /// The request ids stamped on `user`'s events, in the order they were written (`-` for an
    /// event no request caused): a canonical UUID from the trail's `request_id` column, any
    /// other id from `request_id_text`.
    pub async fn request_ids(&self, user: u64) -> Vec<String> {
        let sql = format!(
            "SELECT request_id, request_id_text FROM key_trail WHERE user_id = '{user}' \
             ORDER BY event_id"
        );
        let rows: Vec<(Option<uuid::Uuid>, Option<String>)> = match &self.db {
            TestDb::Postgres(pool) => sqlx::query_as(&sql).fetch_all(pool).await,
            TestDb::Sqlite(pool) => sqlx::query_as(&sql).fetch_all(pool).await,
        }
        .unwrap_or_else(|error| panic!("{sql}: {error}"));
        rows.into_iter()
            .map(|(uuid, text)| match (uuid, text) {
                (Some(uuid), None) => uuid.to_string(),
                (None, Some(text)) => text,
                (None, None) => "-".to_owned(),
                both => panic!("an event with both request id columns: {both:?}"),
            })
            .collect()
    }

    /// `user`'s trail once it holds `count` events (observations are written a moment after
    /// the reply), waiting at most five seconds.
    pub async fn trail_of_length(&self, user: u64, count: usize) -> Vec<String> {
        for _ in 0..100 {
            let trail = self.trail(user).await;
            if trail.len() >= count {
                return trail;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.trail(user).await
    }

    /// The state of `user`'s key, if stored.
    pub async fn key_state(&self, user: u64, key: &str) -> Option<String> {
        match &self.db {
            TestDb::Postgres(pool) => key_state_in(pool, user, key).await,
            TestDb::Sqlite(pool) => sqlx::query_scalar(
                "SELECT state FROM idempotency_keys WHERE user_id = ?1 AND key = ?2",
            )
            .bind(user.to_string())
            .bind(storage_uuid(key))
            .fetch_optional(pool)
            .await
            .expect("read key state"),
        }
    }

    /// Moves the timestamps of `key` (every key if `None`) `by` into the past, as if its claim
    /// had been made that long ago: its lease, if any, runs out that much earlier too. The
    /// backend's replay cache cannot see that time pass, so it forgets its replies (as it would
    /// have, had the time truly passed).
    pub async fn age_keys(&self, key: Option<&str>, by: Duration) {
        self.state.replay_cache.forget_all();
        let key = key.map(storage_uuid);
        match &self.db {
            TestDb::Postgres(pool) => sqlx::query(
                "UPDATE idempotency_keys \
                 SET created_at = created_at - make_interval(secs => $1), \
                     claimed_at = claimed_at - make_interval(secs => $1), \
                     expires_at = expires_at - make_interval(secs => $1), \
                     lease_until = lease_until - make_interval(secs => $1) \
                 WHERE $2::uuid IS NULL OR key = $2",
            )
            .bind(by.as_secs_f64())
            .bind(key)
            .execute(pool)
            .await
            .map(drop),
            TestDb::Sqlite(pool) => sqlx::query(
                "UPDATE idempotency_keys \
                 SET created_at = created_at - ?1, claimed_at = claimed_at - ?1, \
                     expires_at = expires_at - ?1, lease_until = lease_until - ?1 \
                 WHERE ?2 IS NULL OR key = ?2",
            )
            .bind(i64::try_from(by.as_micros()).expect("small"))
            .bind(key)
            .execute(pool)
            .await
            .map(drop),
        }
        .expect("age the keys");
    }

    /// Runs reconciler steps, 100 ms apart (time the rail's schedule needs to pass), until
    /// `user`'s `key` is in `state`; panics after `patience`, saying what was awaited.
    pub async fn reconcile_until(&self, (user, key): (u64, &str), state: &str, patience: Duration) {
        let deadline = std::time::Instant::now() + patience;
        while self.key_state(user, key).await.as_deref() != Some(state) {
            assert!(
                std::time::Instant::now() < deadline,
                "user {user}'s key never became {state}"
            );
            backend::reconcile::try_reconcile_once(&self.state)
                .await
                .expect("a reconciler step");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Makes `key`'s next bank look-up due now, as if its wait (a back-off, or a released key's
    /// next check) had passed.
    pub async fn make_lookup_due(&self, key: &str) {
        let key = storage_uuid(key);
        match &self.db {
            TestDb::Postgres(pool) => sqlx::query(
                "UPDATE idempotency_keys SET next_lookup_at = now() - interval '1 second' \
                 WHERE key = $1",
            )
            .bind(key)
            .execute(pool)
            .await
            .map(drop),
            TestDb::Sqlite(pool) => sqlx::query(
                "UPDATE idempotency_keys \
                 SET next_lookup_at = CAST(unixepoch('subsec') * 1000000 AS INTEGER) - 1000000 \
                 WHERE key = ?1",
            )
            .bind(key)
            .execute(pool)
            .await
            .map(drop),
        }
        .expect("make the look-up due");
    }

    /// Claims `key` for a payment of `body` to bill `elec-1` through the store, as the backend
    /// does before it calls the bank, and leaves it `started`: what a crash right after the
    /// claim leaves behind. Returns the claim's bank reference.
    pub async fn claim_without_paying(&self, user: u64, key: &str, body: &Value) -> String {
        let claim = ClaimToken::mint();
        self.claim_without_paying_as(claim, (user, key), body).await
    }

    /// [`TestApp::claim_without_paying`] as the claim `claim`, for a test that then writes on
    /// the claim's behalf.
    pub async fn claim_without_paying_as(
        &self,
        claim: ClaimToken,
        (user, key): (u64, &str),
        body: &Value,
    ) -> String {
        let user = UserId::numbered(user);
        let key = IdempotencyKey::try_from(key.to_owned()).expect("test keys are valid");
        let fingerprint = payment_fingerprint(body);
        let payment_id = uuid::Uuid::new_v4();
        let payment = NewPayment {
            payment_id,
            bill_id: "elec-1".to_owned(),
            amount_paise: body["amount_paise"].as_i64().expect("amount"),
            payer_vpa: body["payer_vpa"].as_str().expect("vpa").to_owned(),
            bank_reference: shared::Operation::PayBill.bank_reference(payment_id),
            key_kept_for: self.state.policy.keep_keys_for,
        };
        let claimed = self
            .state
            .store
            .claim_payment(
                KeyRef::new(user, &key),
                &fingerprint,
                &payment,
                claim,
                &backend::domain::Cause::background(),
            )
            .await
            .expect("claim");
        assert!(matches!(claimed, ClaimResult::Claimed { .. }), "a new key");
        payment.bank_reference
    }

    /// Asserts that nothing was written anywhere: no key, no payment, no refund, no debit.
    pub async fn assert_nothing_written(&self, what: &str) {
        assert_eq!(self.count("idempotency_keys").await, 0, "{what}: key rows");
        assert_eq!(self.count("payments").await, 0, "{what}: payment rows");
        assert_eq!(self.count("refunds").await, 0, "{what}: refund rows");
        let ledger = self.ledger().await;
        assert!(
            ledger.debits.is_empty() && ledger.refunds.is_empty(),
            "{what}: bank ledger"
        );
    }

    /// A second backend process's worth of state on this app's database and bank: its own
    /// pool, replay cache, watchers and PostgreSQL listener; stopped when dropped.
    pub async fn spawn_replica(&self, options: &Options) -> Replica {
        let config = test_config(self.database_url.clone(), &self.bank.url, options);
        let replica = Application::build(config).await.expect("replica builds");
        let url = format!("http://{}", replica.local_addr());
        let admin_url = format!("http://{}", replica.admin_addr());
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            replica
                .run_until_stopped(async move {
                    stopped.await.ok();
                })
                .await
                .expect("replica serves");
        });
        Replica {
            url,
            admin_url,
            _stop: stop,
        }
    }

    /// The value of a metric line (`name{labels}`) in `/metrics`, 0 if absent.
    pub async fn metric(&self, series: &str) -> f64 {
        metric_at(&self.http, &self.admin_url, series).await
    }
}

/// A second backend on a [`TestApp`]'s database and bank ([`TestApp::spawn_replica`]).
pub struct Replica {
    /// Its API's `http://127.0.0.1:PORT`.
    pub url: String,
    /// Its admin listener's `http://127.0.0.1:PORT`.
    pub admin_url: String,
    _stop: oneshot::Sender<()>,
}

/// The value of a metric line (`name{labels}`) in the `/metrics` of the admin listener at
/// `admin_url`, 0 if absent.
pub async fn metric_at(http: &reqwest::Client, admin_url: &str, series: &str) -> f64 {
    metric_in(&metrics_text(http, admin_url).await, series)
}

/// The whole `/metrics` text of the admin listener at `admin_url`.
pub async fn metrics_text(http: &reqwest::Client, admin_url: &str) -> String {
    http.get(format!("{admin_url}/metrics"))
        .send()
        .await
        .expect("metrics reply")
        .text()
        .await
        .expect("metrics text")
}

/// `POST /v1/bills/{bill}/pay` to the backend at `base_url` as `user` with `key` (sent bare);
/// an error if no reply came (the backend was killed, say).
pub async fn send_pay(
    http: &reqwest::Client,
    base_url: &str,
    user: u64,
    key: Option<&str>,
    bill: &str,
    body: &Value,
) -> reqwest::Result<Received> {
    let request = http
        .post(format!("{base_url}/v1/bills/{bill}/pay"))
        .bearer_auth(TestApp::token(user))
        .json(body);
    let request = match key {
        Some(key) => request.header("Idempotency-Key", key),
        None => request,
    };
    Ok(Received::from(request.send().await?).await)
}

/// `POST /v1/payments/{payment}/refunds` to the backend at `base_url`; an error if no reply
/// came.
pub async fn send_refund(
    http: &reqwest::Client,
    base_url: &str,
    user: u64,
    key: &str,
    payment_id: &str,
    amount: u64,
) -> reqwest::Result<Received> {
    let response = http
        .post(format!("{base_url}/v1/payments/{payment_id}/refunds"))
        .bearer_auth(TestApp::token(user))
        .header("Idempotency-Key", key)
        .json(&json!({ "amount_paise": amount }))
        .send()
        .await?;
    Ok(Received::from(response).await)
}

/// How a test key is stored.
pub fn storage_uuid(key: &str) -> uuid::Uuid {
    IdempotencyKey::try_from(key.to_owned())
        .expect("test keys are valid")
        .storage_uuid()
}

/// The state of `user`'s key in the PostgreSQL database behind `pool`, if stored.
pub async fn key_state_in(pool: &sqlx::PgPool, user: u64, key: &str) -> Option<String> {
    sqlx::query_scalar("SELECT state::text FROM idempotency_keys WHERE user_id = $1 AND key = $2")
        .bind(user.to_string())
        .bind(storage_uuid(key))
        .fetch_optional(pool)
        .await
        .expect("read key state")
}

/// The fingerprint of paying bill `elec-1` with `body`, as the backend computes it.
pub fn payment_fingerprint(body: &Value) -> shared::Fingerprint {
    shared::fingerprint::fingerprint(
        shared::Operation::PayBill,
        "elec-1",
        body.to_string().as_bytes(),
        Default::default(),
    )
    .expect("a valid body")
    .fingerprint
}

/// A fresh v4 key as text.
pub fn new_key() -> String {
    IdempotencyKey::mint().to_string()
}

/// A valid payment body.
pub fn payment_body(amount: u64) -> Value {
    json!({ "amount_paise": amount, "payer_vpa": "asha@okbank" })
}
