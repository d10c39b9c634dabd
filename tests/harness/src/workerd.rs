//! The built edge Worker (`scripts/build-edge.sh`) under `workerd`, the runtime `wrangler dev`
//! runs: its settings as bindings, its Durable Objects in memory (or in SQLite files in a
//! directory, for a test that reads what they store), outbound fetch limited to this
//! machine, on port 0 of 127.0.0.1 (workerd reports the port it bound through its control
//! messages). Used by the edge's end-to-end tests and the soak. The Worker's Analytics Engine
//! dataset is a stand-in that prints each point it is given (`analytics_engine_sink.js`), read
//! back with [`dataset_points`].
//!
//! Nothing is skipped: a missing Worker build or `workerd` fails with the command that makes it.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::ServerProcess;

/// What differs between Workers: the `[vars]` and secret of `wrangler.toml`, by name.
#[derive(Debug, Clone)]
pub struct WorkerSettings {
    /// `BACKEND_URL`.
    pub backend_url: String,
    /// `BACKEND_TIMEOUT_MS`.
    pub backend_timeout_ms: u64,
    /// `AUTH_JWT_SECRET`; `None` where tokens come from an identity provider (`extra`'s
    /// `AUTH_JWKS_URL`).
    pub jwt_secret: Option<String>,
    /// `RATE_LIMIT_USER_PER_MINUTE` and `RATE_LIMIT_USER_BURST`.
    pub user_limit: (u32, u32),
    /// `RATE_LIMIT_ADDRESS_PER_MINUTE` and `RATE_LIMIT_ADDRESS_BURST`.
    pub address_limit: (u32, u32),
    /// The binding names of the key coordinator and rate limiter namespaces and of the requests'
    /// dataset (the edge crate's `COORDINATOR_BINDING`, `RATE_LIMITER_BINDING` and
    /// `REQUESTS_DATASET_BINDING`).
    pub bindings: (&'static str, &'static str, &'static str),
    /// Further text bindings: `AUTH_JWKS_URL`, `EDGE_PROOF_SECRET`, the token rules…
    pub extra: Vec<(&'static str, String)>,
    /// A directory (which must exist) for the Durable Objects' storage, each object's SQLite
    /// file; `None`: in memory.
    pub durable_objects_on_disk: Option<PathBuf>,
}

/// Starts the Worker built under `repo_root` in `workerd`, with its files copied to `scratch`
/// (a directory of the caller's); returns the process and the port it listens on.
pub async fn start_workerd(
    repo_root: &Path,
    scratch: &Path,
    settings: &WorkerSettings,
) -> (ServerProcess, u16) {
    let build = repo_root.join("edge/build");
    for file in ["index.js", "index_bg.wasm"] {
        let built = build.join(file);
        assert!(
            built.is_file(),
            "the Worker build is missing ({}); build it with scripts/build-edge.sh",
            built.display()
        );
        std::fs::copy(&built, scratch.join(file)).expect("copy the Worker build");
    }
    std::fs::write(scratch.join("edge.capnp"), config(settings)).expect("write the config");
    std::fs::write(scratch.join(DATASET_SINK_FILE), DATASET_SINK).expect("write the dataset");
    let binary = repo_root.join("node_modules/@cloudflare/workerd-linux-64/bin/workerd");
    assert!(
        binary.is_file(),
        "workerd is missing ({}); install it with scripts/setup-tools.sh (npm ci)",
        binary.display()
    );
    let mut command = Command::new(binary);
    // `--control-fd 1`: workerd reports the port its socket bound on standard output.
    command
        .arg("serve")
        .arg(scratch.join("edge.capnp"))
        .args(["--control-fd", "1"]);
    ServerProcess::start("workerd", command, listen_port).await
}

/// The dataset's stand-in module, written beside the config.
const DATASET_SINK: &str = include_str!("analytics_engine_sink.js");
const DATASET_SINK_FILE: &str = "analytics-engine-sink.js";

/// The name `wrangler.toml` gives the requests' dataset, as the stand-in prints it: the edge's
/// `trace::REQUESTS_DATASET` (`edge/tests/request_points.rs` checks they agree).
pub const REQUESTS_DATASET: &str = "payments_edge_requests";

/// Every data point the Worker wrote to `dataset`, in order, from workerd's output `log`.
pub fn dataset_points(log: &str, dataset: &str) -> Vec<Value> {
    log.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["analytics_engine_dataset"] == dataset)
        .map(|mut line| line["point"].take())
        .collect()
}

/// The port in workerd's control message `{"event":"listen","socket":"http","port":N}`.
fn listen_port(line: &str) -> Option<u16> {
    let message: Value = serde_json::from_str(line).ok()?;
    (message["event"] == "listen" && message["socket"] == "http")
        .then(|| message["port"].as_u64()?.try_into().ok())?
}

fn config(settings: &WorkerSettings) -> String {
    let WorkerSettings {
        backend_url,
        backend_timeout_ms,
        jwt_secret,
        user_limit: (user_per_minute, user_burst),
        address_limit: (address_per_minute, address_burst),
        bindings: (coordinator, limiter, requests_dataset),
        extra,
        durable_objects_on_disk,
    } = settings;
    let (storage, storage_service) = match durable_objects_on_disk {
        None => ("inMemory = void".to_owned(), String::new()),
        Some(directory) => (
            "localDisk = \"objects\"".to_owned(),
            format!(
                "    (name = \"objects\", disk = (path = \"{}\", writable = true)),\n",
                directory.display()
            ),
        ),
    };
    let text_bindings: String = jwt_secret
        .iter()
        .map(|secret| ("AUTH_JWT_SECRET", secret.as_str()))
        .chain(extra.iter().map(|(name, value)| (*name, value.as_str())))
        .map(|(name, value)| format!("    (name = \"{name}\", text = \"{value}\"),\n"))
        .collect();
    format!(
        r#"using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "edge", worker = .edge),
    (name = "loopback", network = (allow = ["local"])),
{storage_service}  ],
  extensions = [(modules = [
    (name = "test-dataset:sink", esModule = embed "{DATASET_SINK_FILE}", internal = true),
  ])],
  sockets = [(name = "http", address = "127.0.0.1:0", http = (), service = "edge")],
);

const edge :Workerd.Worker = (
  compatibilityDate = "2026-11-01",
  modules = [
    (name = "index.js", esModule = embed "index.js"),
    (name = "index_bg.wasm", wasm = embed "index_bg.wasm"),
  ],
  bindings = [
    (name = "BACKEND_URL", text = "{backend_url}"),
    (name = "BACKEND_TIMEOUT_MS", text = "{backend_timeout_ms}"),
    (name = "APP_ENV", text = "production"),
{text_bindings}    (name = "RATE_LIMIT_USER_PER_MINUTE", text = "{user_per_minute}"),
    (name = "RATE_LIMIT_USER_BURST", text = "{user_burst}"),
    (name = "RATE_LIMIT_ADDRESS_PER_MINUTE", text = "{address_per_minute}"),
    (name = "RATE_LIMIT_ADDRESS_BURST", text = "{address_burst}"),
    (name = "{coordinator}", durableObjectNamespace = "KeyCoordinator"),
    (name = "{limiter}", durableObjectNamespace = "RateLimiter"),
    (name = "{requests_dataset}", wrapped = (
      moduleName = "test-dataset:sink",
      innerBindings = [(name = "dataset", text = "{REQUESTS_DATASET}")],
    )),
  ],
  durableObjectNamespaces = [
    (className = "KeyCoordinator", uniqueKey = "safe-retries-edge-KeyCoordinator", enableSql = true),
    (className = "RateLimiter", uniqueKey = "safe-retries-edge-RateLimiter", enableSql = true),
  ],
  durableObjectStorage = ({storage}),
  globalOutbound = "loopback",
);
"#
    )
}

/// The repository root, for a crate directly under it or one level deeper (`tools/soak`).
pub fn repo_root_of(manifest_dir: &str) -> PathBuf {
    let dir = PathBuf::from(manifest_dir);
    dir.ancestors()
        .find(|candidate| candidate.join("wrangler.toml").is_file())
        .map(Path::to_path_buf)
        .unwrap_or(dir)
}
