//! The audit at the end of a soak: every record against the bank's ledger and every user action
//! against what was recorded, in the way Jepsen checks a database's promises. [`audit`] is a
//! pure function of the books and the actions, so it is tested on books made to be wrong.
//!
//! What must hold (each break is a [`Violation`] naming the action or reference):
//! - every debit in the bank's ledger belongs to exactly one `succeeded` payment with the same
//!   reference and amount, and every `succeeded` payment has exactly one debit (no orphan, no
//!   lost movement); the same for refunds;
//! - no user action (a bill of its own) has more than one debit: no double charge;
//! - refunds never give back more than their payment;
//! - every payment or refund a phone was told succeeded (201) is in the books, `succeeded`
//!   under the reference it was told: an acknowledged commit is never lost (a failover);
//! - no key is left `started` or `unknown`;
//! - every action ended with a final reply, or past its deadline the status look-up said
//!   nothing was charged.

use std::collections::HashMap;

use bank_api::Ledger;
use shared::Operation;

use crate::phones::{ActionRecord, Ending};
use crate::stack::Database;

/// A payment or refund row, as the audit reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Movement {
    /// The bank reference.
    pub reference: String,
    /// The amount.
    pub amount_paise: i64,
    /// `pending`, `succeeded`, `declined` or `void`.
    pub status: String,
    /// For a payment its bill; for a refund the reference of its payment.
    pub of: String,
}

/// What the backend's tables hold.
#[derive(Debug, Clone, Default)]
pub struct Records {
    /// Every payment.
    pub payments: Vec<Movement>,
    /// Every refund.
    pub refunds: Vec<Movement>,
    /// Keys still `started` or `unknown`: (user, state).
    pub unfinished_keys: Vec<(String, String)>,
}

/// One broken promise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// What broke.
    pub kind: &'static str,
    /// The reference, bill or user it concerns.
    pub subject: String,
}

/// The counts the report prints beside the violations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Damage {
    /// Bills debited more than once.
    pub double_debits: usize,
    /// Debits and refunds at the bank with no succeeded movement, and succeeded movements the
    /// bank has no record of.
    pub orphan_or_lost: usize,
    /// Keys left `started` or `unknown`.
    pub unresolved_keys: usize,
}

/// Checks the books and the actions; every violation found.
pub fn audit(
    ledger: &Ledger,
    records: &Records,
    actions: &[ActionRecord],
) -> (Vec<Violation>, Damage) {
    let mut violations = Vec::new();
    let mut damage = Damage::default();
    let mut flag =
        |kind: &'static str, subject: String| violations.push(Violation { kind, subject });

    for (entries, movements, what) in [
        (&ledger.debits, &records.payments, "debit"),
        (&ledger.refunds, &records.refunds, "refund"),
    ] {
        let succeeded: Vec<&Movement> = movements
            .iter()
            .filter(|m| m.status == "succeeded")
            .collect();
        for entry in entries {
            let matching = succeeded
                .iter()
                .filter(|m| {
                    m.reference == entry.reference
                        && m.amount_paise.unsigned_abs() == entry.amount_paise
                })
                .count();
            if matching != 1 {
                damage.orphan_or_lost += 1;
                flag(orphan(what), entry.reference.clone());
            }
        }
        for movement in &succeeded {
            if entries
                .iter()
                .filter(|entry| entry.reference == movement.reference)
                .count()
                != 1
            {
                damage.orphan_or_lost += 1;
                flag(lost(what), movement.reference.clone());
            }
        }
    }

    let mut debits_per_bill: HashMap<&str, usize> = HashMap::new();
    for payment in &records.payments {
        if ledger.debits_for(&payment.reference).next().is_some() {
            *debits_per_bill.entry(payment.of.as_str()).or_default() += 1;
        }
    }
    for (bill, debits) in debits_per_bill {
        if debits > 1 {
            damage.double_debits += 1;
            flag("one user action debited more than once", bill.to_owned());
        }
    }
    let payment_amounts: HashMap<&str, i64> = records
        .payments
        .iter()
        .map(|payment| (payment.reference.as_str(), payment.amount_paise))
        .collect();
    for debit in &ledger.debits {
        let refunded: u64 = ledger
            .refunds_of(&debit.reference)
            .map(|r| r.amount_paise)
            .sum();
        let paid = payment_amounts
            .get(debit.reference.as_str())
            .copied()
            .unwrap_or_default();
        if refunded > paid.unsigned_abs() {
            flag("refunds exceed their payment", debit.reference.clone());
        }
    }

    for action in actions {
        let Ending::Final { status: 201, body } = &action.ending else {
            continue;
        };
        let reference = body["bank_reference"].as_str().unwrap_or_default();
        let books = match action.operation {
            Operation::PayBill => &records.payments,
            Operation::RefundPayment => &records.refunds,
        };
        if !books
            .iter()
            .any(|m| m.reference == reference && m.status == "succeeded")
        {
            flag(
                "an acknowledged movement missing from the books",
                reference.to_owned(),
            );
        }
    }
    for (user, state) in &records.unfinished_keys {
        damage.unresolved_keys += 1;
        flag("key left unresolved", format!("user {user}, state {state}"));
    }
    for action in actions {
        if let Ending::Unresolved(why) = &action.ending {
            flag(
                "user action without a final reply",
                format!(
                    "user {} {} {}: {why}",
                    action.user,
                    action.operation.name(),
                    action.target
                ),
            );
        }
    }
    (violations, damage)
}

