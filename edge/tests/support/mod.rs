//! The end-to-end stack: the built Worker under `workerd` (Durable Objects in memory) in front
//! of a real `backend` process on a fresh PostgreSQL database, and a real `bank-simulator`
//! process, all on free ports of 127.0.0.1.
//!
//! Every process runs in its own process group and is killed (the whole group) when the stack is
//! dropped, however the test ends; every wait is bounded. Nothing is skipped: a missing Worker
//! build, `workerd` or server binary fails the test with the command that makes it.
//!
//! Used by `tests/end_to_end.rs` and `examples/edge_latency.rs`.
#![allow(dead_code)] // Each of the two users uses its own part of the harness.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use edge::rate_limit::Limit;
use serde_json::Value;
use shared::UserId;
use shared::auth::sign_token;
use sqlx::{Connection, PgConnection};

/// The JWT secret the edge and the backend of a stack share.
pub const SECRET: &str = "edge-end-to-end-secret-of-at-least-32-bytes";

/// The backend's route template of `pay_bill`, as its metrics name it.
pub const PAY_ROUTE: &str = "/v1/bills/{bill_id}/pay";

/// The backend's route template of `refund_payment`.
pub const REFUND_ROUTE: &str = "/v1/payments/{payment_id}/refunds";

/// How long a process may take to answer after it is spawned (the backend migrates first).
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// The repository root.
fn repo_root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
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
}

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
    /// `http://127.0.0.1:PORT` of the bank simulator.
    pub bank_url: String,
    /// A client with a bounded timeout.
    pub http: reqwest::Client,
    database: String,
    workerd: Process,
    backend: Process,
    bank: Process,
    scratch: PathBuf,
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

/// A response, read whole.
#[derive(Debug, Clone)]
pub struct Answer {
    /// Status code.
    pub status: u16,
    /// Headers.
    pub headers: reqwest::header::HeaderMap,
    /// Body.
    pub body: Vec<u8>,
}

