//! The soak's history: every request a phone sent, as it went over the wire (when it left, when
//! its reply came or the phone gave up on it, and what the reply said), and [`check`], a checker
//! over it, the bank's ledger and the backend's books, in the way Jepsen checks a history.
//! [`check`] is a pure function, so it is tested on small histories made to break one rule each.
//!
//! What must hold (each break is a [`Violation`] naming the reference, key or reply):
//! - at most one money movement per claim: no bank reference is debited, or refunded, twice;
//! - every 201 is in the ledger: a debit (for a refund, a refund) under the reply's bank
//!   reference, of the reply's amount;
//! - the final replies to one key (2xx or 402, sent or read back by a look-up) agree: the same
//!   status, payment or refund id, bank reference and amount; so a 201 seen before a failover
//!   is never followed by another 201 (an acknowledged payment lost and made again);
//! - no acknowledged movement is lost: every 201's bank reference is `succeeded` in the books;
//! - every refusal is documented: a non-2xx reply carries a problem body whose `type` is one of
//!   [`ProblemKind::ALL`], with the status that kind documents.
//!
//! That every key is final once the faults heal is the audit's ([`crate::audit`]), not repeated
//! here.

use std::collections::BTreeMap;
use std::time::Instant;

use bank_api::{Ledger, LedgerEntry};
use serde_json::Value;
use shared::{Operation, ProblemKind};

use crate::audit::{Records, Violation};

/// What a recorded request asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Call {
    /// `POST /v1/bills/{bill_id}/pay`.
    Pay,
    /// `POST /v1/payments/{payment_id}/refunds`.
    Refund,
    /// `GET /v1/idempotency-keys/{key}`.
    LookUp,
}

impl Call {
    /// The call that sends `operation`.
    pub fn sending(operation: Operation) -> Call {
        match operation {
            Operation::PayBill => Call::Pay,
            Operation::RefundPayment => Call::Refund,
        }
    }

    /// The call's name, for the report.
    pub fn name(self) -> &'static str {
        match self {
            Call::Pay => "pay",
            Call::Refund => "refund",
            Call::LookUp => "look-up",
        }
    }
}

/// One request as it happened.
#[derive(Debug, Clone)]
pub struct HistoryOp {
    /// The phone's user.
    pub user: u64,
    /// The `Idempotency-Key` it carried (a look-up: the key it asked about).
    pub key: String,
    /// What it asked for.
    pub call: Call,
    /// The bill (pay) or payment (refund) it was for; empty for a look-up, which names only
    /// the key.
    pub target: String,
    /// When it was sent.
    pub invoked_at: Instant,
    /// When its reply came, or when the phone stopped waiting for one.
    pub completed_at: Instant,
    /// The reply; or, when none came (a timeout, a refused or cut connection), why.
    pub reply: Result<RecordedReply, String>,
}

/// What a reply said, as far as the checker cares.
#[derive(Debug, Clone)]
pub struct RecordedReply {
    /// The HTTP status.
    pub status: u16,
    /// Whether it carried `Idempotent-Replayed: true`.
    pub replayed: bool,
    /// A look-up of a finished key: the saved reply's status. The fields below are then the
    /// saved reply's.
    pub saved_status: Option<u16>,
    /// The problem's `type`, when the (saved) reply is not 2xx and has one.
    pub problem_type: Option<String>,
    /// The payment's id, when the body names one.
    pub payment_id: Option<String>,
    /// The refund's id, when the body names one.
    pub refund_id: Option<String>,
    /// The bank reference, when the body names one.
    pub bank_reference: Option<String>,
    /// The amount, when the body names one.
    pub amount_paise: Option<u64>,
}

