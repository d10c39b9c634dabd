//! [`HaCluster`]: the replicated PostgreSQL of `scripts/ha-cluster.sh` (three nodes under
//! Patroni, one etcd, HAProxy in front sending connections to the leader), started for a test
//! or a soak in a scratch folder and on ports of its own, driven through the same script
//! commands people use (`kill-leader`, `switchover`, …), and stopped and removed (`down`)
//! when the value is dropped, however the run ends.
//!
//! On loopback ([`HaCluster::up`]) everything shares the machine's network. In network
//! namespaces ([`HaCluster::up_in_namespaces`], the script's `up --netns`) every component has
//! a namespace of its own on one bridge, with one HAProxy per backend, and the caller gets the
//! empty namespaces ([`Namespaces`]) its backends and bank run in, so the script's nemeses
//! (`nemesis isolate-leader`, `heal`, …) can cut, lossify or slow one link at a time.

use std::net::IpAddr;
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

impl HaMode {
    /// The option of `ha-cluster.sh up` that selects the mode, if any.
    fn up_option(self) -> Option<&'static str> {
        match self {
            HaMode::Synchronous => None,
            HaMode::Strict => Some("--strict"),
            HaMode::Asynchronous => Some("--async"),
        }
    }
}

/// The names and subnet of a cluster's network namespaces (`HA_NETNS_PREFIX`,
/// `HA_NETNS_SUBNET`): apart from every other cluster running at the same time.
#[derive(Debug, Clone, Copy)]
pub struct NamespaceSettings<'a> {
    /// The namespaces' prefix: 1 to 10 lower-case letters or digits.
    pub prefix: &'a str,
    /// A /24 ending in `.0/24`, routed nowhere else on the machine.
    pub subnet: &'a str,
    /// How many backend namespaces (each with its HAProxy) to make.
    pub backends: usize,
}

/// An empty network namespace of the cluster, for the caller's processes.
#[derive(Debug, Clone)]
pub struct Namespace {
    /// Its name (`ip netns list`).
    pub name: String,
    /// Its address on the bridge, where its processes listen.
    pub address: IpAddr,
}

impl Namespace {
    /// A command that runs `program` inside the namespace (`ip netns exec NAME PROGRAM`).
    /// `ip` execs the program, so the child's process id and group are the program's own.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", &self.name]).arg(program);
        command
    }
}

/// A backend's namespace and its way to the database.
#[derive(Debug, Clone)]
pub struct BackendNamespace {
    /// Where the backend runs.
    pub namespace: Namespace,
    /// `DATABASE_URL` of the `payments` database through this backend's own HAProxy, its only
    /// way to the leader.
    pub database_url: String,
}

/// The namespaces `up --netns` made for the caller, as its last lines printed them.
#[derive(Debug, Clone)]
pub struct Namespaces {
    /// One per backend, in order (backend 1 first).
    pub backends: Vec<BackendNamespace>,
    /// The bank's.
    pub bank: Namespace,
}

/// A running cluster.
#[derive(Debug)]
pub struct HaCluster {
    script: PathBuf,
    scratch: PathBuf,
    /// The script's settings besides `HA_DIR`: the port base, or the namespaces'.
    settings: Vec<(&'static str, String)>,
    url: String,
}

impl HaCluster {
    /// Starts a cluster in `mode` in a scratch folder of its own under the system's temporary
    /// folder (whose every parent the `postgres` user can enter), its ports from `port_base` up
    /// (see the script). Blocks while the cluster starts (ten seconds or so).
    pub fn up(repo_root: &Path, port_base: u16, mode: HaMode) -> HaCluster {
        let settings = vec![("HA_PORT_BASE", port_base.to_string())];
        let (cluster, _) = HaCluster::start(repo_root, settings, &["up"], mode);
        cluster
    }

    /// Starts a cluster in `mode` in network namespaces named and addressed as `namespaces`
    /// says, with one backend namespace (and HAProxy) per backend: the cluster, and the empty
    /// namespaces for the caller's backends and bank. Blocks while it starts (15 s or so).
    pub fn up_in_namespaces(
        repo_root: &Path,
        mode: HaMode,
        namespaces: NamespaceSettings,
    ) -> (HaCluster, Namespaces) {
        let settings = vec![
            ("HA_NETNS_PREFIX", namespaces.prefix.to_owned()),
            ("HA_NETNS_SUBNET", namespaces.subnet.to_owned()),
        ];
        let backends = namespaces.backends.to_string();
        let up = ["up", "--netns", "--backends", &backends];
        let (cluster, printed) = HaCluster::start(repo_root, settings, &up, mode);
        let made = parse_namespaces(&printed)
            .unwrap_or_else(|error| panic!("ha-cluster.sh up --netns: {error}:\n{printed}"));
        assert_eq!(
            made.backends.len(),
            namespaces.backends,
            "ha-cluster.sh up --netns printed another number of backends:\n{printed}"
        );
        (cluster, made)
    }

