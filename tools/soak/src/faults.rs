//! The fault schedule: which fault strikes when, drawn from the seed before the soak starts and
//! printed, then carried out on the running [`Stack`] one after another.
//!
//! Faults, about one every [`MEAN_GAP`]: a replica `SIGKILL`ed and started again, one stopped
//! with `SIGTERM` (graceful) and started again, random database connections cut
//! (`pg_terminate_backend`), PostgreSQL restarted (once per soak), the bank slow past the
//! replicas' timeout, losing replies (it debits, the reply never comes), failing before it
//! debits (5xx), declining, or out altogether, and the edge restarted. A bank fault lasts
//! [`BANK_FAULT_LASTS`], then the bank's knobs go back to [`baseline_knobs`]. On SQLite there
//! is one replica and no PostgreSQL to fault.
//!
//! On a replicated cluster (`--database ha`) the machine's PostgreSQL is not restarted; the
//! cluster's faults ([`ClusterFault`], driven through `scripts/ha-cluster.sh`) strike instead,
//! spread evenly over the soak, each waited out until the cluster is whole again (a writable
//! leader, every node streaming from it, one of them synchronous where it replicates
//! synchronously): the leader's node killed, a planned
//! switchover, every standby killed, the leader's node paused past the leader lock's TTL and
//! resumed (it must be demoted), etcd restarted, and the leader's WAL senders frozen while
//! payments commit, then the leader killed: the fault that loses acknowledged commits under
//! asynchronous replication (and under synchronous replication only delays them). A standby
//! still not streaming after [`CLUSTER_RECOVERY_SECONDS`] is re-cloned from the leader, as
//! on-call would, and the soak prints it.
//!
//! In network namespaces (`--network namespaces`) the cluster's faults are the script's
//! nemeses ([`ClusterFault::PARTITIONS`]), each struck while the phones pay, held for a while,
//! healed, and waited out the same way: the leader cut from etcd and the standbys; that and
//! backend 1 left on the cut-off leader only (a split brain, were the old leader to take
//! writes); the synchronous standby cut from the leader; the backends' database link lossy,
//! then slow; the bank's link cut while calls are at the bank.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use sqlx::Connection;
use test_harness::HaCluster;

use crate::stack::{Database, DatabaseKind, Stack};

/// The mean time between two faults.
pub const MEAN_GAP: Duration = Duration::from_secs(6);

/// How long a bank fault lasts.
pub const BANK_FAULT_LASTS: Duration = Duration::from_secs(4);

/// How long a `SIGKILL`ed replica stays down.
const DOWN_AFTER_KILL: Duration = Duration::from_secs(1);

/// How long the cluster's leader is paused: past the leader lock's 20 s TTL, so another node
/// is elected meanwhile.
const LEADER_PAUSED: Duration = Duration::from_secs(24);

/// How long the standbys stay down, or the WAL shipping to them frozen.
const STANDBYS_AWAY: Duration = Duration::from_secs(4);

/// How long the leader stays cut from etcd and the standbys (alone, or with a backend left on
/// it): past the new leader's election (about 22 s here) and the old leader's demotion (10 to
/// 20 s), so both sides of the partition play out before it heals.
const PARTITION_HELD: Duration = Duration::from_secs(35);

/// How long the synchronous standby stays cut from the leader: short of `wal_sender_timeout`
/// (60 s), after which the leader would give the standby up and make the other synchronous, so
/// every commit waits the whole time for a copy it cannot get; the heal releases them.
const SYNC_STANDBY_CUT_HELD: Duration = Duration::from_secs(20);

/// How long the backends' database link stays lossy or slow: enough for every replica's
/// queries, commits and reconnects to meet it many times over, short of stalling the soak.
const DB_LINK_DEGRADED_HELD: Duration = Duration::from_secs(15);

/// The share of the database link's packets `lossy-db-link` drops, in percent.
const DB_LINK_LOSS_PERCENT: &str = "30";

/// How long `slow-db-link` holds each of the database link's packets, and the jitter around
/// it, in milliseconds.
const DB_LINK_DELAY_MS: [&str; 2] = ["200", "100"];

