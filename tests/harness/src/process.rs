//! [`ServerProcess`]: a server binary as a child process, for the tests that run the real thing
//! (and kill it). It binds port 0 itself and reports where it listens on a fixed line of its
//! standard output (`backend listening on http://ADDR`, `bank simulator listening on …`; for
//! `workerd`, its control messages), so no test ever picks a port by binding and freeing
//! one. Its output is kept for the failure message; it runs in a process group of its own,
//! killed as a whole when the value is dropped, however the test ends.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

/// How long a server may take from spawn to its ready line (migrations on a fresh database).
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A running server child.
pub struct ServerProcess {
    name: String,
    child: Child,
    log: Arc<Mutex<String>>,
    exited: Option<ExitStatus>,
}

/// The URL in a ready line `{label} listening on {url}`, if `line` is that line.
pub fn listening_url(line: &str, label: &str) -> Option<String> {
    let url = line.strip_prefix(label)?.strip_prefix(" listening on ")?;
    Some(url.trim().to_owned())
}

/// A ready check for a server that prints several ready lines: it is ready once every one of
/// `labels` has printed `{label} listening on {url}`; gives the URLs in the order of `labels`.
pub fn listening_urls<const N: usize>(
    labels: [&'static str; N],
) -> impl FnMut(&str) -> Option<[String; N]> + Send + 'static {
    let mut found: [Option<String>; N] = std::array::from_fn(|_| None);
    move |line| {
        // The longest label first, so "backend admin" is not taken for "backend".
        let mut order: Vec<usize> = (0..N).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(labels[i].len()));
        if let Some(i) = order
            .into_iter()
            .find(|&i| listening_url(line, labels[i]).is_some())
        {
            found[i] = listening_url(line, labels[i]);
        }
        found
            .iter()
            .all(Option::is_some)
            .then(|| found.clone().map(Option::unwrap_or_default))
    }
}

/// The path of the workspace binary `name`, built beside the running test (`cargo test
/// --workspace` builds every binary; run alone, a test needs `cargo build -p PACKAGE --bins`).
pub fn server_binary(name: &str) -> PathBuf {
    let test = std::env::current_exe().expect("the test binary's path");
    let profile_dir = test
        .parent()
        .and_then(|deps| deps.parent())
        .expect("tests run from target/PROFILE/deps");
    let binary = profile_dir.join(name);
    assert!(
        binary.is_file(),
        "{} is missing: build it first (cargo build --workspace --bins)",
        binary.display()
    );
    binary
}

impl ServerProcess {
    /// Spawns `command` and waits until `ready` finds what it needs in a line of the child's
    /// standard output; returns the process and what `ready` found. Panics with the child's
    /// output if it exits or takes longer than 30 s.
    pub async fn start<T: Send + 'static>(
        name: &str,
        command: Command,
        ready: impl FnMut(&str) -> Option<T> + Send + 'static,
    ) -> (ServerProcess, T) {
        let (found, readiness) = oneshot::channel::<T>();
        let mut process = ServerProcess::spawn_watched(name, command, Some((ready, found)));
        match tokio::time::timeout(START_TIMEOUT, readiness).await {
            Ok(Ok(value)) => (process, value),
            _ => {
                process.kill_hard();
                panic!(
                    "{name} exited or did not report ready within {START_TIMEOUT:?}; its \
                     output:\n{}",
                    process.log()
                )
            }
        }
    }

    /// Spawns `command`, a server that prints no ready line (HAProxy): the caller finds out
    /// itself when it serves.
    pub fn spawn(name: &str, command: Command) -> ServerProcess {
        ServerProcess::spawn_watched::<(), fn(&str) -> Option<()>>(name, command, None)
    }

    /// Spawns `command` in a process group of its own, keeping its output, and offering each
    /// line of its standard output to `ready` until it finds its value.
    fn spawn_watched<T, F>(
        name: &str,
        mut command: Command,
        ready: Option<(F, oneshot::Sender<T>)>,
    ) -> ServerProcess
    where
        T: Send + 'static,
        F: FnMut(&str) -> Option<T> + Send + 'static,
    {
        let mut child = command
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {name}: {error}"));
        let log = Arc::new(Mutex::new(String::new()));
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr = child.stderr.take().expect("stderr is piped");
        keep_lines(stdout, Arc::clone(&log), ready);
        keep_lines::<_, T, fn(&str) -> Option<T>>(stderr, Arc::clone(&log), None);
        ServerProcess {
            name: name.to_owned(),
            child,
            log,
            exited: None,
        }
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything the child wrote so far.
    pub fn log(&self) -> String {
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// `kill -9` of the whole process group: it dies at once, mid-request, running no code of
    /// its own.
    pub fn kill_hard(&mut self) {
        if self.exited.is_some() {
            return;
        }
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill")
            .args(["-KILL", "--", &group])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        self.exited = Some(self.child.wait().expect("reap the killed process"));
    }

    /// `kill -TERM`: how a container is asked to stop; the server drains and exits.
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
            if let Some(status) = self.child.try_wait().expect("poll the child's exit") {
                self.exited = Some(status);
                return status;
            }
            assert!(
                started.elapsed() < within,
                "{} did not exit within {within:?}; its output:\n{}",
                self.name,
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.kill_hard();
        if std::thread::panicking() {
            eprintln!(
                "--- output of {} ({}) ---\n{}",
                self.name,
                self.pid(),
                self.log()
            );
        }
    }
}

/// Keeps every line of `pipe` in `log` (on a plain thread: it blocks until the child closes the
/// pipe, whatever the runtime does), and offers each to `ready` until it finds its value.
fn keep_lines<R, T, F>(pipe: R, log: Arc<Mutex<String>>, mut ready: Option<(F, oneshot::Sender<T>)>)
where
    R: Read + Send + 'static,
    T: Send + 'static,
    F: FnMut(&str) -> Option<T> + Send + 'static,
{
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            if let Some((check, _)) = ready.as_mut()
                && let Some(value) = check(&line)
                && let Some((_, found)) = ready.take()
            {
                let _ = found.send(value);
            }
            let mut log = log.lock().unwrap_or_else(PoisonError::into_inner);
            log.push_str(&line);
            log.push('\n');
        }
    });
}