impl RecordedReply {
    /// Reads a reply to `call`: its status, its replay mark and its JSON body (for a look-up of
    /// a finished key, the saved reply it carries).
    pub fn read(call: Call, status: u16, replayed: bool, body: &Value) -> RecordedReply {
        let saved_status = (call == Call::LookUp && status == 200 && body["state"] == "done")
            .then(|| body["status"].as_u64().and_then(|s| u16::try_from(s).ok()))
            .flatten();
        let body = if saved_status.is_some() {
            &body["reply"]
        } else {
            body
        };
        let text = |field: &str| body[field].as_str().map(str::to_owned);
        let effective_status = saved_status.unwrap_or(status);
        RecordedReply {
            status,
            replayed,
            saved_status,
            problem_type: text("type").filter(|_| !is_success(effective_status)),
            payment_id: text("payment_id"),
            refund_id: text("refund_id"),
            bank_reference: text("bank_reference"),
            amount_paise: body["amount_paise"].as_u64(),
        }
    }

    /// The status of what the reply reports: the saved reply's for a look-up of a finished key,
    /// else its own.
    pub fn effective_status(&self) -> u16 {
        self.saved_status.unwrap_or(self.status)
    }

    /// What a final reply says happened, for comparing the replies to one key.
    fn claim(&self) -> String {
        format!(
            "{} payment {} refund {} reference {} amount {}",
            self.effective_status(),
            self.payment_id.as_deref().unwrap_or("-"),
            self.refund_id.as_deref().unwrap_or("-"),
            self.bank_reference.as_deref().unwrap_or("-"),
            self.amount_paise
                .map_or("-".to_owned(), |amount| amount.to_string())
        )
    }
}

impl HistoryOp {
    /// The reply, if it is final: a 2xx or 402 to a pay or refund, or a look-up's saved reply.
    pub fn final_reply(&self) -> Option<&RecordedReply> {
        let reply = self.reply.as_ref().ok()?;
        let is_final = match self.call {
            Call::LookUp => reply.saved_status.is_some(),
            Call::Pay | Call::Refund => is_success(reply.status) || reply.status == 402,
        };
        is_final.then_some(reply)
    }

    /// The request, for a violation's subject.
    fn describe(&self) -> String {
        let call = match self.call {
            Call::LookUp => self.call.name().to_owned(),
            Call::Pay | Call::Refund => format!("{} {}", self.call.name(), self.target),
        };
        format!("user {} {call} (key {})", self.user, self.key)
    }
}

fn is_success(status: u16) -> bool {
    (200..300).contains(&status)
}

/// Checks the history against the ledger and the books; every violation found, each once.
pub fn check(history: &[HistoryOp], ledger: &Ledger, records: &Records) -> Vec<Violation> {
    let mut violations = Vec::new();
    let mut flag = |kind: &'static str, subject: String| {
        let violation = Violation { kind, subject };
        if !violations.contains(&violation) {
            violations.push(violation);
        }
    };
    for (reference, what) in moved_twice(ledger) {
        flag(what, reference);
    }
    for op in history {
        let Some(reply) = op
            .final_reply()
            .filter(|reply| reply.effective_status() == 201)
        else {
            continue;
        };
        let Some(reference) = reply.bank_reference.clone() else {
            flag("a 201 without a bank reference", op.describe());
            continue;
        };
        if !in_ledger(reply, &reference, ledger) {
            flag(
                "a 201 without its movement in the ledger",
                reference.clone(),
            );
        }
        if !succeeded_in_books(reply, &reference, records) {
            flag(
                "a 201 whose movement is not succeeded in the books",
                reference,
            );
        }
    }
    for (key, first, later) in disagreements(history) {
        flag(
            "final replies to one key disagree",
            format!("key {key}: {} then {}", first.claim(), later.claim()),
        );
    }
    for (kind, subject) in undocumented(history) {
        flag(kind, subject);
    }
    violations
}

