//! [`HaCluster`]: the replicated PostgreSQL of `scripts/ha-cluster.sh` (three nodes under
//! Patroni, one etcd, HAProxy in front sending connections to the leader), started for a test
//! or a soak in a scratch folder and on ports of its own, driven through the same script
//! commands people use (`kill-leader`, `switchover`, …), and stopped and removed (`down`)
//! when the value is dropped, however the run ends.

use std::path::{Path, PathBuf};
use std::process::Command;

/// How the cluster replicates commits (`scripts/ha-cluster.sh up`'s option).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HaMode {
    /// Patroni's `synchronous_mode`: a commit is acknowledged once a standby has it.
    Synchronous,
    /// And `synchronous_mode_strict`: with no standby, writes wait.
    Strict,
    /// Asynchronous replication: a failover may lose acknowledged commits.
    Asynchronous,
}

/// A running cluster.
#[derive(Debug)]
pub struct HaCluster {
    script: PathBuf,
    scratch: PathBuf,
    port_base: u16,
    url: String,
}

impl HaCluster {
    /// Starts a cluster in `mode` in a scratch folder of its own under the system's temporary
    /// folder (whose every parent the `postgres` user can enter), its ports from `port_base` up
    /// (see the script). Blocks while the cluster starts (ten seconds or so).
    pub fn up(repo_root: &Path, port_base: u16, mode: HaMode) -> HaCluster {
        let mut cluster = HaCluster {
            script: repo_root.join("scripts/ha-cluster.sh"),
            scratch: std::env::temp_dir().join(format!("ha-cluster-{}", uuid::Uuid::new_v4())),
            port_base,
            url: String::new(),
        };
        let option = match mode {
            HaMode::Synchronous => None,
            HaMode::Strict => Some("--strict"),
            HaMode::Asynchronous => Some("--async"),
        };
        let printed = cluster
            .run_blocking(&["up"].into_iter().chain(option).collect::<Vec<_>>())
            .unwrap_or_else(|error| panic!("the HA cluster did not start: {error}"));
        cluster.url = printed.lines().last().unwrap_or_default().trim().to_owned();
        assert!(
            cluster.url.starts_with("postgres://"),
            "ha-cluster.sh up printed no DATABASE_URL last: {printed}"
        );
        cluster
    }

    /// `DATABASE_URL` of the cluster's `payments` database, through HAProxy to the leader.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The leader's maintenance database (`postgres`), through HAProxy, where test databases
    /// are made.
    pub fn maintenance_url(&self) -> String {
        let (server, _) = self.url.rsplit_once('/').expect("the URL names a database");
        format!("{server}/postgres")
    }

    /// Runs `scripts/ha-cluster.sh ARGS` on this cluster: what it printed, or why it failed.
    pub async fn run(&self, args: &[&str]) -> Result<String, String> {
        let mut command = tokio::process::Command::new(&self.script);
        command
            .args(args)
            .env("HA_DIR", &self.scratch)
            .env("HA_PORT_BASE", self.port_base.to_string());
        let output = command
            .output()
            .await
            .map_err(|error| format!("cannot run {}: {error}", self.script.display()))?;
        finished(args, &output)
    }

    /// The leader's name, killed with its Patroni (`kill-leader`).
    pub async fn kill_leader(&self) -> Result<String, String> {
        Ok(self.run(&["kill-leader"]).await?.trim().to_owned())
    }

    /// Until a leader takes writes with a synchronous standby (in the synchronous modes),
    /// within `seconds`.
    pub async fn wait_healthy(&self, seconds: u32) -> Result<(), String> {
        self.run(&["wait-healthy", &seconds.to_string()])
            .await
            .map(drop)
    }

    /// Until, besides a healthy leader, every node streams from it (the cluster whole again),
    /// within `seconds`.
    pub async fn wait_whole(&self, seconds: u32) -> Result<(), String> {
        self.run(&["wait-healthy", &seconds.to_string(), "all"])
            .await
            .map(drop)
    }

    fn run_blocking(&self, args: &[&str]) -> Result<String, String> {
        let output = Command::new(&self.script)
            .args(args)
            .env("HA_DIR", &self.scratch)
            .env("HA_PORT_BASE", self.port_base.to_string())
            .output()
            .map_err(|error| format!("cannot run {}: {error}", self.script.display()))?;
        finished(args, &output)
    }
}

impl Drop for HaCluster {
    fn drop(&mut self) {
        if let Err(error) = self.run_blocking(&["down"]) {
            eprintln!("could not take the HA cluster down: {error}");
        }
    }
}

fn finished(args: &[&str], output: &std::process::Output) -> Result<String, String> {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if output.status.success() {
        Ok(stdout)
    } else {
        Err(format!(
            "ha-cluster.sh {} exited {}: {stdout}{}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}
