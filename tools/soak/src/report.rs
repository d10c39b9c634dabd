//! What the soak prints: the schedule before it starts, then the table of faults, traffic and
//! damage, for each change of the cluster's leader how long payments waited for the new one
//! and how the phones were replied to meanwhile, then each violation with the events of the
//! actions around it; and the wait for the system to settle before the books are read.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bank_api::Ledger;

use anyhow::Context;
use time::OffsetDateTime;

use crate::Args;
use crate::audit::{self, Damage, Records, Violation};
use crate::faults::Fault;
use crate::phones::{ActionRecord, Ending, Tally};
use crate::stack::{Database, Stack};

/// A fault as it was carried out: when it began.
#[derive(Debug, Clone, Copy)]
pub struct Struck {
    /// The fault.
    pub fault: Fault,
    /// When it began, on this process's clock (the phones' replies are on it too).
    pub at: Instant,
    /// When it began, on the wall clock (the database's events are on it).
    pub wall: OffsetDateTime,
}

impl Struck {
    /// `fault`, beginning now.
    pub fn now(fault: Fault) -> Struck {
        Struck {
            fault,
            at: Instant::now(),
            wall: OffsetDateTime::now_utc(),
        }
    }
}

/// How often the books are read while settling.
const SETTLE_POLL: Duration = Duration::from_secs(2);

/// Prints the settings and the schedule.
pub fn print_schedule(args: &Args, replicas: usize, schedule: &[(Duration, Fault)]) {
    println!(
        "soak: {} s, database {:?}, {replicas} replica(s), {} phones ({:?}), seed {}",
        args.duration_seconds, args.database, args.phones, args.client, args.seed
    );
    println!("fault schedule ({} faults):", schedule.len());
    for (at, fault) in schedule {
        println!("  {:>6.1} s  {fault:?}", at.as_secs_f64());
    }
}

/// Waits until no key is `started` or `unknown` and every bank movement has its succeeded
/// record (reconciliation and late-debit checks done), or `within` has passed; then the books
/// as they are.
pub async fn settle(
    http: &reqwest::Client,
    stack: &Stack,
    within: Duration,
) -> anyhow::Result<(Ledger, Records)> {
    let deadline = Instant::now() + within;
    let tables = audit::TableReader::open(&stack.database).await?;
    loop {
        let ledger: Ledger = http
            .get(format!("{}/ledger", stack.bank_url))
            .send()
            .await?
            .json()
            .await?;
        let records = tables.read().await?;
        let (_, damage) = audit::audit(&ledger, &records, &[]);
        let settled = damage.unresolved_keys == 0 && damage.orphan_or_lost == 0;
        if settled || Instant::now() >= deadline {
            return Ok((ledger, records));
        }
        tokio::time::sleep(SETTLE_POLL).await;
    }
}

/// Prints the table.
pub fn print_table(
    faults: &BTreeMap<&'static str, usize>,
    tally: &Tally,
    ledger: &Ledger,
    records: &Records,
    damage: Damage,
) {
    println!();
    println!("faults injected:");
    for (kind, count) in faults {
        println!("  {count:>4}  {kind}");
    }
    let attempts: u64 = tally.statuses.values().sum::<u64>() + tally.no_replies;
    let payments = tally
        .actions
        .iter()
        .filter(|action| action.operation == shared::Operation::PayBill)
        .count();
    let count = |status| tally.statuses.get(&status).copied().unwrap_or_default();
    let slowest = tally.actions.iter().map(|action| action.took).max();
    let unresolved = tally
        .actions
        .iter()
        .filter(|action| matches!(action.ending, Ending::Unresolved(_)))
        .count();
    let nothing_charged = tally
        .actions
        .iter()
        .filter(|action| action.ending == Ending::NothingCharged)
        .count();
    println!();
    row("user actions (payments + refunds)", tally.actions.len());
    row("  of which payments", payments);
    row("requests sent", attempts);
    row("  replied as replays", tally.replays);
    row("  409 seen", count(409));
    row("  503 seen", count(503));
    row("  no reply (timeout, cut connection)", tally.no_replies);
    row("payments succeeded (rows)", succeeded(&records.payments));
    row("bank debits", ledger.debits.len());
    row("bank refunds", ledger.refunds.len());
    row("double debits", damage.double_debits);
    row("lost or orphan movements", damage.orphan_or_lost);
    row("unresolved keys", damage.unresolved_keys);
    row("actions resumed after settling", tally.resumed);
    row("actions without a final reply", unresolved);
    row("actions looked up: nothing charged", nothing_charged);
    row(
        "slowest time to an ending",
        slowest.map_or("-".to_owned(), |took| {
            format!("{:.1} s", took.as_secs_f64())
        }),
    );
}