/// The references the ledger debited, or refunded, more than once, with the violation's kind.
fn moved_twice(ledger: &Ledger) -> Vec<(String, &'static str)> {
    let mut twice = Vec::new();
    for (entries, what) in [
        (&ledger.debits, "a bank reference debited more than once"),
        (&ledger.refunds, "a bank reference refunded more than once"),
    ] {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for entry in entries {
            *counts.entry(entry.reference.as_str()).or_default() += 1;
        }
        twice.extend(
            counts
                .into_iter()
                .filter(|(_, count)| *count > 1)
                .map(|(reference, _)| (reference.to_owned(), what)),
        );
    }
    twice
}

/// Whether a 201 is a refund's (its body names a refund), not a payment's.
fn is_refund(reply: &RecordedReply) -> bool {
    reply.refund_id.is_some()
}

/// Whether the ledger moved the 201's amount under its reference.
fn in_ledger(reply: &RecordedReply, reference: &str, ledger: &Ledger) -> bool {
    let entries: &[LedgerEntry] = if is_refund(reply) {
        &ledger.refunds
    } else {
        &ledger.debits
    };
    entries
        .iter()
        .any(|entry| entry.reference == reference && Some(entry.amount_paise) == reply.amount_paise)
}

/// Whether the books hold the 201's movement as `succeeded`.
fn succeeded_in_books(reply: &RecordedReply, reference: &str, records: &Records) -> bool {
    let books = if is_refund(reply) {
        &records.refunds
    } else {
        &records.payments
    };
    books
        .iter()
        .any(|movement| movement.reference == reference && movement.status == "succeeded")
}

/// For each key whose final replies do not all agree: the key, its first final reply and the
/// first later one that says otherwise (in the order they came).
fn disagreements(history: &[HistoryOp]) -> Vec<(&str, &RecordedReply, &RecordedReply)> {
    let mut by_key: BTreeMap<&str, Vec<(Instant, &RecordedReply)>> = BTreeMap::new();
    for op in history {
        if let Some(reply) = op.final_reply() {
            by_key
                .entry(op.key.as_str())
                .or_default()
                .push((op.completed_at, reply));
        }
    }
    by_key
        .into_iter()
        .filter_map(|(key, mut replies)| {
            replies.sort_by_key(|(at, _)| *at);
            let (_, first) = replies[0];
            let (_, later) = replies
                .iter()
                .find(|(_, reply)| reply.claim() != first.claim())?;
            Some((key, first, *later))
        })
        .collect()
}