/// How long the bank's link stays cut: five times the replicas' bank timeout
/// ([`crate::stack::BANK_TIMEOUT_MS`]), so the calls cut mid-way time out, and reconciliation's
/// look-ups fail too until the heal.
const BANK_LINK_CUT_HELD: Duration = Duration::from_secs(10);

/// The bank's latency around the cut of its link: short of the replicas' 2 s timeout, so calls
/// are ordinary, yet long enough that every call of the last second and a half is still at the
/// bank when the link goes (its reply then never arrives, whether the bank moved money or not).
const BANK_LATENCY_AT_CUT_MS: u64 = 1_500;

/// How long calls are made at [`BANK_LATENCY_AT_CUT_MS`] before the link is cut.
const CALLS_IN_FLIGHT_AFTER: Duration = Duration::from_secs(1);

/// How long a cluster fault may take to end in a whole cluster, in seconds.
const CLUSTER_RECOVERY_SECONDS: u32 = 120;

/// How long a killed leader's node stays down at most, waiting for another to take over, in
/// seconds (a failover takes 20 to 25 s here).
const FAILOVER_SECONDS: u32 = 60;

/// A fault of the replicated cluster (`--database ha`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum ClusterFault {
    /// `SIGKILL` the leader's Patroni and PostgreSQL; start the node again once another leads
    /// (or after [`FAILOVER_SECONDS`], if none may).
    KillLeader,
    /// A planned switchover (`patronictl switchover`).
    Switchover,
    /// `SIGKILL` every standby's node; with strict replication, writes stop until one is back.
    KillStandbys,
    /// `SIGSTOP` the leader's node past the lock's TTL, then `SIGCONT`: it must be demoted.
    PauseLeader,
    /// Stop etcd and start it again.
    RestartEtcd,
    /// Freeze the leader's WAL senders while payments commit, then kill the leader.
    LoseTheTail,
    /// Cut the leader from etcd and the standbys (the HAProxys still reach it) for
    /// [`PARTITION_HELD`]: it must be demoted, a standby must take over, and nothing it
    /// commits alone may be acknowledged.
    IsolateLeader,
    /// As [`ClusterFault::IsolateLeader`], and backend 1 left reaching the old leader only
    /// (through its HAProxy): it must reply 503 rather than write to the old leader.
    SplitBrain,
    /// Cut the synchronous standby from the leader for [`SYNC_STANDBY_CUT_HELD`]: commits wait,
    /// none acknowledged without a standby's copy.
    CutSyncStandby,
    /// Drop 30% of the packets between each backend and its HAProxy for
    /// [`DB_LINK_DEGRADED_HELD`].
    LossyDbLink,
    /// Hold each packet between each backend and its HAProxy 200 ± 100 ms for
    /// [`DB_LINK_DEGRADED_HELD`].
    SlowDbLink,
    /// Make the bank slow, then cut every backend from it while calls are at the bank, for
    /// [`BANK_LINK_CUT_HELD`]: the cut calls stay `unknown` until a look-up settles them.
    CutBankLink,
}

impl ClusterFault {
    /// The process faults (crashes, pauses, restarts, a switchover), in the order a soak
    /// strikes them, the leader killed twice: the default on loopback.
    pub const PROCESS_FAULTS: [ClusterFault; 7] = [
        ClusterFault::KillLeader,
        ClusterFault::Switchover,
        ClusterFault::KillStandbys,
        ClusterFault::PauseLeader,
        ClusterFault::KillLeader,
        ClusterFault::RestartEtcd,
        ClusterFault::LoseTheTail,
    ];

    /// The partitions and bad links, in the order a soak strikes them: the default in network
    /// namespaces.
    pub const PARTITIONS: [ClusterFault; 6] = [
        ClusterFault::IsolateLeader,
        ClusterFault::CutBankLink,
        ClusterFault::CutSyncStandby,
        ClusterFault::SplitBrain,
        ClusterFault::LossyDbLink,
        ClusterFault::SlowDbLink,
    ];

