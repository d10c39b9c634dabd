//! The system under the soak, as real processes: the bank simulator, the backend replicas (on one
//! fresh database of the machine's PostgreSQL, of a replicated cluster ([`HaCluster`]: Patroni,
//! etcd and HAProxy, started here), or one replica on a SQLite file), HAProxy in front of them
//! ([`Balancer`]), the edge Worker under `workerd` in front of that, and a proxy in front of the
//! edge so that clients keep one address while the edge restarts. Every process runs in its own
//! process group and is killed with it when the stack is dropped; the cluster is taken down.
//!
//! With `--network namespaces` the cluster runs in network namespaces (`ha-cluster.sh up
//! --netns`), and so do the bank simulator (in the bank's namespace) and each replica (in its
//! backend's namespace, reaching the database through that backend's own HAProxy only), each
//! bound to its namespace's address; the balancer, the edge and the phones stay in the root
//! namespace and reach them over the bridge, so the cluster's nemeses can cut one link at a time.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, bail};
use test_harness::workerd::{WorkerSettings, start_workerd};
use test_harness::{
    HaCluster, HaMode, Namespace, NamespaceSettings, Namespaces, ServerProcess, TestDatabase,
    listening_url, listening_urls, url_of_database,
};

use crate::balancer::Balancer;
use crate::proxy::Proxy;

/// The bank's call timeout at every replica: short, so the bank's slow spells make keys
/// `unknown` often.
pub const BANK_TIMEOUT_MS: u64 = 2_000;

/// The first of the ports the soak's cluster and balancer take (`scripts/ha-cluster.sh`'s
/// `HA_PORT_BASE`): apart from a person's cluster (15430) and the failover suite's (15530).
pub const PORT_BASE: u16 = 15630;

/// The soak's network namespaces (`HA_NETNS_PREFIX`, `HA_NETNS_SUBNET`) with `--network
/// namespaces`: apart from a person's cluster (`payha`, 10.231.0.0/24) and
/// `scripts/ha-netns-check.sh`'s (`hachk`, 10.232.0.0/24).
const NAMESPACE_PREFIX: &str = "paysoak";

/// The soak's subnet with `--network namespaces` (see [`NAMESPACE_PREFIX`]).
const NAMESPACE_SUBNET: &str = "10.233.0.0/24";

/// How long a replica stopped with `SIGTERM` serves on, not ready: past the balancer's
/// detection (two failed checks 500 ms apart, `balancer.rs`).
const DRAIN_GRACE_SECONDS: u64 = 2;

/// The balancer's port: past the cluster's.
const BALANCER_PORT: u16 = PORT_BASE + 40;

/// Which database the replicas share.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DatabaseKind {
    /// One database of the machine's PostgreSQL server, several replicas.
    Postgres,
    /// One SQLite file, one replica.
    Sqlite,
    /// One database of a three-node Patroni cluster behind HAProxy, several replicas.
    Ha,
}

/// Where the bank, the replicas and the cluster talk to each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Network {
    /// Everything on the machine's loopback.
    Loopback,
    /// The cluster, the bank and each replica in network namespaces of their own on one bridge
    /// (`--database ha` only), so links can be cut, made lossy or slow.
    Namespaces,
}

/// What the stack is made of.
#[derive(Debug, Clone, Copy)]
pub struct Setup {
    /// The database the replicas share.
    pub database: DatabaseKind,
    /// How the cluster replicates, for `--database ha`.
    pub replication: HaReplication,
    /// Where the processes talk to each other.
    pub network: Network,
    /// How many backend replicas.
    pub replicas: usize,
}

/// How the cluster of `--database ha` replicates commits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum HaReplication {
    /// Synchronous, strict: no acknowledged commit without a standby's copy; writes wait
    /// while there is no standby. The replicas require it (`synchronous-strict`).
    Strict,
    /// Synchronous, falling back to asynchronous while there is no standby. The replicas
    /// require a standby at start (`synchronous`).
    Synchronous,
    /// Asynchronous: the negative control, which loses acknowledged claims on failover (the
    /// replicas are told `DATABASE_REPLICATION=none`, or they would refuse to start).
    Asynchronous,
}