/// For each fault that put another node in the cluster's lead: when Patroni promoted it, when
/// the first claim committed on it, and how the phones were replied to from the fault until then.
pub async fn print_failovers(
    stack: &Stack,
    struck: &[Struck],
    tally: &Tally,
) -> anyhow::Result<()> {
    let Some(cluster) = &stack.cluster else {
        return Ok(());
    };
    let changes: Vec<&Struck> = struck
        .iter()
        .filter(|strike| matches!(strike.fault, Fault::Cluster(fault) if fault.changes_leader()))
        .collect();
    if changes.is_empty() {
        return Ok(());
    }
    let history = cluster
        .run(&["history"])
        .await
        .map_err(anyhow::Error::msg)?;
    let promotions = promotions(&history)?;
    let Database::Postgres(database) = &stack.database else {
        return Ok(());
    };
    let pool = sqlx::PgPool::connect(database.url()).await?;
    println!();
    println!("changes of leader (seconds from the fault):");
    println!(
        "  {:<52} {:>9} {:>12} {:>8} {:>7}",
        "fault", "promoted", "first claim", "replies", "503s"
    );
    for strike in changes {
        let promoted = promotions
            .iter()
            .copied()
            .find(|promoted| *promoted >= strike.wall);
        let after = promoted.unwrap_or(strike.wall).max(strike.wall);
        let first_claim: Option<OffsetDateTime> = sqlx::query_scalar(
            "SELECT min(at) FROM key_trail WHERE event IN ('claimed', 'claimed_again') \
             AND at >= $1",
        )
        .bind(after)
        .fetch_one(&pool)
        .await?;
        let seconds = |at: Option<OffsetDateTime>| {
            at.map_or("-".to_owned(), |at| {
                format!("{:.1}", (at - strike.wall).as_seconds_f64())
            })
        };
        let gap_end = first_claim.map_or(Instant::now(), |at| {
            strike.at + std::time::Duration::try_from(at - strike.wall).unwrap_or_default()
        });
        let in_gap: Vec<Option<u16>> = tally
            .replies
            .iter()
            .filter(|(at, _)| *at >= strike.at && *at <= gap_end)
            .map(|(_, status)| *status)
            .collect();
        let unavailable = in_gap.iter().filter(|status| **status == Some(503)).count();
        println!(
            "  {:<52} {:>9} {:>12} {:>8} {:>6.0}%",
            strike.fault.kind(),
            seconds(promoted),
            seconds(first_claim),
            in_gap.len(),
            100.0 * unavailable as f64 / in_gap.len().max(1) as f64
        );
    }
    Ok(())
}

/// The instants of the cluster's promotions, from `ha-cluster.sh history`'s JSON.
fn promotions(history: &str) -> anyhow::Result<Vec<OffsetDateTime>> {
    let entries: Vec<serde_json::Value> =
        serde_json::from_str(history).context("ha-cluster.sh history is not JSON")?;
    entries
        .iter()
        .map(|entry| {
            let at = entry["Timestamp"].as_str().context("a promotion's time")?;
            OffsetDateTime::parse(at, &time::format_description::well_known::Rfc3339)
                .with_context(|| format!("the promotion time {at}"))
        })
        .collect()
}

/// One line of the table: a label and its value, aligned.
fn row(label: &str, value: impl std::fmt::Display) {
    println!("{label:<46} {value:>10}");
}

fn succeeded(movements: &[audit::Movement]) -> usize {
    movements.iter().filter(|m| m.status == "succeeded").count()
}

/// Prints each violation with the events of the actions around it; or that there are none.
pub fn print_violations(violations: &[Violation], records: &Records, actions: &[ActionRecord]) {
    println!();
    if violations.is_empty() {
        println!("audit: every promise held");
        return;
    }
    println!("audit: {} violation(s)", violations.len());
    for violation in violations {
        println!("- {}: {}", violation.kind, violation.subject);
        for action in audit::actions_around(violation, records, actions) {
            println!(
                "    user {} {} {} ({} paise): {:?} after {} attempt(s)",
                action.user,
                action.operation.name(),
                action.target,
                action.amount_paise,
                action.ending,
                action.attempts
            );
            for event in action.events.iter().rev().take(12).rev() {
                println!("      {event}");
            }
        }
    }
}