    /// Whether the fault puts another node in the lead.
    pub fn changes_leader(self) -> bool {
        matches!(
            self,
            ClusterFault::KillLeader
                | ClusterFault::Switchover
                | ClusterFault::PauseLeader
                | ClusterFault::LoseTheTail
                | ClusterFault::IsolateLeader
                | ClusterFault::SplitBrain
        )
    }

    /// Whether the fault cuts or degrades a link between network namespaces, so needs the
    /// cluster in them (`--network namespaces`).
    pub fn needs_namespaces(self) -> bool {
        ClusterFault::PARTITIONS.contains(&self)
    }
}

/// One kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fault {
    /// `SIGKILL` a replica, start it again a second later.
    KillReplica(usize),
    /// `SIGTERM` a replica (it finishes its requests), start it again.
    StopReplica(usize),
    /// Terminate about half of the database's connections.
    CutConnections,
    /// Restart the PostgreSQL server.
    RestartPostgres,
    /// The bank replies after 3 s: past the replicas' 2 s timeout.
    BankSlow,
    /// Half the bank's replies are lost after it moved the money.
    BankLosesReplies,
    /// Half the bank's calls fail with 503 before it does anything.
    BankFails,
    /// Half the debits are declined.
    BankDeclines,
    /// Every bank call fails.
    BankOutage,
    /// Kill the edge and start it again.
    RestartEdge,
    /// A fault of the replicated cluster.
    Cluster(ClusterFault),
}

impl Fault {
    /// The fault's kind, for the table (replicas counted together).
    pub fn kind(self) -> &'static str {
        match self {
            Fault::KillReplica(_) => "replica SIGKILLed and restarted",
            Fault::StopReplica(_) => "replica stopped (SIGTERM) and restarted",
            Fault::CutConnections => "database connections cut",
            Fault::RestartPostgres => "PostgreSQL restarted",
            Fault::BankSlow => "bank slower than the timeout",
            Fault::BankLosesReplies => "bank losing replies",
            Fault::BankFails => "bank failing before debiting (5xx)",
            Fault::BankDeclines => "bank declining",
            Fault::BankOutage => "bank out",
            Fault::RestartEdge => "edge restarted",
            Fault::Cluster(ClusterFault::KillLeader) => "cluster: leader node SIGKILLed",
            Fault::Cluster(ClusterFault::Switchover) => "cluster: planned switchover",
            Fault::Cluster(ClusterFault::KillStandbys) => "cluster: every standby SIGKILLed",
            Fault::Cluster(ClusterFault::PauseLeader) => "cluster: leader node paused past its TTL",
            Fault::Cluster(ClusterFault::RestartEtcd) => "cluster: etcd restarted",
            Fault::Cluster(ClusterFault::LoseTheTail) => {
                "cluster: WAL shipping frozen, then the leader SIGKILLed"
            }
            Fault::Cluster(ClusterFault::IsolateLeader) => {
                "partition: leader cut from etcd and the standbys"
            }
            Fault::Cluster(ClusterFault::SplitBrain) => {
                "partition: leader cut off, backend 1 left on it"
            }
            Fault::Cluster(ClusterFault::CutSyncStandby) => {
                "partition: synchronous standby cut from the leader"
            }
            Fault::Cluster(ClusterFault::LossyDbLink) => "network: database link losing 30%",
            Fault::Cluster(ClusterFault::SlowDbLink) => {
                "network: database link 200 ± 100 ms slower"
            }
            Fault::Cluster(ClusterFault::CutBankLink) => "partition: bank link cut mid-call",
        }
    }

    /// The bank's knobs during the fault, for a bank fault.
    fn bank_knobs(self) -> Option<Value> {
        let mut knobs = baseline_knobs();
        let changes = match self {
            Fault::BankSlow => json!({ "latency_ms": 3_000 }),
            Fault::BankLosesReplies => {
                json!({ "lost_reply_rate": 0.5, "lost_reply_delay_ms": 5_000 })
            }
            Fault::BankFails => json!({ "error_rate": 0.5 }),
            Fault::BankDeclines => json!({ "decline_rate": 0.5 }),
            Fault::BankOutage => json!({ "error_rate": 1.0 }),
            _ => return None,
        };
        for (knob, value) in changes.as_object()?.clone() {
            knobs[knob] = value;
        }
        Some(knobs)
    }
}

