//! The end-to-end stack: the built Worker under `workerd` (Durable Objects in memory) in front
//! of a real `backend` process on a fresh PostgreSQL database, and a real `bank-simulator`
//! process, each on a port of 127.0.0.1 it bound itself and reported (the `test-harness`
//! crate's `ServerProcess`; `workerd` reports its port through its control messages).
//!
//! Every process runs in its own process group and is killed (the whole group) when the stack is
//! dropped, and the database is dropped with it, however the test ends; every wait is bounded.
//! Nothing is skipped: a missing Worker build, `workerd` or server binary fails the test with
//! the command that makes it.
//!
//! Used by the end-to-end tests (`tests/*.rs`) and `examples/edge_latency.rs`.
#![allow(dead_code)] // Each of the two users uses its own part of the harness.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use edge::rate_limit::Limit;
use serde_json::Value;
use shared::UserId;
use shared::auth::sign_token;
use test_harness::workerd::{REQUESTS_DATASET, WorkerSettings, dataset_points, start_workerd};
use test_harness::{
    BankGateway, ServerProcess, TestDatabase, listening_url, listening_urls, server_binary,
};

pub use test_harness::Received;

/// The JWT secret the edge and the backend of a stack share.
pub const SECRET: &str = "edge-end-to-end-secret-of-at-least-32-bytes";

/// The backend's route template of `pay_bill`, as its metrics name it.
pub const PAY_ROUTE: &str = "/v1/bills/{bill_id}/pay";

/// The backend's route template of `refund_payment`.
pub const REFUND_ROUTE: &str = "/v1/payments/{payment_id}/refunds";

/// The repository root.
fn repo_root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// Whether a stack's edge keeps finished replies (`EDGE_KEEPS_REPLIES`) unless its test says:
/// `EDGE_TESTS_KEEP_REPLIES=false` runs a suite against the residency mode (tests/run-all.sh
/// runs every edge suite both ways).
pub fn edge_keeps_replies() -> bool {
    std::env::var("EDGE_TESTS_KEEP_REPLIES").map_or(true, |value| value != "false")
}

/// How many of `replays` repeats of finished keys reach the backend: none where the edge keeps
/// replies, every one where it keeps none.
pub fn replays_forwarded(replays: u64) -> u64 {
    if edge_keeps_replies() { 0 } else { replays }
}

/// What differs between stacks.
#[derive(Debug, Clone)]
pub struct StackOptions {
    /// The bank's fixed latency, so an attempt stays in flight that long.
    pub bank_latency_ms: u64,
    /// The edge's bound on one forward (`BACKEND_TIMEOUT_MS`).
    pub edge_backend_timeout_ms: u64,
    /// The edge's per-user rate limit (`RATE_LIMIT_USER_*`).
    pub user_limit: Limit,
    /// The edge's per-address rate limit (`RATE_LIMIT_ADDRESS_*`); every request of a test
    /// without `CF-Connecting-IP` shares one bucket.
    pub address_limit: Limit,
    /// The identity provider's JWKS URL, for edge and backend alike; `None`: HS256 tokens of
    /// [`SECRET`].
    pub jwks_url: Option<String>,
    /// Settings both edge and backend get (`AUTH_JWT_ISSUER`, `AUTH_USER_CLAIM`, `CORS_ALLOWED_ORIGINS`…).
    pub shared_settings: Vec<(&'static str, String)>,
    /// Whether the backend replies only to requests with the edge's proof (and the edge signs).
    pub edge_proof: bool,
    /// An OTLP/HTTP receiver's base URL both edge and backend export their spans to
    /// (`OTEL_EXPORTER_OTLP_ENDPOINT`); `None`: no traces.
    pub otlp_endpoint: Option<String>,
    /// Whether the Durable Objects keep their storage in files a test can read
    /// ([`Stack::durable_object_storage`]) rather than in memory.
    pub durable_objects_on_disk: bool,
    /// Whether the edge reaches the backend through a gateway the test can make misbehave
    /// ([`Stack::backend_gateway`]), as a load balancer or proxy between them would.
    pub gateway_in_front_of_backend: bool,
}

/// The edge proof's secret of a stack that requires it.
pub const PROOF_SECRET: &str = "edge-end-to-end-proof-secret-0123456789";

/// How often the stacks' edge and backend may fetch a key set.
pub const JWKS_REFETCH_SECONDS: u64 = 1;

/// A limit no test reaches unless it means to: the tests that are not about rate limits send
/// bursts (twenty attempts at once) from one user and one address.
pub const UNREACHED_LIMIT: Limit = Limit {
    per_minute: 1_000_000,
    burst: 10_000,
};

impl Default for StackOptions {
    fn default() -> Self {
        StackOptions {
            bank_latency_ms: 0,
            edge_backend_timeout_ms: 15_000,
            user_limit: UNREACHED_LIMIT,
            address_limit: UNREACHED_LIMIT,
            jwks_url: None,
            shared_settings: Vec::new(),
            edge_proof: false,
            otlp_endpoint: None,
            durable_objects_on_disk: false,
            gateway_in_front_of_backend: false,
        }
    }
}

/// Where a request is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// Through the Worker.
    Edge,
    /// To the backend directly.
    Backend,
}

