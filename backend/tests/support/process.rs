//! The real `backend` binary as a child process, for the tests that crash it (`SIGKILL`) or
//! stop it (`SIGTERM`). A [`BackendProcess`] is configured only through the environment, as in
//! production, listens on a free port of 127.0.0.1 (read back from its "backend listening" log
//! line), keeps its log for the failure message, and is killed when dropped, so no test leaves
//! a process behind however it ends.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::SECRET;

/// The policy file the crash tests run with: the project's own (`stuck_after_minutes: 5`).
pub const POLICY_FILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../policy.yaml");

/// How long a backend may take from spawn to listening (migrations on a fresh database).
const START_TIMEOUT: Duration = Duration::from_secs(30);

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
        }
    }
}

/// A running `backend serve` child; killed (`SIGKILL`) and reaped on drop.
pub struct BackendProcess {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    log: Arc<Mutex<String>>,
    exited: Option<ExitStatus>,
}

impl BackendProcess {
    /// Spawns `backend serve` and waits until it listens.
    pub async fn start(env: &BackendEnv) -> BackendProcess {
        let mut command = Command::new(env!("CARGO_BIN_EXE_backend"));
        command.env_clear();
        if let Some(database_url) = &env.database_url {
            command.env("DATABASE_URL", database_url);
        }
        if let Some(working_dir) = &env.working_dir {
            command.current_dir(working_dir);
        }
        let mut child = command
            .arg("serve")
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("BANK_URL", &env.bank_url)
            .env("LISTEN_ADDR", "127.0.0.1:0")
            .env("AUTH_JWT_SECRET", SECRET)
            .env("APP_ENV", "production")
            .env("POLICY_FILE", POLICY_FILE)
            .env("BANK_TIMEOUT_MS", env.bank_timeout_ms.to_string())
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
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the backend binary starts");
        let stderr = child.stderr.take().expect("stderr is piped");
        let log = Arc::new(Mutex::new(String::new()));
        let (listening, address) = oneshot::channel::<String>();
        let kept = Arc::clone(&log);
        // A plain thread: it blocks on the pipe until the child exits, whatever the runtime does.
        std::thread::spawn(move || {
            let mut listening = Some(listening);
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let line = strip_ansi(&line);
                if line.contains("backend listening")
                    && let Some(addr) = field(&line, "addr")
                    && let Some(sender) = listening.take()
                {
                    let _ = sender.send(addr.to_owned());
                }
                let mut log = kept.lock().unwrap_or_else(PoisonError::into_inner);
                log.push_str(&line);
                log.push('\n');
            }
        });
        let mut process = BackendProcess {
            child,
            url: String::new(),
            log,
            exited: None,
        };
        match tokio::time::timeout(START_TIMEOUT, address).await {
            Ok(Ok(addr)) => process.url = format!("http://{addr}"),
            _ => panic!(
                "the backend did not start listening within {START_TIMEOUT:?}; its log:\n{}",
                process.log()
            ),
        }
        process
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything the child logged so far.
    pub fn log(&self) -> String {
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// `kill -9`: the process dies at once, mid-request, without running any code of its own.
    pub fn kill_hard(&mut self) {
        self.child.kill().expect("SIGKILL the backend");
        self.exited = Some(self.child.wait().expect("reap the killed backend"));
    }

    /// `kill -TERM`: how a container is asked to stop; the backend drains and exits.
    pub fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-s", "TERM", &self.pid().to_string()])
            .status()
            .expect("the kill command runs");
        assert!(status.success(), "kill -TERM {} failed", self.pid());
    }

    /// Waits up to `within` for the child to exit on its own; panics if it does not.
    pub async fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("poll the backend's exit") {
                self.exited = Some(status);
                return status;
            }
            assert!(
                started.elapsed() < within,
                "the backend did not exit within {within:?}; its log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

impl Drop for BackendProcess {
    fn drop(&mut self) {
        if self.exited.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if std::thread::panicking() {
            eprintln!(
                "--- log of backend child {} ---\n{}",
                self.pid(),
                self.log()
            );
        }
    }
}

/// The value of `name=value` in a log line.
fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|word| word.strip_prefix(name)?.strip_prefix('='))
}

/// The line without terminal colour codes (`ESC [ … m`), should the child colour its log.
fn strip_ansi(line: &str) -> String {
    let mut plain = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    plain
}