fn orphan(what: &str) -> &'static str {
    if what == "debit" {
        "bank debit without exactly one succeeded payment"
    } else {
        "bank refund without exactly one succeeded refund"
    }
}

fn lost(what: &str) -> &'static str {
    if what == "debit" {
        "succeeded payment without exactly one bank debit"
    } else {
        "succeeded refund without exactly one bank refund"
    }
}

/// The actions a violation concerns: those whose bill or payment the subject names, or the
/// payment a reference belongs to.
pub fn actions_around<'a>(
    violation: &Violation,
    records: &Records,
    actions: &'a [ActionRecord],
) -> Vec<&'a ActionRecord> {
    let bill = records
        .payments
        .iter()
        .find(|payment| payment.reference == violation.subject)
        .map_or(violation.subject.as_str(), |payment| payment.of.as_str());
    actions
        .iter()
        .filter(|action| match action.operation {
            Operation::PayBill => action.target == bill,
            Operation::RefundPayment => violation.subject == format!("pay-{}", action.target),
        })
        .collect()
}

/// A connection to the backend's tables, on either store, for reading them again and again.
pub enum TableReader {
    /// The replicas' PostgreSQL database.
    Postgres(sqlx::PgPool),
    /// The replica's SQLite file, read only.
    Sqlite(sqlx::SqlitePool),
}

impl TableReader {
    /// Connects to `database`.
    pub async fn open(database: &Database) -> anyhow::Result<TableReader> {
        Ok(match database {
            Database::Postgres(database) => {
                TableReader::Postgres(sqlx::PgPool::connect(database.url()).await?)
            }
            Database::Sqlite(path) => {
                let options = sqlx::sqlite::SqliteConnectOptions::new()
                    .filename(path)
                    .read_only(true);
                TableReader::Sqlite(sqlx::SqlitePool::connect_with(options).await?)
            }
        })
    }