/// The bank between faults: 20-120 ms per call, deduplicating by reference, and executing a
/// call whose caller hung up (the dangerous bank: money moves after the caller gave up).
pub fn baseline_knobs() -> Value {
    json!({
        "latency_ms": 20,
        "jitter_ms": 100,
        "dedupe": true,
        "executes_abandoned_calls": true,
    })
}

/// What a soak's schedule is drawn for.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The soak's length.
    pub duration: Duration,
    /// The database the replicas share.
    pub database: DatabaseKind,
    /// How many replicas.
    pub replicas: usize,
    /// The cluster's faults, in order (`--database ha` only).
    pub cluster_faults: Vec<ClusterFault>,
    /// Whether the replicas, the bank, the edge and the connections are faulted too.
    pub other_faults: bool,
}

/// The schedule for `plan`, from `seed`: (seconds into the soak, fault), in time order.
pub fn schedule(seed: u64, plan: &Plan) -> Vec<(Duration, Fault)> {
    let mut random = StdRng::seed_from_u64(seed);
    let mut kinds = vec![
        Fault::BankSlow,
        Fault::BankLosesReplies,
        Fault::BankFails,
        Fault::BankDeclines,
        Fault::BankOutage,
        Fault::RestartEdge,
    ];
    for replica in 0..plan.replicas {
        kinds.push(Fault::KillReplica(replica));
        kinds.push(Fault::StopReplica(replica));
    }
    if plan.database != DatabaseKind::Sqlite {
        kinds.push(Fault::CutConnections);
    }
    let count = if plan.other_faults {
        (plan.duration.as_secs_f64() / MEAN_GAP.as_secs_f64())
            .round()
            .max(1.0) as usize
    } else {
        0
    };
    // The last stretch of the soak is left quiet, so the last fault's effects play out.
    let window = plan.duration.mul_f64(0.85).as_secs_f64().max(1.0);
    let mut faults: Vec<(Duration, Fault)> = (0..count)
        .map(|_| {
            let at = Duration::from_secs_f64(random.random_range(1.0..window));
            (at, kinds[random.random_range(0..kinds.len())])
        })
        .collect();
    match plan.database {
        DatabaseKind::Postgres if plan.other_faults => {
            let at = Duration::from_secs_f64(random.random_range(window * 0.3..window * 0.7));
            faults.push((at, Fault::RestartPostgres));
        }
        DatabaseKind::Ha => {
            // Evenly spread: each takes tens of seconds, and the next finds the cluster whole.
            let spread = plan.cluster_faults.len() as f64;
            for (index, fault) in plan.cluster_faults.iter().enumerate() {
                let at = Duration::from_secs_f64(window * (index as f64 + 0.5) / spread);
                faults.push((at, Fault::Cluster(*fault)));
            }
        }
        _ => {}
    }
    faults.sort();
    faults
}

/// How many faults of each kind were carried out.
pub fn count_by_kind(faults: impl IntoIterator<Item = Fault>) -> BTreeMap<&'static str, usize> {
    let mut counts = BTreeMap::new();
    for fault in faults {
        *counts.entry(fault.kind()).or_default() += 1;
    }
    counts
}

/// Carries out one fault on the stack, and waits for its effect to end (the replica back, the
/// bank's knobs back to the baseline).
pub async fn strike(stack: &mut Stack, fault: Fault, http: &reqwest::Client) -> anyhow::Result<()> {
    if let Some(knobs) = fault.bank_knobs() {
        set_bank_knobs(http, &stack.bank_url, &knobs).await?;
        tokio::time::sleep(BANK_FAULT_LASTS).await;
        return set_bank_knobs(http, &stack.bank_url, &baseline_knobs()).await;
    }
    match fault {
        Fault::KillReplica(slot) => {
            stack.kill_replica(slot);
            tokio::time::sleep(DOWN_AFTER_KILL).await;
            stack.start_replica(slot).await
        }
        Fault::StopReplica(slot) => {
            stack.terminate_replica(slot).await?;
            stack.start_replica(slot).await
        }
        Fault::CutConnections => cut_connections(&stack.database).await,
        Fault::RestartPostgres => restart_postgres().await,
        Fault::RestartEdge => stack.restart_edge().await,
        Fault::Cluster(fault) => strike_cluster(stack, fault, http).await,
        _ => Ok(()),
    }
}