impl Stack {
    /// Starts bank, backend (fresh database) and the Worker, and waits until each answers.
    pub async fn start(options: StackOptions) -> Stack {
        let worker = worker_build();
        let scratch = std::env::temp_dir().join(format!("edge-e2e-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&scratch).expect("create the scratch directory");
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .expect("HTTP client");

        let bank_addr = free_address();
        let bank = Process::spawn(
            "bank-simulator",
            Command::new(server_binary("bank-simulator"))
                .arg("--listen")
                .arg(&bank_addr)
                .arg("--latency-ms")
                .arg(options.bank_latency_ms.to_string()),
            &scratch,
        );
        let bank_url = format!("http://{bank_addr}");
        wait_until_answers(&http, &format!("{bank_url}/ledger"), &bank).await;

        let (database, database_url) = fresh_database().await;
        let backend_addr = free_address();
        let backend = Process::spawn(
            "backend",
            Command::new(server_binary("backend"))
                .env("DATABASE_URL", &database_url)
                .env("BANK_URL", &bank_url)
                .env("LISTEN_ADDR", &backend_addr)
                .env("AUTH_JWT_SECRET", SECRET)
                .env("APP_ENV", "production")
                .env("POLICY_FILE", repo_root().join("policy.yaml"))
                .env("RUST_LOG", "warn"),
            &scratch,
        );
        let backend_url = format!("http://{backend_addr}");
        wait_until_answers(&http, &format!("{backend_url}/healthz"), &backend).await;

        let edge_addr = free_address();
        let config = workerd_config(&edge_addr, &backend_url, &options);
        std::fs::write(scratch.join("edge.capnp"), config).expect("write the workerd config");
        for file in ["index.js", "index_bg.wasm"] {
            std::fs::copy(worker.join(file), scratch.join(file)).expect("copy the Worker build");
        }
        let workerd = Process::spawn(
            "workerd",
            Command::new(workerd_binary())
                .arg("serve")
                .arg(scratch.join("edge.capnp")),
            &scratch,
        );
        let edge_url = format!("http://{edge_addr}");
        wait_until_answers(&http, &format!("{edge_url}/healthz"), &workerd).await;

        Stack {
            edge_url,
            backend_url,
            bank_url,
            http,
            database,
            workerd,
            backend,
            bank,
            scratch,
        }
    }

    /// Kills every process and drops the database.
    pub async fn stop(mut self) {
        self.workerd.kill();
        self.backend.kill();
        self.bank.kill();
        drop_database(&self.database).await;
    }

    /// Kills the backend, leaving the edge in front of nothing.
    pub fn kill_backend(&mut self) {
        self.backend.kill();
    }

    /// A valid bearer token for `user`, for an hour.
    pub fn token(user: u64) -> String {
        let exp = time_now_unix() + 3600;
        sign_token(
            UserId::new(user).expect("positive user id"),
            exp,
            SECRET.as_bytes(),
        )
    }

    /// Sends a call to the edge or the backend.
    pub async fn send(&self, via: Via, call: &Call) -> Answer {
        let base = match via {
            Via::Edge => &self.edge_url,
            Via::Backend => &self.backend_url,
        };
        let mut request = self
            .http
            .request(call.method.clone(), format!("{base}{}", call.path))
            .body(call.body.clone());
        for (name, value) in &call.headers {
            request = request.header(name, value);
        }
        let response = request.send().await.unwrap_or_else(|error| {
            panic!(
                "{via:?} did not answer {} {}: {error}",
                call.method, call.path
            )
        });
        Answer {
            status: response.status().as_u16(),
            headers: response.headers().clone(),
            body: response.bytes().await.expect("read the body").to_vec(),
        }
    }

    /// How many requests to `route` reached the backend (its `/metrics`, all statuses).
    pub async fn backend_requests(&self, route: &str) -> u64 {
        let metrics = self
            .http
            .get(format!("{}/metrics", self.backend_url))
            .send()
            .await
            .expect("backend metrics answer")
            .text()
            .await
            .expect("metrics text");
        let label = format!("route=\"{route}\"");
        metrics
            .lines()
            .filter(|line| line.starts_with("http_requests_total{") && line.contains(&label))
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
            .expect("bank answers")
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
            .expect("bank answers");
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

impl Answer {
    /// A header as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }

    /// Whether the answer says it is a replay.
    pub fn is_replay(&self) -> bool {
        self.header("idempotent-replayed") == Some("true")
    }

    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|error| {
            panic!(
                "not JSON ({error}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    /// The problem `type` of a problem+json body.
    pub fn problem_type(&self) -> String {
        self.json()["type"].as_str().unwrap_or_default().to_owned()
    }
}

/// A process of the stack, in its own process group, logging to a file in the scratch directory;
/// killed when dropped, so a stack that fails half-way through starting leaves nothing behind.
struct Process {
    name: &'static str,
    child: Child,
    log: PathBuf,
    killed: bool,
}

impl Process {
    fn spawn(name: &'static str, command: &mut Command, scratch: &Path) -> Process {
        let log = scratch.join(format!("{name}.log"));
        let file = File::create(&log).expect("create a log file");
        let child = command
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("clone the log file"))
            .stderr(file)
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {name}: {error}"));
        Process {
            name,
            child,
            log,
            killed: false,
        }
    }

    /// Kills the process group and reaps the process.
    fn kill(&mut self) {
        if self.killed {
            return;
        }
        self.killed = true;
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill")
            .args(["-KILL", "--", &group])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The end of the log, for failure messages.
    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let start = log.len().saturating_sub(4000);
        log.get(start..).unwrap_or(&log).to_owned()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Polls `url` until it answers 2xx; panics with the process's log if it exits or the time is up.
async fn wait_until_answers(http: &reqwest::Client, url: &str, process: &Process) {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if let Ok(response) = http.get(url).send().await
            && response.status().is_success()
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} did not answer {url} within {READY_TIMEOUT:?}; its log:\n{}",
            process.name,
            process.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The built Worker's directory; fails loudly if the build is missing.
fn worker_build() -> PathBuf {
    let build = repo_root().join("edge/build");
    for file in ["index.js", "index_bg.wasm"] {
        assert!(
            build.join(file).is_file(),
            "the Worker build is missing ({}); build it with tests/build-edge.sh",
            build.join(file).display()
        );
    }
    build
}

/// The `workerd` binary of the npm package wrangler installs.
fn workerd_binary() -> PathBuf {
    let binary = repo_root().join("node_modules/@cloudflare/workerd-linux-64/bin/workerd");
    assert!(
        binary.is_file(),
        "workerd is missing ({}); install it with tests/setup-tools.sh (npm ci)",
        binary.display()
    );
    binary
}

/// A binary of the backend crate, built in this test's profile (`target/<profile>/`).
fn server_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("tests and examples run from target/<profile>/<dir>/");
    let binary = profile_dir.join(name);
    assert!(
        binary.is_file(),
        "{} is missing; build it with `cargo build -p backend --bins` (same profile)",
        binary.display()
    );
    binary
}

/// The workerd configuration: the Worker on `edge_addr`, its settings as bindings, the key
/// coordinators and rate limiters in memory, and outbound fetch limited to this machine.
fn workerd_config(edge_addr: &str, backend_url: &str, options: &StackOptions) -> String {
    format!(
        r#"using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "edge", worker = .edge),
    (name = "loopback", network = (allow = ["local"])),
  ],
  sockets = [(name = "http", address = "{edge_addr}", http = (), service = "edge")],
);

const edge :Workerd.Worker = (
  compatibilityDate = "2026-11-01",
  modules = [
    (name = "index.js", esModule = embed "index.js"),
    (name = "index_bg.wasm", wasm = embed "index_bg.wasm"),
  ],
  bindings = [
    (name = "BACKEND_URL", text = "{backend_url}"),
    (name = "BACKEND_TIMEOUT_MS", text = "{timeout}"),
    (name = "APP_ENV", text = "production"),
    (name = "AUTH_JWT_SECRET", text = "{SECRET}"),
    (name = "RATE_LIMIT_USER_PER_MINUTE", text = "{user_per_minute}"),
    (name = "RATE_LIMIT_USER_BURST", text = "{user_burst}"),
    (name = "RATE_LIMIT_ADDRESS_PER_MINUTE", text = "{address_per_minute}"),
    (name = "RATE_LIMIT_ADDRESS_BURST", text = "{address_burst}"),
    (name = "{binding}", durableObjectNamespace = "KeyCoordinator"),
    (name = "{limiter_binding}", durableObjectNamespace = "RateLimiter"),
  ],
  durableObjectNamespaces = [
    (className = "KeyCoordinator", uniqueKey = "safe-retries-edge-KeyCoordinator", enableSql = true),
    (className = "RateLimiter", uniqueKey = "safe-retries-edge-RateLimiter", enableSql = true),
  ],
  durableObjectStorage = (inMemory = void),
  globalOutbound = "loopback",
);
"#,
        timeout = options.edge_backend_timeout_ms,
        user_per_minute = options.user_limit.per_minute,
        user_burst = options.user_limit.burst,
        address_per_minute = options.address_limit.per_minute,
        address_burst = options.address_limit.burst,
        binding = edge::runtime::COORDINATOR_BINDING,
        limiter_binding = edge::runtime::RATE_LIMITER_BINDING,
    )
}

/// A free port on 127.0.0.1, as `127.0.0.1:PORT`.
fn free_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    let address = listener.local_addr().expect("bound address");
    address.to_string()
}

/// The maintenance database URL (`TEST_DATABASE_URL`, as the backend's tests use).
fn admin_url() -> String {
    std::env::var("TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

/// Creates an empty database `test_edge_<uuid>` and returns its name and URL.
async fn fresh_database() -> (String, String) {
    let admin = admin_url();
    let mut connection = PgConnection::connect(&admin)
        .await
        .expect("PostgreSQL must run on 127.0.0.1:5432 (tests/start-postgres.sh starts it)");
    let name = format!("test_edge_{}", uuid::Uuid::new_v4().simple());
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut connection)
        .await
        .expect("create the test database");
    let (base, _) = admin.rsplit_once('/').expect("the URL names a database");
    (name.clone(), format!("{base}/{name}"))
}

/// Drops a test database (its backend is gone); a leftover is cleaned by `tests/run-all.sh`.
async fn drop_database(name: &str) {
    if let Ok(mut connection) = PgConnection::connect(&admin_url()).await {
        let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .execute(&mut connection)
            .await;
    }
}

fn time_now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| {
            i64::try_from(elapsed.as_secs()).unwrap_or(i64::MAX)
        })
}