    /// Runs `up` (with `up_args`, then the mode's option) with `settings`; the cluster, taken
    /// down on drop even if `up` fails, and what `up` printed.
    fn start(
        repo_root: &Path,
        settings: Vec<(&'static str, String)>,
        up_args: &[&str],
        mode: HaMode,
    ) -> (HaCluster, String) {
        let mut cluster = HaCluster {
            script: repo_root.join("scripts/ha-cluster.sh"),
            scratch: std::env::temp_dir().join(format!("ha-cluster-{}", uuid::Uuid::new_v4())),
            settings,
            url: String::new(),
        };
        let args: Vec<&str> = up_args.iter().copied().chain(mode.up_option()).collect();
        let printed = cluster
            .run_blocking(&args)
            .unwrap_or_else(|error| panic!("the HA cluster did not start: {error}"));
        cluster.url = printed.lines().last().unwrap_or_default().trim().to_owned();
        assert!(
            cluster.url.starts_with("postgres://"),
            "ha-cluster.sh up printed no DATABASE_URL last: {printed}"
        );
        (cluster, printed)
    }

    /// `DATABASE_URL` of the cluster's `payments` database, through HAProxy to the leader (in
    /// namespaces, through the first backend's HAProxy, reachable from the root namespace).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The leader's maintenance database (`postgres`), through HAProxy, where test databases
    /// are made.
    pub fn maintenance_url(&self) -> String {
        url_of_database(&self.url, "postgres")
    }

    /// Runs `scripts/ha-cluster.sh ARGS` on this cluster: what it printed, or why it failed.
    pub async fn run(&self, args: &[&str]) -> Result<String, String> {
        let mut command = tokio::process::Command::new(&self.script);
        command
            .args(args)
            .env("HA_DIR", &self.scratch)
            .envs(self.settings.iter().map(|(name, value)| (name, value)));
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
            .envs(self.settings.iter().map(|(name, value)| (name, value)))
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

/// The URL of database `name` on the server `url` names (`url` with its database replaced).
pub fn url_of_database(url: &str, name: &str) -> String {
    let (server, _) = url.rsplit_once('/').expect("the URL names a database");
    format!("{server}/{name}")
}

/// The namespaces in `up --netns`'s lines: `BACKEND_NS=… DATABASE_URL=… BIND=…` per backend,
/// then `BANK_NS=… BIND=…`.
fn parse_namespaces(printed: &str) -> Result<Namespaces, String> {
    let mut backends = Vec::new();
    let mut bank = None;
    for line in printed.lines() {
        let fields: Vec<(&str, &str)> = line
            .split_whitespace()
            .filter_map(|field| field.split_once('='))
            .collect();
        let field = |name: &str| {
            fields
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| *value)
                .ok_or_else(|| format!("no {name} in `{line}`"))
        };
        let namespace = |name_field: &str| -> Result<Namespace, String> {
            let address = field("BIND")?;
            Ok(Namespace {
                name: field(name_field)?.to_owned(),
                address: address
                    .parse()
                    .map_err(|error| format!("the address {address}: {error}"))?,
            })
        };
        if line.starts_with("BACKEND_NS=") {
            backends.push(BackendNamespace {
                namespace: namespace("BACKEND_NS")?,
                database_url: field("DATABASE_URL")?.to_owned(),
            });
        } else if line.starts_with("BANK_NS=") {
            bank = Some(namespace("BANK_NS")?);
        }
    }
    Ok(Namespaces {
        backends,
        bank: bank.ok_or("no BANK_NS line")?,
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_namespace_lines_of_up_give_each_backend_and_the_bank() {
        let printed = "\
BACKEND_NS=payha-backend1 DATABASE_URL=postgres://postgres@10.231.0.21:5432/payments BIND=10.231.0.41
BACKEND_NS=payha-backend2 DATABASE_URL=postgres://postgres@10.231.0.22:5432/payments BIND=10.231.0.42
BANK_NS=payha-bank BIND=10.231.0.60
postgres://postgres@10.231.0.21:5432/payments
";
        let made = parse_namespaces(printed).expect("the lines parse");
        assert_eq!(made.backends.len(), 2);
        assert_eq!(made.backends[1].namespace.name, "payha-backend2");
        assert_eq!(
            made.backends[1].database_url,
            "postgres://postgres@10.231.0.22:5432/payments"
        );
        assert_eq!(
            made.backends[0].namespace.address.to_string(),
            "10.231.0.41"
        );
        assert_eq!(made.bank.name, "payha-bank");
        assert_eq!(made.bank.address.to_string(), "10.231.0.60");
        assert_eq!(
            url_of_database(&made.backends[0].database_url, "test_1"),
            "postgres://postgres@10.231.0.21:5432/test_1"
        );
        assert!(parse_namespaces("postgres://postgres@10.231.0.21:5432/payments").is_err());
    }
}