/// Carries out a cluster fault through `scripts/ha-cluster.sh` (a partition: struck, held,
/// healed), and waits for a writable leader (with a synchronous standby, where it replicates
/// synchronously) and every node back.
async fn strike_cluster(
    stack: &Stack,
    fault: ClusterFault,
    http: &reqwest::Client,
) -> anyhow::Result<()> {
    let cluster = stack
        .cluster
        .as_ref()
        .context("a cluster fault without a cluster")?;
    let run = |args: &'static [&'static str]| async move {
        cluster.run(args).await.map_err(anyhow::Error::msg)
    };
    let start_again = |nodes: String| async move {
        for node in nodes.split_whitespace() {
            cluster
                .run(&["start-node", node])
                .await
                .map_err(anyhow::Error::msg)?;
        }
        anyhow::Ok(())
    };
    match fault {
        ClusterFault::KillLeader => {
            let killed = run(&["kill-leader"]).await?;
            fail_over(cluster).await;
            start_again(killed).await?;
        }
        ClusterFault::Switchover => {
            run(&["switchover"]).await?;
        }
        ClusterFault::KillStandbys => {
            let killed = run(&["kill-standbys"]).await?;
            tokio::time::sleep(STANDBYS_AWAY).await;
            start_again(killed).await?;
        }
        ClusterFault::PauseLeader => {
            let seconds = LEADER_PAUSED.as_secs().to_string();
            cluster
                .run(&["pause-leader", &seconds])
                .await
                .map_err(anyhow::Error::msg)?;
        }
        ClusterFault::RestartEtcd => {
            run(&["restart-etcd"]).await?;
        }
        ClusterFault::LoseTheTail => {
            run(&["freeze-replication"]).await?;
            tokio::time::sleep(STANDBYS_AWAY).await;
            let killed = run(&["kill-leader"]).await;
            run(&["thaw-replication"]).await?;
            fail_over(cluster).await;
            start_again(killed?).await?;
        }
        ClusterFault::IsolateLeader => {
            nemesis(cluster, &["isolate-leader"]).await?;
            hold_then_heal(cluster, PARTITION_HELD).await?;
        }
        ClusterFault::SplitBrain => {
            let old_leader = nemesis(cluster, &["isolate-leader"]).await?;
            nemesis(cluster, &["isolate-backend", "1", &old_leader]).await?;
            hold_then_heal(cluster, PARTITION_HELD).await?;
        }
        ClusterFault::CutSyncStandby => {
            nemesis(cluster, &["cut-sync-standby"]).await?;
            hold_then_heal(cluster, SYNC_STANDBY_CUT_HELD).await?;
        }
        ClusterFault::LossyDbLink => {
            nemesis(cluster, &["lossy-db-link", DB_LINK_LOSS_PERCENT]).await?;
            hold_then_heal(cluster, DB_LINK_DEGRADED_HELD).await?;
        }
        ClusterFault::SlowDbLink => {
            let [delay, jitter] = DB_LINK_DELAY_MS;
            nemesis(cluster, &["slow-db-link", delay, jitter]).await?;
            hold_then_heal(cluster, DB_LINK_DEGRADED_HELD).await?;
        }
        ClusterFault::CutBankLink => {
            let mut slow = baseline_knobs();
            slow["latency_ms"] = json!(BANK_LATENCY_AT_CUT_MS);
            slow["jitter_ms"] = json!(0);
            set_bank_knobs(http, &stack.bank_url, &slow).await?;
            tokio::time::sleep(CALLS_IN_FLIGHT_AFTER).await;
            nemesis(cluster, &["cut-bank-link"]).await?;
            hold_then_heal(cluster, BANK_LINK_CUT_HELD).await?;
            set_bank_knobs(http, &stack.bank_url, &baseline_knobs()).await?;
        }
    }
    whole_or_repaired(cluster).await
}