impl HaReplication {
    fn mode(self) -> HaMode {
        match self {
            HaReplication::Strict => HaMode::Strict,
            HaReplication::Synchronous => HaMode::Synchronous,
            HaReplication::Asynchronous => HaMode::Asynchronous,
        }
    }
}

/// Where the keys and payments are.
pub enum Database {
    /// A fresh database on the local PostgreSQL, dropped with the stack.
    Postgres(TestDatabase),
    /// A SQLite file in the soak's scratch directory.
    Sqlite(PathBuf),
}

impl Database {
    /// The `DATABASE_URL` of the replicas.
    pub fn url(&self) -> String {
        match self {
            Database::Postgres(database) => database.url().to_owned(),
            Database::Sqlite(path) => format!("sqlite://{}", path.display()),
        }
    }
}

/// One backend replica's slot: where it runs, and its process while it runs.
struct Replica {
    /// Its network namespace, with `--network namespaces`; the machine's loopback otherwise.
    namespace: Option<Namespace>,
    /// Its `DATABASE_URL` (in a namespace, through its backend's own HAProxy).
    database_url: String,
    process: Option<ServerProcess>,
}

/// The running system.
pub struct Stack {
    /// Where clients send requests: the proxy in front of the edge.
    pub api_url: String,
    /// The bank simulator (knobs, ledger).
    pub bank_url: String,
    /// The database.
    pub database: Database,
    /// The token secret of the edge and the replicas.
    pub secret: String,
    replicas: Vec<Replica>,
    /// What `DATABASE_REPLICATION` the replicas run with.
    replication: &'static str,
    balancer: Balancer,
    edge_proxy: Proxy,
    workerd: Option<ServerProcess>,
    _bank: ServerProcess,
    binaries: PathBuf,
    scratch: PathBuf,
    policy_file: PathBuf,
    repo_root: PathBuf,
    /// The replicated cluster, for `--database ha`; last, so it is taken down after everything
    /// that uses it has stopped.
    pub cluster: Option<HaCluster>,
}

