//! One row of the result table: what one client did to the night, counted where it counts
//! (debits at the bank's ledger, unresolved keys in the backend's table), and the table itself.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use bank_api::LedgerEntry;
use serde::Serialize;

use crate::phones::{ClientKind, PhoneResult, PhoneView};

/// The outcome of one client's run.
#[derive(Debug, Clone, Serialize)]
pub struct Tally {
    /// Which client.
    pub client: ClientKind,
    /// User actions: one bill payment per customer.
    pub payments: usize,
    /// Payment requests sent by all phones.
    pub attempts: u64,
    /// 409 `request-in-progress` replies the phones received (a retry that found the first
    /// attempt still running).
    pub in_progress_409s: u64,
    /// Debits the bank executed for these customers.
    pub bank_debits: u64,
    /// Debits beyond each customer's first: the double debits (none for a client that keeps
    /// its key).
    pub double_debits: u64,
    /// Customers with more than one debit for their one bill.
    pub debited_twice: u64,
    /// Paise debited beyond each customer's first debit.
    pub extra_paise: u64,
    /// Keys still `started` or `unknown` after reconciliation.
    pub unresolved_keys: u64,
    /// Phones that showed "paid".
    pub paid: u64,
    /// Phones that showed "declined".
    pub declined: u64,
    /// Phones that showed another refusal.
    pub refused: u64,
    /// Phones left without a final reply.
    pub no_final_reply: u64,
    /// The median time a phone took from its first attempt to its final reply, in seconds of
    /// the night (phones without a final reply not counted).
    pub median_final_seconds: f64,
    /// The longest any phone took from its first attempt to its final reply, in seconds of
    /// the night (phones without a final reply not counted).
    pub slowest_final_seconds: f64,
}

impl Tally {
    /// Counts a run from the phones' results, the bank's debits by account, and the keys left.
    pub fn count(
        client: ClientKind,
        results: &[PhoneResult],
        debits_by_account: &BTreeMap<String, Vec<LedgerEntry>>,
        unresolved_keys: u64,
    ) -> Tally {
        let views = |view: PhoneView| results.iter().filter(|r| r.view == view).count() as u64;
        let repeats = debits_by_account.values().filter(|debits| debits.len() > 1);
        let mut final_seconds: Vec<f64> = results
            .iter()
            .filter(|r| r.view != PhoneView::NoFinalReply)
            .map(|r| r.took.as_secs_f64())
            .collect();
        final_seconds.sort_by(f64::total_cmp);
        Tally {
            client,
            payments: results.len(),
            attempts: results.iter().map(|r| r.sent_at.len() as u64).sum(),
            in_progress_409s: results.iter().map(|r| u64::from(r.in_progress_409s)).sum(),
            bank_debits: debits_by_account.values().map(|d| d.len() as u64).sum(),
            double_debits: repeats.clone().map(|d| d.len() as u64 - 1).sum(),
            debited_twice: repeats.clone().count() as u64,
            extra_paise: repeats
                .flat_map(|debits| &debits[1..])
                .map(|debit| debit.amount_paise)
                .sum(),
            unresolved_keys,
            paid: views(PhoneView::Paid),
            declined: views(PhoneView::Declined),
            refused: views(PhoneView::Refused),
            no_final_reply: views(PhoneView::NoFinalReply),
            median_final_seconds: median(&final_seconds),
            slowest_final_seconds: final_seconds.last().copied().unwrap_or(0.0),
        }
    }
}