/// Strikes `ha-cluster.sh nemesis ARGS`; the node it names (the leader cut off, the standby
/// cut), if any, printed.
async fn nemesis(cluster: &HaCluster, args: &[&str]) -> anyhow::Result<String> {
    let command: Vec<&str> = ["nemesis"]
        .into_iter()
        .chain(args.iter().copied())
        .collect();
    let printed = cluster
        .run(&command)
        .await
        .map_err(anyhow::Error::msg)?
        .trim()
        .to_owned();
    if !printed.is_empty() {
        println!("          cluster: nemesis {}: {printed}", args.join(" "));
    }
    Ok(printed)
}

/// Keeps the nemeses for `held`, then removes them all (`ha-cluster.sh heal`).
async fn hold_then_heal(cluster: &HaCluster, held: Duration) -> anyhow::Result<()> {
    tokio::time::sleep(held).await;
    cluster
        .run(&["heal"])
        .await
        .map(drop)
        .map_err(anyhow::Error::msg)
}

/// Waits, within [`FAILOVER_SECONDS`], for the cluster to be healthy without its killed leader;
/// the killed node is started again after it either way, as a crashed machine comes back.
/// Patroni promotes only a standby recorded as synchronous, and a leader killed seconds after
/// its own promotion may have recorded none yet: then no node may take over, and the cluster
/// rightly waits for the killed one. Printed, not an error.
async fn fail_over(cluster: &HaCluster) {
    if cluster.wait_healthy(FAILOVER_SECONDS).await.is_err() {
        println!(
            "          cluster: no healthy leader within {FAILOVER_SECONDS} s without the killed node; starting it"
        );
    }
}

/// Waits for the cluster to be whole again (a healthy leader, every node streaming from it); if
/// it is not within [`CLUSTER_RECOVERY_SECONDS`], does what on-call would
/// (`ha-cluster.sh reinit-stuck`: every standby that does not stream is re-cloned from the
/// leader, printed) and waits once more. Patroni cannot bring back a former leader whose rewind
/// lost its source half-way, a state two quick failovers can leave (docs/operations.md, "A
/// standby that does not come back").
async fn whole_or_repaired(cluster: &HaCluster) -> anyhow::Result<()> {
    let Err(first) = cluster.wait_whole(CLUSTER_RECOVERY_SECONDS).await else {
        return Ok(());
    };
    let repaired = cluster
        .run(&["reinit-stuck"])
        .await
        .map_err(anyhow::Error::msg)?;
    if repaired.trim().is_empty() {
        anyhow::bail!("{first}");
    }
    for line in repaired.lines() {
        println!("          cluster: not streaming, re-cloned from the leader by hand: {line}");
    }
    cluster
        .wait_whole(CLUSTER_RECOVERY_SECONDS)
        .await
        .map_err(|second| anyhow::anyhow!("{second}\n(before the re-clone: {first})"))
}

/// Sets the bank's knobs (`PUT /knobs`).
pub async fn set_bank_knobs(
    http: &reqwest::Client,
    bank_url: &str,
    knobs: &Value,
) -> anyhow::Result<()> {
    let response = http
        .put(format!("{bank_url}/knobs"))
        .json(knobs)
        .send()
        .await?;
    if !response.status().is_success() {
        anyhow::bail!("the bank refused the knobs {knobs}: {}", response.status());
    }
    Ok(())
}

async fn cut_connections(database: &Database) -> anyhow::Result<()> {
    let Database::Postgres(database) = database else {
        return Ok(());
    };
    let mut connection = sqlx::PgConnection::connect(database.url()).await?;
    sqlx::query(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE datname = current_database() AND pid <> pg_backend_pid() AND random() < 0.5",
    )
    .execute(&mut connection)
    .await?;
    Ok(())
}