impl Stack {
    /// Starts everything as `setup` says, with files in `scratch`.
    pub async fn start(setup: Setup, scratch: &Path) -> anyhow::Result<Stack> {
        let binaries = binaries_dir()?;
        let repo_root = test_harness::workerd::repo_root_of(env!("CARGO_MANIFEST_DIR"));
        let secret = format!("soak-{}-{}", uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
        let policy_file = scratch.join("policy.yaml");
        std::fs::write(&policy_file, soak_policy(&repo_root)?)?;

        let (cluster, namespaces) = start_cluster(setup, &repo_root).await?;
        let bank_namespace = namespaces.as_ref().map(|made| &made.bank);
        let (bank, bank_url) = start_bank(&binaries, bank_namespace).await;
        let database = match (setup.database, &cluster) {
            (DatabaseKind::Sqlite, _) => Database::Sqlite(scratch.join("soak.sqlite")),
            (_, Some(cluster)) => {
                Database::Postgres(TestDatabase::create_on(&cluster.maintenance_url()).await)
            }
            (_, None) => Database::Postgres(TestDatabase::create().await),
        };
        let replication = match (setup.database, setup.replication) {
            (DatabaseKind::Ha, HaReplication::Strict) => "synchronous-strict",
            (DatabaseKind::Ha, HaReplication::Synchronous) => "synchronous",
            _ => "none",
        };
        let replicas = replica_slots(setup.replicas, &database, namespaces.as_ref());
        let balancer = Balancer::start(scratch, BALANCER_PORT, replicas.len()).await?;
        let edge_proxy = Proxy::start(1).await?;
        let mut stack = Stack {
            api_url: edge_proxy.url.clone(),
            bank_url,
            database,
            secret,
            replicas,
            replication,
            balancer,
            edge_proxy,
            workerd: None,
            _bank: bank,
            binaries,
            scratch: scratch.to_path_buf(),
            policy_file,
            repo_root,
            cluster,
        };
        for replica in 0..stack.replicas.len() {
            stack.start_replica(replica).await?;
        }
        stack.start_edge().await?;
        Ok(stack)
    }

    /// Starts replica `slot` (again) and puts it behind the load balancer.
    pub async fn start_replica(&mut self, slot: usize) -> anyhow::Result<()> {
        let replica = &self.replicas[slot];
        let (mut command, listen) =
            placed(self.binaries.join("backend"), replica.namespace.as_ref());
        command
            .arg("serve")
            .env("DATABASE_URL", &replica.database_url)
            .env("BANK_URL", &self.bank_url)
            .env("LISTEN_ADDR", &listen)
            .env("ADMIN_ADDR", &listen)
            .env("AUTH_JWT_SECRET", &self.secret)
            .env("APP_ENV", "production")
            .env("DATABASE_REPLICATION", self.replication)
            // Only what the edge forwards: the phones call the edge, never a replica.
            .env("EDGE_PROOF_SECRET", self.proof_secret())
            .env("POLICY_FILE", &self.policy_file)
            .env("BANK_TIMEOUT_MS", BANK_TIMEOUT_MS.to_string())
            .env("RECONCILE_INTERVAL_MS", "200")
            .env("SHUTDOWN_GRACE_SECONDS", DRAIN_GRACE_SECONDS.to_string())
            .env("RUST_LOG", "warn")
            .env("NO_COLOR", "1");
        if replica.namespace.is_some() {
            // The bank and HAProxy are other namespaces of this machine, not other machines:
            // their addresses are not loopback, but the bridge never leaves the machine.
            command.env("ALLOW_PLAINTEXT_TRANSPORT", "true");
        }
        let ready = listening_urls(["backend admin", "backend"]);
        let (process, [_, url]) = ServerProcess::start("backend", command, ready).await;
        self.balancer.set(slot, address_of(&url)?).await?;
        self.replicas[slot].process = Some(process);
        Ok(())
    }

    /// Kills replica `slot` with `SIGKILL`; it leaves whatever it held mid-call, and the
    /// balancer finds out by its health checks.
    pub fn kill_replica(&mut self, slot: usize) {
        if let Some(mut process) = self.replicas[slot].process.take() {
            process.kill_hard();
        }
    }

    /// Stops replica `slot` with `SIGTERM` and waits for it to exit: its `/readyz` turns 503
    /// at once, the balancer's health checks take it out within [`DRAIN_GRACE_SECONDS`] while
    /// it still serves, and it then finishes its requests (the drain, as in production).
    pub async fn terminate_replica(&mut self, slot: usize) -> anyhow::Result<()> {
        if let Some(mut process) = self.replicas[slot].process.take() {
            process.terminate();
            let status = process.wait_exit(Duration::from_secs(30)).await;
            if !status.success() {
                bail!("replica {slot} exited {status} on SIGTERM");
            }
        }
        Ok(())
    }

    /// The secret of the edge's proof, shared by the edge and the replicas.
    fn proof_secret(&self) -> String {
        format!("proof-{}", self.secret)
    }

    /// Kills the edge and starts it again (its Durable Objects start empty).
    pub async fn restart_edge(&mut self) -> anyhow::Result<()> {
        self.edge_proxy.set(0, None);
        if let Some(mut workerd) = self.workerd.take() {
            workerd.kill_hard();
        }
        self.start_edge().await
    }

    async fn start_edge(&mut self) -> anyhow::Result<()> {
        let scratch = self.scratch.join(format!("edge-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&scratch)?;
        let settings = WorkerSettings {
            durable_objects_on_disk: None,
            backend_url: self.balancer.url.clone(),
            backend_timeout_ms: 15_000,
            jwt_secret: Some(self.secret.clone()),
            // Every phone is one client address here, and each phone retries hard: the
            // soak is about faults, not about the rate limits.
            user_limit: (1_000_000, 10_000),
            address_limit: (1_000_000, 10_000),
            bindings: (
                edge::runtime::COORDINATOR_BINDING,
                edge::runtime::RATE_LIMITER_BINDING,
                edge::trace::REQUESTS_DATASET_BINDING,
            ),
            extra: vec![("EDGE_PROOF_SECRET", self.proof_secret())],
        };
        let (workerd, port) = start_workerd(&self.repo_root, &scratch, &settings).await;
        self.edge_proxy
            .set(0, Some(SocketAddr::from(([127, 0, 0, 1], port))));
        self.workerd = Some(workerd);
        Ok(())
    }
}

/// The cluster of `--database ha`, on loopback or in namespaces (then with the namespaces made
/// for the bank and the replicas); nothing for the other databases.
async fn start_cluster(
    setup: Setup,
    repo_root: &Path,
) -> anyhow::Result<(Option<HaCluster>, Option<Namespaces>)> {
    if setup.database != DatabaseKind::Ha {
        return Ok((None, None));
    }
    let root = repo_root.to_path_buf();
    let mode = setup.replication.mode();
    let (cluster, namespaces) = tokio::task::spawn_blocking(move || match setup.network {
        Network::Loopback => (HaCluster::up(&root, PORT_BASE, mode), None),
        Network::Namespaces => {
            let settings = NamespaceSettings {
                prefix: NAMESPACE_PREFIX,
                subnet: NAMESPACE_SUBNET,
                backends: setup.replicas,
            };
            let (cluster, namespaces) = HaCluster::up_in_namespaces(&root, mode, settings);
            (cluster, Some(namespaces))
        }
    })
    .await?;
    Ok((Some(cluster), namespaces))
}

/// The bank simulator, deduplicating and executing abandoned calls, in `namespace` if any: the
/// process and its URL.
async fn start_bank(binaries: &Path, namespace: Option<&Namespace>) -> (ServerProcess, String) {
    let (mut bank, listen) = placed(binaries.join("bank-simulator"), namespace);
    bank.args(["--listen", &listen, "--dedupe", "true"])
        .args(["--executes-abandoned-calls", "true"]);
    ServerProcess::start("bank-simulator", bank, |line| {
        listening_url(line, "bank simulator")
    })
    .await
}

/// The replicas' slots, none started: on loopback `count` on `database`; in namespaces one per
/// backend namespace, each on `database` through its backend's HAProxy.
fn replica_slots(
    count: usize,
    database: &Database,
    namespaces: Option<&Namespaces>,
) -> Vec<Replica> {
    let url = database.url();
    let Some(namespaces) = namespaces else {
        return (0..count)
            .map(|_| Replica {
                namespace: None,
                database_url: url.clone(),
                process: None,
            })
            .collect();
    };
    let (_, name) = url.rsplit_once('/').unwrap_or_default();
    namespaces
        .backends
        .iter()
        .map(|backend| Replica {
            namespace: Some(backend.namespace.clone()),
            database_url: url_of_database(&backend.database_url, name),
            process: None,
        })
        .collect()
}

/// A command that runs `program` in `namespace` (or on the machine's network, with none), and
/// the address it should listen on there, port 0.
fn placed(program: PathBuf, namespace: Option<&Namespace>) -> (Command, String) {
    match namespace {
        Some(namespace) => (
            namespace.command(program),
            format!("{}:0", namespace.address),
        ),
        None => (Command::new(program), "127.0.0.1:0".to_owned()),
    }
}

/// The tests' policy (the shipped one with the status-check rules scaled to seconds) with
/// `stuck_after_minutes: 1`, so that a claim the bank never saw is
/// released (and its late-debit check done) within the soak's settle time rather than after
/// five minutes.
fn soak_policy(repo_root: &Path) -> anyhow::Result<String> {
    let shipped = std::fs::read_to_string(repo_root.join("tests/policy-for-tests.yaml"))
        .context("reading tests/policy-for-tests.yaml")?;
    let policy: String = shipped
        .lines()
        .map(|line| {
            if line.trim_start().starts_with("stuck_after_minutes:") {
                "  stuck_after_minutes: 1".to_owned()
            } else {
                line.to_owned()
            }
        })
        .map(|line| line + "\n")
        .collect();
    shared::Policy::from_yaml(&policy).context("the soak's policy")?;
    Ok(policy)
}

/// The directory of this binary, where `cargo build` put `backend` and `bank-simulator` too.
fn binaries_dir() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe.parent().context("the soak binary's directory")?;
    for binary in ["backend", "bank-simulator"] {
        if !dir.join(binary).is_file() {
            bail!(
                "{} is missing: cargo build -p backend -p bank-simulator --bins",
                dir.join(binary).display()
            );
        }
    }
    Ok(dir.to_path_buf())
}

fn address_of(url: &str) -> anyhow::Result<SocketAddr> {
    url.trim_start_matches("http://")
        .parse()
        .with_context(|| format!("the address of {url}"))
}