    /// Reads the tables, with the same SQL on both stores.
    pub async fn read(&self) -> anyhow::Result<Records> {
        const PAYMENTS: &str = "SELECT bank_reference, amount_paise, CAST(status AS TEXT) AS status, \
                                bill_id AS of FROM payments";
        const REFUNDS: &str = "SELECT r.bank_reference, r.amount_paise, \
                               CAST(r.status AS TEXT) AS status, p.bank_reference AS of \
                               FROM refunds r JOIN payments p \
                               ON p.user_id = r.user_id AND p.payment_id = r.payment_id";
        const UNFINISHED: &str = "SELECT user_id, CAST(state AS TEXT) AS state \
                                  FROM idempotency_keys \
                                  WHERE CAST(state AS TEXT) IN ('started', 'unknown')";
        type Row = (String, i64, String, String);
        let to_movement = |(reference, amount_paise, status, of): Row| Movement {
            reference,
            amount_paise,
            status,
            of,
        };
        // The same three queries on either pool.
        macro_rules! read_tables {
            ($pool:expr) => {
                (
                    sqlx::query_as::<_, Row>(PAYMENTS).fetch_all($pool).await?,
                    sqlx::query_as::<_, Row>(REFUNDS).fetch_all($pool).await?,
                    sqlx::query_as(UNFINISHED).fetch_all($pool).await?,
                )
            };
        }
        let (payments, refunds, unfinished_keys) = match self {
            TableReader::Postgres(pool) => read_tables!(pool),
            TableReader::Sqlite(pool) => read_tables!(pool),
        };
        Ok(Records {
            payments: payments.into_iter().map(to_movement).collect(),
            refunds: refunds.into_iter().map(to_movement).collect(),
            unfinished_keys,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::time::Duration;

    use bank_api::LedgerEntry;
    use serde_json::json;

    use super::*;

    /// A ledger entry of `amount` under `reference` (a refund `of` a debit's reference).
    pub(crate) fn entry(reference: &str, amount: u64, of: Option<&str>) -> LedgerEntry {
        LedgerEntry {
            reference: reference.to_owned(),
            amount_paise: amount,
            account: "user1@okbank".to_owned(),
            debit_reference: of.map(str::to_owned),
            at: time::OffsetDateTime::UNIX_EPOCH,
        }
    }

    fn movement(reference: &str, amount: i64, status: &str, of: &str) -> Movement {
        Movement {
            reference: reference.to_owned(),
            amount_paise: amount,
            status: status.to_owned(),
            of: of.to_owned(),
        }
    }

    fn paid(bill: &str) -> ActionRecord {
        ActionRecord {
            user: 1,
            operation: Operation::PayBill,
            target: bill.to_owned(),
            amount_paise: 500,
            key: None,
            ending: Ending::Final {
                status: 201,
                body: json!({ "bank_reference": "pay-1" }),
            },
            attempts: 1,
            took: Duration::from_millis(50),
            events: Vec::new(),
        }
    }

    fn clean_books() -> (Ledger, Records) {
        let ledger = Ledger {
            debits: vec![entry("pay-1", 500, None)],
            refunds: vec![entry("refund-1", 200, Some("pay-1"))],
        };
        let records = Records {
            payments: vec![
                movement("pay-1", 500, "succeeded", "soak-1-1"),
                movement("pay-2", 700, "void", "soak-1-2"),
            ],
            refunds: vec![movement("refund-1", 200, "succeeded", "pay-1")],
            unfinished_keys: Vec::new(),
        };
        (ledger, records)
    }

    #[test]
    fn books_that_agree_pass() {
        let (ledger, records) = clean_books();
        let (violations, damage) = audit(&ledger, &records, &[paid("soak-1-1")]);
        assert_eq!(violations, []);
        assert_eq!(damage, Damage::default());
    }

    #[test]
    fn a_double_charge_an_orphan_a_lost_movement_and_an_unresolved_key_each_fail_it() {
        let (mut ledger, mut records) = clean_books();
        // A second payment of the same bill, debited: a double charge.
        records
            .payments
            .push(movement("pay-3", 500, "succeeded", "soak-1-1"));
        ledger.debits.push(entry("pay-3", 500, None));
        // A debit whose payment is still pending: an orphan.
        records
            .payments
            .push(movement("pay-4", 900, "pending", "soak-1-4"));
        ledger.debits.push(entry("pay-4", 900, None));
        // A succeeded refund the bank never made: lost.
        records
            .refunds
            .push(movement("refund-2", 100, "succeeded", "pay-1"));
        records
            .unfinished_keys
            .push(("1".to_owned(), "unknown".to_owned()));
        let mut unresolved = paid("soak-1-5");
        unresolved.ending = Ending::Unresolved("Unsettled(Unknown)".to_owned());
        let (violations, damage) = audit(&ledger, &records, &[unresolved]);
        let kinds: Vec<&str> = violations.iter().map(|v| v.kind).collect();
        assert!(
            kinds.contains(&"one user action debited more than once"),
            "{kinds:?}"
        );
        assert!(kinds.contains(&"bank debit without exactly one succeeded payment"));
        assert!(kinds.contains(&"succeeded refund without exactly one bank refund"));
        assert!(kinds.contains(&"key left unresolved"));
        assert!(kinds.contains(&"user action without a final reply"));
        assert_eq!(damage.double_debits, 1);
        assert_eq!(damage.unresolved_keys, 1);
        assert_eq!(damage.orphan_or_lost, 2);
    }

    #[test]
    fn a_payment_acknowledged_then_lost_by_the_database_fails_it() {
        let (ledger, mut records) = clean_books();
        // The phone was told pay-1 succeeded; a failover lost its row (the bank keeps the debit).
        records
            .payments
            .retain(|payment| payment.reference != "pay-1");
        records.refunds.clear();
        let (violations, _) = audit(&ledger, &records, &[paid("soak-1-1")]);
        let kinds: Vec<&str> = violations.iter().map(|v| v.kind).collect();
        assert!(
            kinds.contains(&"an acknowledged movement missing from the books"),
            "{kinds:?}"
        );
        assert!(kinds.contains(&"bank debit without exactly one succeeded payment"));
    }

    #[test]
    fn refunds_beyond_the_payment_fail_it() {
        let (mut ledger, mut records) = clean_books();
        ledger.refunds.push(entry("refund-2", 400, Some("pay-1")));
        records
            .refunds
            .push(movement("refund-2", 400, "succeeded", "pay-1"));
        let (violations, _) = audit(&ledger, &records, &[]);
        assert_eq!(
            violations,
            [Violation {
                kind: "refunds exceed their payment",
                subject: "pay-1".to_owned(),
            }]
        );
    }
}