/// Restarts the machine's PostgreSQL cluster (the newest version under /etc/postgresql), as
/// `scripts/start-postgres.sh` starts it.
async fn restart_postgres() -> anyhow::Result<()> {
    let status = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(
            "pg_ctlcluster --skip-systemctl-redirect \
             \"$(ls /etc/postgresql | sort -V | tail -n 1)\" main restart",
        )
        .status()
        .await
        .context("running pg_ctlcluster")?;
    anyhow::ensure!(status.success(), "pg_ctlcluster restart failed: {status}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(database: DatabaseKind, duration: Duration, replicas: usize) -> Plan {
        Plan {
            duration,
            database,
            replicas,
            cluster_faults: ClusterFault::PROCESS_FAULTS.to_vec(),
            other_faults: true,
        }
    }

    #[test]
    fn a_seed_gives_the_same_schedule_and_the_database_decides_the_faults() {
        let minute = plan(DatabaseKind::Postgres, Duration::from_secs(60), 3);
        let first = schedule(7, &minute);
        assert_eq!(first, schedule(7, &minute));
        assert_ne!(first, schedule(8, &minute));
        assert_eq!(first.len(), 11, "ten faults and one PostgreSQL restart");
        assert!(
            first.windows(2).all(|pair| pair[0].0 <= pair[1].0),
            "in time order"
        );
        assert_eq!(
            first
                .iter()
                .filter(|(_, f)| *f == Fault::RestartPostgres)
                .count(),
            1
        );
        let on_sqlite = schedule(7, &plan(DatabaseKind::Sqlite, Duration::from_secs(600), 1));
        assert!(on_sqlite.iter().all(|(_, fault)| !matches!(
            fault,
            Fault::RestartPostgres | Fault::CutConnections | Fault::KillReplica(1..)
        )));
    }

    #[test]
    fn a_cluster_gets_every_cluster_fault_in_order_and_no_machine_restart() {
        let soak = plan(DatabaseKind::Ha, Duration::from_secs(150), 3);
        let faults = schedule(1, &soak);
        let cluster: Vec<ClusterFault> = faults
            .iter()
            .filter_map(|(_, fault)| match fault {
                Fault::Cluster(fault) => Some(*fault),
                _ => None,
            })
            .collect();
        assert_eq!(cluster, ClusterFault::PROCESS_FAULTS);
        assert!(!faults.iter().any(|(_, f)| *f == Fault::RestartPostgres));

        let control = Plan {
            cluster_faults: vec![ClusterFault::LoseTheTail],
            other_faults: false,
            ..soak
        };
        assert_eq!(
            schedule(1, &control)
                .into_iter()
                .map(|(_, fault)| fault)
                .collect::<Vec<_>>(),
            [Fault::Cluster(ClusterFault::LoseTheTail)]
        );
    }

    #[test]
    fn in_namespaces_every_partition_strikes_once_in_order_each_needing_them() {
        let soak = Plan {
            cluster_faults: ClusterFault::PARTITIONS.to_vec(),
            ..plan(DatabaseKind::Ha, Duration::from_secs(200), 2)
        };
        let cluster: Vec<ClusterFault> = schedule(1, &soak)
            .into_iter()
            .filter_map(|(_, fault)| match fault {
                Fault::Cluster(fault) => Some(fault),
                _ => None,
            })
            .collect();
        assert_eq!(cluster, ClusterFault::PARTITIONS);
        assert!(cluster.iter().all(|fault| fault.needs_namespaces()));
        assert!(
            !ClusterFault::PROCESS_FAULTS
                .iter()
                .any(|fault| fault.needs_namespaces())
        );
    }

    #[test]
    fn bank_faults_change_only_their_knobs() {
        let slow = Fault::BankSlow.bank_knobs().expect("a bank fault");
        assert_eq!(slow["latency_ms"], 3_000);
        assert_eq!(slow["dedupe"], true);
        assert!(Fault::RestartEdge.bank_knobs().is_none());
    }
}
