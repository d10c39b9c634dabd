//! The real `backend` binary as a child process, for the tests that crash it (`SIGKILL`) or
//! stop it (`SIGTERM`). A [`BackendProcess`] is configured only through the environment, as in
//! production, binds port 0 of 127.0.0.1 and reports its address on its ready line (a
//! `test_harness::ServerProcess`), keeps its log for the failure message, and is killed when
//! dropped, so no test leaves a process behind however it ends.

use std::process::{Command, ExitStatus};
use std::time::Duration;

use test_harness::{ServerProcess, listening_urls};

use super::SECRET;

/// The policy file the crash tests run with: the project's own (`stuck_after_minutes: 5`) with
/// the status-check rules scaled to seconds (`tests/policy-for-tests.yaml`).
pub const POLICY_FILE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/policy-for-tests.yaml"
);

/// The environment of a backend child.
#[derive(Debug, Clone)]
pub struct BackendEnv {
    /// `DATABASE_URL`; unset for the default embedded store.
    pub database_url: Option<String>,
    /// The working directory (the default store's `data/` goes there); the test's if `None`.
    pub working_dir: Option<std::path::PathBuf>,
    /// `BANK_URL`.
    pub bank_url: String,
    /// `BANK_TIMEOUT_MS`: long by default, so a held bank reply keeps the request waiting
    /// until the test kills the process.
    pub bank_timeout_ms: u64,
    /// `RECONCILE_INTERVAL_MS`: short, so a restarted backend reconciles promptly.
    pub reconcile_interval_ms: u64,
    /// `JANITOR_INTERVAL_SECONDS`.
    pub janitor_interval_seconds: u64,
    /// Further settings (`BANK_CA_FILE`, say), set last.
    pub extra: Vec<(String, String)>,
}

impl BackendEnv {
    /// A backend on `database_url` talking to the bank at `bank_url`.
    pub fn new(database_url: &str, bank_url: &str) -> BackendEnv {
        BackendEnv {
            database_url: Some(database_url.to_owned()),
            working_dir: None,
            bank_url: bank_url.to_owned(),
            bank_timeout_ms: 30_000,
            reconcile_interval_ms: 50,
            janitor_interval_seconds: 3_600,
            extra: Vec::new(),
        }
    }
}

/// A running `backend serve` child; killed (`SIGKILL`) with its process group on drop.
pub struct BackendProcess {
    /// `http://127.0.0.1:PORT`, as the process reported it.
    pub url: String,
    /// The admin listener's `http://127.0.0.1:PORT` (metrics, detailed readiness).
    pub admin_url: String,
    process: ServerProcess,
}

impl BackendProcess {
    /// Spawns `backend serve` and waits for its "backend listening on" line.
    pub async fn start(env: &BackendEnv) -> BackendProcess {
        let mut command = Command::new(env!("CARGO_BIN_EXE_backend"));
        command.env_clear();
        if let Some(database_url) = &env.database_url {
            command.env("DATABASE_URL", database_url);
        }
        if let Some(working_dir) = &env.working_dir {
            command.current_dir(working_dir);
        }
        command
            .arg("serve")
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("BANK_URL", &env.bank_url)
            .env("LISTEN_ADDR", "127.0.0.1:0")
            .env("ADMIN_ADDR", "127.0.0.1:0")
            .env("AUTH_JWT_SECRET", SECRET)
            .env("APP_ENV", "production")
            // One local PostgreSQL (or SQLite): said, as production requires.
            .env("DATABASE_REPLICATION", "none")
            // Tests call it directly, as a replica behind nothing.
            .env("REQUIRE_EDGE_PROOF", "false")
            .env("POLICY_FILE", POLICY_FILE)
            .env("BANK_TIMEOUT_MS", env.bank_timeout_ms.to_string())
            // A reply deadline past the bank's, as start-up requires.
            .env(
                "REQUEST_TIMEOUT_MS",
                (env.bank_timeout_ms + 15_000).to_string(),
            )
            .env(
                "RECONCILE_INTERVAL_MS",
                env.reconcile_interval_ms.to_string(),
            )
            .env(
                "JANITOR_INTERVAL_SECONDS",
                env.janitor_interval_seconds.to_string(),
            )
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .envs(env.extra.iter().map(|(name, value)| (name, value)));
        let ready = listening_urls(["backend admin", "backend"]);
        let (process, [admin_url, url]) = ServerProcess::start("backend", command, ready).await;
        BackendProcess {
            url,
            admin_url,
            process,
        }
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// Everything the child logged so far.
    pub fn log(&self) -> String {
        self.process.log()
    }

    /// `kill -9`: the process dies at once, mid-request, without running any code of its own.
    pub fn kill_hard(&mut self) {
        self.process.kill_hard();
    }

    /// `kill -TERM`: how a container is asked to stop; the backend drains and exits.
    pub fn terminate(&self) {
        self.process.terminate();
    }

    /// Waits up to `within` for the child to exit on its own; panics if it does not.
    pub async fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        self.process.wait_exit(within).await
    }
}