/// The middle of `sorted` (the mean of the two middles for an even count); 0 when empty.
fn median(sorted: &[f64]) -> f64 {
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// The side-by-side table (times to a final reply in seconds of the night), with the phones'
/// view below it.
pub fn render(tallies: &[Tally]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<35} {:>8} {:>8} {:>5} {:>11} {:>13} {:>13} {:>16} {:>15} {:>12} {:>13}",
        "client",
        "payments",
        "attempts",
        "409s",
        "bank debits",
        "double debits",
        "debited twice",
        "extra debited",
        "unresolved keys",
        "median final",
        "slowest final"
    );
    for t in tallies {
        let _ = writeln!(
            out,
            "{:<35} {:>8} {:>8} {:>5} {:>11} {:>13} {:>13} {:>16} {:>15} {:>10.1} s {:>11.1} s",
            t.client.label(),
            t.payments,
            t.attempts,
            t.in_progress_409s,
            t.bank_debits,
            t.double_debits,
            t.debited_twice,
            rupees(t.extra_paise),
            t.unresolved_keys,
            t.median_final_seconds,
            t.slowest_final_seconds
        );
    }
    let _ = writeln!(out, "\nwhat the phones showed:");
    for t in tallies {
        let _ = writeln!(
            out,
            "  {:<35} paid {}, declined {}, refused {}, no final reply {}",
            t.client.label(),
            t.paid,
            t.declined,
            t.refused,
            t.no_final_reply
        );
    }
    out
}

/// `Rs 12,345.67`.
pub fn rupees(paise: u64) -> String {
    let whole = (paise / 100).to_string();
    let mut grouped = String::new();
    for (i, digit) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    format!("Rs {grouped}.{:02}", paise % 100)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn result(attempts: u32, view: PhoneView, took_seconds: u64) -> PhoneResult {
        PhoneResult {
            sent_at: vec![Duration::ZERO; attempts as usize],
            in_progress_409s: attempts - 1,
            view,
            took: Duration::from_secs(took_seconds),
        }
    }

    fn debits(account: &str, amounts: &[u64]) -> (String, Vec<LedgerEntry>) {
        let entries = amounts
            .iter()
            .enumerate()
            .map(|(n, &amount_paise)| LedgerEntry {
                reference: format!("{account}-{n}"),
                amount_paise,
                account: account.to_owned(),
                debit_reference: None,
                at: time::OffsetDateTime::UNIX_EPOCH,
            })
            .collect();
        (account.to_owned(), entries)
    }

    #[test]
    fn doubles_and_extra_amount_are_counted_per_account() {
        let results = [
            result(3, PhoneView::NoFinalReply, 90),
            result(1, PhoneView::Paid, 12),
            result(1, PhoneView::Declined, 2),
        ];
        let debits = BTreeMap::from([
            debits("a@ok", &[230_000, 230_000, 230_000]),
            debits("b@ok", &[50_000]),
            debits("c@ok", &[]),
        ]);
        let tally = Tally::count(ClientKind::NoKey, &results, &debits, 2);
        assert_eq!(
            (
                tally.attempts,
                tally.bank_debits,
                tally.double_debits,
                tally.debited_twice,
                tally.extra_paise
            ),
            (5, 4, 2, 1, 460_000)
        );
        assert_eq!(tally.in_progress_409s, 2);
        assert_eq!(
            (tally.paid, tally.declined, tally.no_final_reply),
            (1, 1, 1)
        );
        assert_eq!(
            (tally.median_final_seconds, tally.slowest_final_seconds),
            (7.0, 12.0),
            "the phone that gave up is not a final reply"
        );
        assert_eq!(rupees(41_000_050), "Rs 410,000.50");
        assert_eq!(rupees(0), "Rs 0.00");
    }

    #[test]
    fn the_median_time_is_the_middle_final_reply() {
        let results: Vec<PhoneResult> = [30, 1, 4, 2, 600]
            .into_iter()
            .map(|seconds| result(1, PhoneView::Paid, seconds))
            .chain([result(9, PhoneView::NoFinalReply, 5)])
            .collect();
        let tally = Tally::count(ClientKind::RuleFollowing, &results, &BTreeMap::new(), 0);
        assert_eq!(
            (tally.median_final_seconds, tally.slowest_final_seconds),
            (4.0, 600.0)
        );
        assert_eq!(median(&[]), 0.0);
    }
}