/// The replies that break the documented refusals, grouped by status and `type`: the
/// violation's kind and a subject with their count and the first of them.
fn undocumented(history: &[HistoryOp]) -> Vec<(&'static str, String)> {
    let mut groups: BTreeMap<(&'static str, u16, Option<&str>), (usize, &HistoryOp)> =
        BTreeMap::new();
    for op in history {
        let Ok(reply) = &op.reply else { continue };
        let status = reply.effective_status();
        let Some(kind) = undocumented_kind(status, reply.problem_type.as_deref()) else {
            continue;
        };
        groups
            .entry((kind, status, reply.problem_type.as_deref()))
            .or_insert((0, op))
            .0 += 1;
    }
    groups
        .into_iter()
        .map(|((kind, status, problem_type), (count, first))| {
            let subject = format!(
                "{status} {}: {count} reply(ies), the first to {}",
                problem_type.unwrap_or("without a problem body"),
                first.describe()
            );
            (kind, subject)
        })
        .collect()
}

/// Why a reply with `status` and `problem_type` breaks the documented refusals, if it does.
fn undocumented_kind(status: u16, problem_type: Option<&str>) -> Option<&'static str> {
    if is_success(status) {
        return None;
    }
    let Some(problem_type) = problem_type else {
        return Some("an undocumented reply");
    };
    match ProblemKind::ALL
        .into_iter()
        .find(|kind| kind.type_uri() == problem_type)
    {
        None => Some("a problem of an undocumented type"),
        Some(kind) if kind.status() != status => {
            Some("a problem with another status than its type documents")
        }
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::audit::Movement;
    use crate::audit::tests::entry;

    fn movement(reference: &str, amount: i64, of: &str) -> Movement {
        Movement {
            reference: reference.to_owned(),
            amount_paise: amount,
            status: "succeeded".to_owned(),
            of: of.to_owned(),
        }
    }

    /// The books of one payment of 500 (pay-1) and its refund of 200 (refund-1).
    fn clean_books() -> (Ledger, Records) {
        let ledger = Ledger {
            debits: vec![entry("pay-1", 500, None)],
            refunds: vec![entry("refund-1", 200, Some("pay-1"))],
        };
        let records = Records {
            payments: vec![movement("pay-1", 500, "soak-1-1")],
            refunds: vec![movement("refund-1", 200, "pay-1")],
            unfinished_keys: Vec::new(),
        };
        (ledger, records)
    }

    /// A request with `key`, replied `second` seconds into the soak.
    fn op(key: &str, call: Call, second: u64, reply: Result<RecordedReply, String>) -> HistoryOp {
        let start = Instant::now();
        HistoryOp {
            user: 1,
            key: key.to_owned(),
            call,
            target: "soak-1-1".to_owned(),
            invoked_at: start,
            completed_at: start + Duration::from_secs(second),
            reply,
        }
    }

    fn reply(call: Call, status: u16, body: Value) -> Result<RecordedReply, String> {
        Ok(RecordedReply::read(call, status, false, &body))
    }

    fn paid(reference: &str, amount: u64) -> Result<RecordedReply, String> {
        let body =
            json!({ "payment_id": "1", "bank_reference": reference, "amount_paise": amount });
        reply(Call::Pay, 201, body)
    }

    fn problem(status: u16, slug: &str) -> Value {
        json!({ "type": format!("/problems/{slug}"), "status": status })
    }

    /// A payment retried through a 409, a lost reply and a replay, then refunded and looked up.
    fn clean_history() -> Vec<HistoryOp> {
        let refunded = json!({
            "refund_id": "2", "payment_id": "1", "bank_reference": "refund-1", "amount_paise": 200
        });
        let done = json!({ "state": "done", "status": 201, "reply": refunded.clone() });
        vec![
            op(
                "k1",
                Call::Pay,
                1,
                reply(Call::Pay, 409, problem(409, "request-in-progress")),
            ),
            op("k1", Call::Pay, 2, Err("no reply in time".to_owned())),
            op("k1", Call::Pay, 3, paid("pay-1", 500)),
            op("k1", Call::Pay, 4, paid("pay-1", 500)),
            op("k2", Call::Refund, 5, reply(Call::Refund, 201, refunded)),
            op("k2", Call::LookUp, 6, reply(Call::LookUp, 200, done)),
            op(
                "k3",
                Call::LookUp,
                7,
                reply(Call::LookUp, 404, problem(404, "not-found")),
            ),
            op(
                "k4",
                Call::Pay,
                8,
                reply(Call::Pay, 402, problem(402, "payment-declined")),
            ),
        ]
    }

    fn kinds(violations: &[Violation]) -> Vec<&'static str> {
        violations.iter().map(|violation| violation.kind).collect()
    }

    #[test]
    fn a_history_that_agrees_with_the_books_passes() {
        let (ledger, records) = clean_books();
        assert_eq!(check(&clean_history(), &ledger, &records), []);
    }

    #[test]
    fn a_reference_debited_twice_fails_it() {
        let (mut ledger, records) = clean_books();
        ledger.debits.push(entry("pay-1", 500, None));
        assert_eq!(
            check(&clean_history(), &ledger, &records),
            [Violation {
                kind: "a bank reference debited more than once",
                subject: "pay-1".to_owned(),
            }]
        );
    }

    #[test]
    fn a_reference_refunded_twice_fails_it() {
        let (mut ledger, records) = clean_books();
        ledger.refunds.push(entry("refund-1", 200, Some("pay-1")));
        assert_eq!(
            kinds(&check(&clean_history(), &ledger, &records)),
            ["a bank reference refunded more than once"]
        );
    }

    #[test]
    fn a_201_of_another_amount_than_the_ledger_moved_fails_it() {
        let (mut ledger, records) = clean_books();
        ledger.debits[0].amount_paise = 400;
        assert_eq!(
            kinds(&check(&clean_history(), &ledger, &records)),
            ["a 201 without its movement in the ledger"]
        );
    }

    #[test]
    fn a_key_replied_201_twice_with_different_payments_fails_it() {
        let (mut ledger, mut records) = clean_books();
        // Acknowledged as pay-1, lost in a failover, and paid again as pay-2.
        ledger.debits.push(entry("pay-2", 500, None));
        records.payments.push(movement("pay-2", 500, "soak-1-1"));
        let mut history = clean_history();
        history.push(op("k1", Call::Pay, 9, paid("pay-2", 500)));
        let violations = check(&history, &ledger, &records);
        assert_eq!(kinds(&violations), ["final replies to one key disagree"]);
        assert!(violations[0].subject.contains("reference pay-1"));
        assert!(
            violations[0]
                .subject
                .contains("then 201 payment 1 refund - reference pay-2")
        );
    }

    #[test]
    fn a_201_whose_payment_is_not_succeeded_in_the_books_fails_it() {
        let (ledger, mut records) = clean_books();
        records.payments[0].status = "void".to_owned();
        assert_eq!(
            check(&clean_history(), &ledger, &records),
            [Violation {
                kind: "a 201 whose movement is not succeeded in the books",
                subject: "pay-1".to_owned(),
            }]
        );
    }

    #[test]
    fn a_problem_of_an_undocumented_type_fails_it() {
        let (ledger, records) = clean_books();
        let mut history = clean_history();
        history.push(op(
            "k5",
            Call::Pay,
            9,
            reply(Call::Pay, 503, problem(503, "gone-fishing")),
        ));
        history.push(op(
            "k6",
            Call::Pay,
            10,
            reply(Call::Pay, 503, problem(503, "gone-fishing")),
        ));
        let violations = check(&history, &ledger, &records);
        assert_eq!(kinds(&violations), ["a problem of an undocumented type"]);
        assert!(
            violations[0]
                .subject
                .starts_with("503 /problems/gone-fishing: 2 reply(ies), the first to user 1 pay"),
            "{violations:?}"
        );
    }

    #[test]
    fn a_problem_with_another_status_than_its_type_fails_it() {
        let (ledger, records) = clean_books();
        let mut history = clean_history();
        let wrong = problem(500, "request-in-progress");
        history.push(op("k5", Call::Pay, 9, reply(Call::Pay, 500, wrong)));
        assert_eq!(
            kinds(&check(&history, &ledger, &records)),
            ["a problem with another status than its type documents"]
        );
    }

    #[test]
    fn a_refusal_without_a_problem_body_fails_it() {
        let (ledger, records) = clean_books();
        let mut history = clean_history();
        let plain = Value::String("Bad Gateway".to_owned());
        history.push(op("k5", Call::Pay, 9, reply(Call::Pay, 502, plain)));
        assert_eq!(
            kinds(&check(&history, &ledger, &records)),
            ["an undocumented reply"]
        );
    }

    #[test]
    fn a_look_up_reads_the_saved_reply_of_a_finished_key() {
        let body = json!({
            "state": "done",
            "status": 402,
            "reply": problem(402, "payment-declined"),
            "expires_at": "2026-12-03T10:00:00Z"
        });
        let read = RecordedReply::read(Call::LookUp, 200, false, &body);
        assert_eq!(read.effective_status(), 402);
        assert_eq!(
            read.problem_type.as_deref(),
            Some("/problems/payment-declined")
        );
        let started = RecordedReply::read(Call::LookUp, 200, false, &json!({ "state": "started" }));
        assert_eq!((started.saved_status, started.problem_type), (None, None));
    }
}
