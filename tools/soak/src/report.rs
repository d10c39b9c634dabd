//! What the soak prints: the schedule before it starts, then the table of faults, traffic and
//! damage, a summary of the history (replies by status and problem type, the longest time no
//! payment could be made, overall and around each kind of fault, the problems seen around each
//! kind of fault), for each change of the cluster's leader how long payments waited for the new
//! one and how the phones were replied to meanwhile, then each violation with the events of the
//! actions around it; and the wait for the system to settle before the books are read.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bank_api::Ledger;

use anyhow::Context;
use time::OffsetDateTime;

use crate::Args;
use crate::audit::{self, Damage, Records, Violation};
use crate::faults::Fault;
use crate::history::{Call, HistoryOp};
use crate::phones::{ActionRecord, Ending, Tally};
use crate::stack::{Database, Stack};

/// A fault as it was carried out: when it began and ended.
#[derive(Debug, Clone, Copy)]
pub struct Struck {
    /// The fault.
    pub fault: Fault,
    /// When it began, on this process's clock (the phones' replies are on it too).
    pub at: Instant,
    /// When it began, on the wall clock (the database's events are on it).
    pub wall: OffsetDateTime,
    /// When its effect was waited out (the replica back, the bank's knobs back); `at` until
    /// [`Struck::ended_now`].
    pub ended: Instant,
}

impl Struck {
    /// `fault`, beginning now.
    pub fn now(fault: Fault) -> Struck {
        let at = Instant::now();
        Struck {
            fault,
            at,
            wall: OffsetDateTime::now_utc(),
            ended: at,
        }
    }

    /// The fault, its effect waited out now.
    pub fn ended_now(self) -> Struck {
        Struck {
            ended: Instant::now(),
            ..self
        }
    }
}

/// How long after a fault strikes its replies are put down to it, even if it ended sooner.
const FAULT_AFTERMATH: Duration = Duration::from_secs(10);

/// How often the books are read while settling.
const SETTLE_POLL: Duration = Duration::from_secs(2);

/// Prints the settings and the schedule.
pub fn print_schedule(args: &Args, replicas: usize, schedule: &[(Duration, Fault)]) {
    println!(
        "soak: {} s, database {:?}, network {:?}, {replicas} replica(s), {} phones ({:?}), seed {}",
        args.duration_seconds, args.database, args.network, args.phones, args.client, args.seed
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

/// Prints a summary of the history: requests recorded, replies by status and problem type, the
/// requests without a reply, the slowest reply, the longest time no payment could be made (between the soak's start
/// and `phones_done`), and for each kind of fault the longest such time while one of its
/// strikes lasted and the problems replied around it.
pub fn print_history(
    history: &[HistoryOp],
    (started, phones_done): (Instant, Instant),
    struck: &[Struck],
) {
    println!();
    println!("history: {} requests recorded", history.len());
    for call in [Call::Pay, Call::Refund, Call::LookUp] {
        let count = history.iter().filter(|op| op.call == call).count();
        println!("  {count:>8}  {}", call.name());
    }
    println!("replies by status and problem type:");
    print_reply_counts(history.iter(), "  ");
    let replays = history
        .iter()
        .filter(|op| op.reply.as_ref().is_ok_and(|reply| reply.replayed))
        .count();
    println!("  {replays:>8}  of them marked Idempotent-Replayed");
    let slowest = history
        .iter()
        .filter(|op| op.reply.is_ok())
        .map(|op| op.completed_at - op.invoked_at)
        .max()
        .unwrap_or_default();
    println!("slowest reply: {:.1} s", slowest.as_secs_f64());
    let marks = payment_marks(history, started, phones_done);
    let (longest, from) = longest_without_payment(&marks, started);
    println!(
        "longest time no payment could be made: {:.1} s (from {:.1} s)",
        longest.as_secs_f64(),
        (from - started).as_secs_f64()
    );
    if struck.is_empty() {
        return;
    }
    println!(
        "problems replied while a fault lasted or within {} s of it striking:",
        FAULT_AFTERMATH.as_secs()
    );
    let longest_by_kind = longest_without_payment_by_fault_kind(&marks, struck);
    for (kind, ops) in ops_by_fault_kind(history, struck) {
        let longest = longest_by_kind.get(kind).copied().unwrap_or_default();
        println!(
            "  {kind} (longest time no payment could be made during it: {:.1} s):",
            longest.as_secs_f64()
        );
        print_reply_counts(ops.into_iter().filter(|op| !is_success(op)), "    ");
    }
}

/// Prints how many of `ops` got each status and problem type, and how many no reply.
fn print_reply_counts<'a>(ops: impl Iterator<Item = &'a HistoryOp>, indent: &str) {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for op in ops {
        let label = match &op.reply {
            Ok(reply) => match &reply.problem_type {
                Some(problem_type) => format!("{} {problem_type}", reply.effective_status()),
                None => reply.effective_status().to_string(),
            },
            Err(_) => "no reply (timeout, refused or cut connection)".to_owned(),
        };
        *counts.entry(label).or_default() += 1;
    }
    if counts.is_empty() {
        println!("{indent}    none");
    }
    for (label, count) in counts {
        println!("{indent}{count:>8}  {label}");
    }
}

fn is_success(op: &HistoryOp) -> bool {
    op.reply
        .as_ref()
        .is_ok_and(|reply| (200..300).contains(&reply.effective_status()))
}

/// The instants that end a stretch without a payment, in order: the soak's start, each 201 to a
/// pay, and the end of the last pay, over the pays that ended by `phones_done` (those resumed
/// after settling are left out, as the wait to settle is no outage). The phones pay throughout,
/// so a pay is being tried between any two.
fn payment_marks(history: &[HistoryOp], started: Instant, phones_done: Instant) -> Vec<Instant> {
    let pays: Vec<&HistoryOp> = history
        .iter()
        .filter(|op| op.call == Call::Pay && op.completed_at <= phones_done)
        .collect();
    let mut marks: Vec<Instant> = pays
        .iter()
        .filter(|op| op.reply.as_ref().is_ok_and(|reply| reply.status == 201))
        .map(|op| op.completed_at)
        .collect();
    marks.extend(pays.iter().map(|op| op.completed_at).max());
    marks.push(started);
    marks.sort();
    marks
}

/// The longest stretch between two of `marks` ([`payment_marks`]), and when it began.
fn longest_without_payment(marks: &[Instant], started: Instant) -> (Duration, Instant) {
    marks
        .windows(2)
        .map(|pair| (pair[1] - pair[0], pair[0]))
        .max_by_key(|(gap, _)| *gap)
        .unwrap_or((Duration::ZERO, started))
}

/// For each kind of fault, the longest time no payment could be made while one of its strikes
/// lasted (or within [`FAULT_AFTERMATH`] of it striking): the stretches between two of `marks`
/// ([`payment_marks`]), each cut to the strike's window, so an outage the next fault causes
/// right after it is not put down to it.
fn longest_without_payment_by_fault_kind(
    marks: &[Instant],
    struck: &[Struck],
) -> BTreeMap<&'static str, Duration> {
    let mut by_kind: BTreeMap<&'static str, Duration> = BTreeMap::new();
    for strike in struck {
        let until = strike.ended.max(strike.at + FAULT_AFTERMATH);
        let longest = marks
            .windows(2)
            .filter(|pair| pair[1] > strike.at && pair[0] < until)
            .map(|pair| pair[1].min(until) - pair[0].max(strike.at))
            .max()
            .unwrap_or_default();
        let kind = by_kind.entry(strike.fault.kind()).or_default();
        *kind = (*kind).max(longest);
    }
    by_kind
}