/// A running stack.
pub struct Stack {
    /// `http://127.0.0.1:PORT` of the Worker.
    pub edge_url: String,
    /// `http://127.0.0.1:PORT` of the backend.
    pub backend_url: String,
    /// `http://127.0.0.1:PORT` of the backend's admin listener (its metrics).
    pub backend_admin_url: String,
    /// `http://127.0.0.1:PORT` of the bank simulator.
    pub bank_url: String,
    /// A client with a bounded timeout.
    pub http: reqwest::Client,
    /// The gateway between the edge and the backend, with
    /// [`StackOptions::gateway_in_front_of_backend`].
    pub backend_gateway: Option<BankGateway>,
    workerd: ServerProcess,
    backend: ServerProcess,
    bank: ServerProcess,
    scratch: PathBuf,
    _database: TestDatabase,
}

/// A request to send, to the edge or the backend.
#[derive(Debug, Clone)]
pub struct Call {
    /// `GET` or `POST`.
    pub method: reqwest::Method,
    /// Path and query.
    pub path: String,
    /// Headers.
    pub headers: Vec<(String, String)>,
    /// Body.
    pub body: Vec<u8>,
}

impl Stack {
    /// Starts bank, backend (fresh database) and the Worker, each reporting where it listens.
    pub async fn start(options: StackOptions) -> Stack {
        let scratch = std::env::temp_dir().join(format!("edge-e2e-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&scratch).expect("create the scratch directory");
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .expect("HTTP client");

        let mut bank_command = Command::new(server_binary("bank-simulator"));
        bank_command
            .args(["--listen", "127.0.0.1:0", "--latency-ms"])
            .arg(options.bank_latency_ms.to_string());
        let (bank, bank_url) = ServerProcess::start("bank-simulator", bank_command, |line| {
            listening_url(line, "bank simulator")
        })
        .await;

        // Settings edge and backend share: where tokens get their keys, their rules, the proof.
        let mut shared_settings: Vec<(&'static str, String)> = options.shared_settings.clone();
        match &options.jwks_url {
            Some(url) => {
                shared_settings.push(("AUTH_JWKS_URL", url.clone()));
                shared_settings.push((
                    "AUTH_JWKS_REFETCH_SECONDS",
                    JWKS_REFETCH_SECONDS.to_string(),
                ));
            }
            None => shared_settings.push(("AUTH_JWT_SECRET", SECRET.to_owned())),
        }
        if !shared_settings
            .iter()
            .any(|(name, _)| *name == "EDGE_KEEPS_REPLIES")
        {
            shared_settings.push(("EDGE_KEEPS_REPLIES", edge_keeps_replies().to_string()));
        }
        if options.edge_proof {
            shared_settings.push(("EDGE_PROOF_SECRET", PROOF_SECRET.to_owned()));
        }
        if let Some(endpoint) = &options.otlp_endpoint {
            shared_settings.push(("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.clone()));
            // The backend's batch leaves within 50 ms, not the default 5 s.
            shared_settings.push(("OTEL_BSP_SCHEDULE_DELAY", "50".to_owned()));
        }
        let database = TestDatabase::create().await;
        let mut backend_command = Command::new(server_binary("backend"));
        backend_command
            .env("DATABASE_URL", database.url())
            .env("BANK_URL", &bank_url)
            .env("LISTEN_ADDR", "127.0.0.1:0")
            .env("ADMIN_ADDR", "127.0.0.1:0")
            .env("APP_ENV", "production")
            // The provider's keys are served over http on 127.0.0.1: loopback is allowed.
            .env("DATABASE_REPLICATION", "none")
            .env("REQUIRE_EDGE_PROOF", options.edge_proof.to_string())
            .env("POLICY_FILE", repo_root().join("policy.yaml"))
            .env("RUST_LOG", "warn")
            .envs(shared_settings.iter().map(|(name, value)| (*name, value)));
        let ready = listening_urls(["backend admin", "backend"]);
        let (backend, [backend_admin_url, backend_url]) =
            ServerProcess::start("backend", backend_command, ready).await;

        let backend_gateway = match options.gateway_in_front_of_backend {
            true => Some(BankGateway::start(&backend_url).await),
            false => None,
        };
        let settings = WorkerSettings {
            backend_url: backend_gateway
                .as_ref()
                .map_or_else(|| backend_url.clone(), BankGateway::url),
            backend_timeout_ms: options.edge_backend_timeout_ms,
            jwt_secret: None,
            user_limit: (options.user_limit.per_minute, options.user_limit.burst),
            address_limit: (
                options.address_limit.per_minute,
                options.address_limit.burst,
            ),
            bindings: (
                edge::runtime::COORDINATOR_BINDING,
                edge::runtime::RATE_LIMITER_BINDING,
                edge::trace::REQUESTS_DATASET_BINDING,
            ),
            extra: shared_settings,
            durable_objects_on_disk: options.durable_objects_on_disk.then(|| {
                let directory = scratch.join("durable-objects");
                std::fs::create_dir_all(&directory).expect("create the objects' directory");
                directory
            }),
        };
        let (workerd, edge_port) = start_workerd(&repo_root(), &scratch, &settings).await;

        Stack {
            edge_url: format!("http://127.0.0.1:{edge_port}"),
            backend_url,
            backend_admin_url,
            bank_url,
            http,
            backend_gateway,
            workerd,
            backend,
            bank,
            scratch,
            _database: database,
        }
    }

    /// Every byte the Durable Objects have stored, each file of their storage directory (SQLite
    /// databases and their journals) in turn; empty when they keep it in memory.
    pub fn durable_object_storage(&self) -> Vec<u8> {
        let directory = self.scratch.join("durable-objects");
        let mut bytes = Vec::new();
        let mut pending = vec![directory];
        while let Some(directory) = pending.pop() {
            let Ok(entries) = std::fs::read_dir(&directory) else {
                continue;
            };
            for path in entries.map(|entry| entry.expect("a directory entry").path()) {
                if path.is_dir() {
                    pending.push(path);
                } else {
                    bytes.extend(std::fs::read(&path).expect("read a storage file"));
                }
            }
        }
        bytes
    }

    /// Kills every process and drops the database.
    pub async fn stop(self) {
        drop(self);
    }

    /// Every data point the Worker has written to its requests' dataset, in order.
    pub fn request_points(&self) -> Vec<Value> {
        dataset_points(&self.workerd.log(), REQUESTS_DATASET)
    }

    /// Runs `sql` on the backend's database (after its migrations): a test's trigger, say.
    pub async fn execute_sql(&self, sql: &str) {
        let pool = sqlx::PgPool::connect(self._database.url())
            .await
            .expect("connect to the stack's database");
        sqlx::raw_sql(sql)
            .execute(&pool)
            .await
            .unwrap_or_else(|error| panic!("{sql}: {error}"));
        pool.close().await;
    }

    /// Kills the backend, leaving the edge in front of nothing.
    pub fn kill_backend(&mut self) {
        self.backend.kill_hard();
    }

    /// A valid bearer token for `user`, for an hour.
    pub fn token(user: u64) -> String {
        let exp = time_now_unix() + 3600;
        sign_token(UserId::numbered(user), exp, SECRET.as_bytes())
    }

    /// A valid bearer token for the user an identity provider calls `subject`, for an hour.
    pub fn token_for_subject(subject: &str) -> String {
        let user = UserId::from_subject(subject).expect("a usable subject");
        sign_token(user, time_now_unix() + 3600, SECRET.as_bytes())
    }

    /// A token signed with [`SECRET`] carrying exactly `claims`: one a test wants refused.
    pub fn token_with_claims(claims: &Value) -> String {
        shared::auth::sign_claims(claims, SECRET.as_bytes())
    }

    /// Sends a call to the edge or the backend.
    pub async fn send(&self, via: Via, call: &Call) -> Received {
        let base = match via {
            Via::Edge => &self.edge_url,
            Via::Backend => &self.backend_url,
        };
        let response = call
            .request(&self.http, base)
            .send()
            .await
            .unwrap_or_else(|error| {
                panic!(
                    "{via:?} did not reply {} {}: {error}",
                    call.method, call.path
                )
            });
        Received::from(response).await
    }

    /// How many requests to `route` reached the backend (its `/metrics`, all statuses).
    pub async fn backend_requests(&self, route: &str) -> u64 {
        let metrics = self
            .http
            .get(format!("{}/metrics", self.backend_admin_url))
            .send()
            .await
            .expect("backend metrics reply")
            .text()
            .await
            .expect("metrics text");
        let label = format!("route=\"{route}\"");
        metrics
            .lines()
            .filter(|line| {
                line.starts_with("payments_http_requests_total{") && line.contains(&label)
            })
            .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
            .map(|count| count as u64)
            .sum()
    }

    /// The bank's debits (one entry per money movement), read from its ledger.
    pub async fn debits(&self) -> Vec<Value> {
        let ledger: Value = self
            .http
            .get(format!("{}/ledger", self.bank_url))
            .send()
            .await
            .expect("bank replies")
            .json()
            .await
            .expect("ledger is JSON");
        ledger["debits"].as_array().cloned().unwrap_or_default()
    }

    /// Replaces the bank's knobs (`PUT /knobs`).
    pub async fn set_bank_knobs(&self, knobs: Value) {
        let response = self
            .http
            .put(format!("{}/knobs", self.bank_url))
            .json(&knobs)
            .send()
            .await
            .expect("bank replies");
        assert!(response.status().is_success(), "knobs refused: {knobs}");
    }
}

impl Drop for Stack {
    /// The processes are killed as they drop; the scratch directory goes with them.
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.scratch);
    }
}

impl Call {
    /// `POST /v1/bills/{bill}/pay` as `user` with `key` and a JSON `body`.
    pub fn pay(user: u64, key: &str, bill: &str, body: &str) -> Call {
        Call {
            method: reqwest::Method::POST,
            path: format!("/v1/bills/{bill}/pay"),
            headers: vec![
                (
                    "authorization".to_owned(),
                    format!("Bearer {}", Stack::token(user)),
                ),
                ("idempotency-key".to_owned(), key.to_owned()),
                ("content-type".to_owned(), "application/json".to_owned()),
            ],
            body: body.as_bytes().to_vec(),
        }
    }

    /// `POST /v1/payments/{payment}/refunds` as `user` with `key` and a JSON `body`.
    pub fn refund(user: u64, key: &str, payment: &str, body: &str) -> Call {
        Call {
            path: format!("/v1/payments/{payment}/refunds"),
            ..Call::pay(user, key, "unused", body)
        }
    }

    /// `GET path`, as `user` when given.
    pub fn get(path: &str, user: Option<u64>) -> Call {
        Call {
            method: reqwest::Method::GET,
            path: path.to_owned(),
            headers: user
                .map(|user| {
                    (
                        "authorization".to_owned(),
                        format!("Bearer {}", Stack::token(user)),
                    )
                })
                .into_iter()
                .collect(),
            body: Vec::new(),
        }
    }

    /// The call as a request to `base` (an origin) on `http`, for a test that sends it itself.
    pub fn request(&self, http: &reqwest::Client, base: &str) -> reqwest::RequestBuilder {
        let mut request = http
            .request(self.method.clone(), format!("{base}{}", self.path))
            .body(self.body.clone());
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        request
    }

    /// The same call with a header set (replaced if present).
    pub fn with_header(mut self, name: &str, value: &str) -> Call {
        self = self.without_header(name);
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// The same call without a header.
    pub fn without_header(mut self, name: &str) -> Call {
        self.headers
            .retain(|(header, _)| !header.eq_ignore_ascii_case(name));
        self
    }

    /// The same call with another body.
    pub fn with_body(mut self, body: impl Into<Vec<u8>>) -> Call {
        self.body = body.into();
        self
    }
}

fn time_now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| {
            i64::try_from(elapsed.as_secs()).unwrap_or(i64::MAX)
        })
}