/// For each kind of fault, the requests that ended while one of its kind lasted or within
/// [`FAULT_AFTERMATH`] of it striking. A simple attribution: a reply in two faults' windows is
/// put down to both, and a fault's effect may outlast its window (a failover's) or a reply in
/// it may have another cause.
fn ops_by_fault_kind<'a>(
    history: &'a [HistoryOp],
    struck: &[Struck],
) -> BTreeMap<&'static str, Vec<&'a HistoryOp>> {
    let mut by_kind: BTreeMap<&'static str, Vec<&HistoryOp>> = BTreeMap::new();
    for op in history {
        let kinds: std::collections::BTreeSet<&'static str> = struck
            .iter()
            .filter(|strike| {
                let until = strike.ended.max(strike.at + FAULT_AFTERMATH);
                op.completed_at >= strike.at && op.completed_at <= until
            })
            .map(|strike| strike.fault.kind())
            .collect();
        for kind in kinds {
            by_kind.entry(kind).or_default().push(op);
        }
    }
    by_kind
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

#[cfg(test)]
mod tests {
    use crate::history::RecordedReply;

    use super::*;

    /// A pay replied `status` `second` seconds after `start`.
    fn pay(start: Instant, second: u64, status: u16) -> HistoryOp {
        let body = serde_json::Value::Null;
        HistoryOp {
            user: 1,
            key: format!("k{second}"),
            call: Call::Pay,
            target: "soak-1-1".to_owned(),
            invoked_at: start,
            completed_at: start + Duration::from_secs(second),
            reply: Ok(RecordedReply::read(Call::Pay, status, false, &body)),
        }
    }

    #[test]
    fn the_longest_time_without_a_payment_runs_between_201s_and_leaves_out_the_settling() {
        let start = Instant::now();
        let history = [
            pay(start, 2, 201),
            pay(start, 3, 201),
            pay(start, 5, 503),
            pay(start, 9, 201),
            pay(start, 11, 503),
            // Resumed after settling, past the phones' end.
            pay(start, 100, 201),
        ];
        let phones_done = start + Duration::from_secs(20);
        let marks = payment_marks(&history, start, phones_done);
        assert_eq!(
            longest_without_payment(&marks, start),
            (Duration::from_secs(6), start + Duration::from_secs(3))
        );
        let failing_to_the_end = [pay(start, 2, 201), pay(start, 12, 503)];
        let marks = payment_marks(&failing_to_the_end, start, phones_done);
        assert_eq!(
            longest_without_payment(&marks, start),
            (Duration::from_secs(10), start + Duration::from_secs(2))
        );
    }

    #[test]
    fn a_faults_longest_time_without_a_payment_is_cut_to_its_window() {
        let start = Instant::now();
        let history = [
            pay(start, 2, 201),
            pay(start, 10, 201),
            pay(start, 40, 201),
            pay(start, 41, 201),
            pay(start, 100, 201),
        ];
        let marks = payment_marks(&history, start, start + Duration::from_secs(200));
        let struck_at = |second: u64, lasted: u64| {
            let mut strike = Struck::now(Fault::BankSlow);
            strike.at = start + Duration::from_secs(second);
            strike.ended = strike.at + Duration::from_secs(lasted);
            strike
        };
        let short = struck_at(45, 0);
        assert_eq!(
            longest_without_payment_by_fault_kind(&marks, &[short])[short.fault.kind()],
            Duration::from_secs(10),
            "from its strike to the end of its aftermath, not to the 201 at 100 s"
        );
        let long = struck_at(5, 40);
        assert_eq!(
            longest_without_payment_by_fault_kind(&marks, &[short, long])[short.fault.kind()],
            Duration::from_secs(30),
            "the longest of the kind's strikes: from 10 s to 40 s, while the long one lasted"
        );
    }
}
