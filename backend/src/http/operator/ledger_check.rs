//! `POST /admin/api/customers/{user_id}/ledger-check` with `{"reason": "…"}`: was this customer
//! charged twice? Asks the bank about every reference of the customer's payments and refunds
//! (look-ups by reference, as SPEC §7 reads them; nothing is written but the trail's event),
//! and sets each beside our record:
//!
//! | finding | when |
//! |---|---|
//! | `double_charge` | one bill debited at the bank under more than one reference (the incident's broken client: a new key per retry) |
//! | `bank_moved_we_did_not` | the bank moved money under a reference we hold as pending, declined or void |
//! | `we_moved_bank_did_not` | we hold a movement as succeeded that the bank declined or never saw |
//! | `lookup_failed` | the bank could not be asked about a reference; the check is incomplete |
//!
//! The check sees the references we minted; money the bank moved under a reference we never
//! recorded is outside what it can find. It reads every movement of the customer, a page at a
//! time, up to [`MAX_MOVEMENTS_CHECKED`]; `complete` says whether it saw them all and had the
//! bank's word on each (no failed look-up), and `clean` is only ever true for a complete check.
//! One check per customer runs at a time (409 for a second), and all checks' look-ups share a
//! quarter of `MAX_BANK_CALLS` ([`crate::ledger_check_bounds`]), so payments keep their bank
//! calls. It is recorded in the customer's trail with the operator, the reason, the count of
//! findings and whether it was complete.

use std::collections::BTreeMap;

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use futures_util::{StreamExt, stream};
use serde_json::{Value, json};
use shared::api::MovementStatus;
use shared::{Operation, Problem, ProblemKind};
use time::OffsetDateTime;

use super::{CustomerRequest, action_of, rfc3339};
use crate::bank::LookUp;
use crate::domain::{EventKind, NewEvent};
use crate::error::Error;
use crate::state::AppState;
use crate::store::{CustomerMovement, Page};

/// Look-ups in flight at once for one check (all checks together stay within their share).
const CONCURRENT_LOOKUPS: usize = 8;

/// Movements read from the database per page.
const MOVEMENTS_PER_PAGE: usize = 500;

/// The most movements one check asks the bank about; a customer with more gets a check that
/// says it is not complete.
pub const MAX_MOVEMENTS_CHECKED: usize = 10_000;

/// What the bank said of one reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BankStatus {
    Succeeded,
    Declined,
    NeverSeen,
    /// The bank holds it undecided: no final word to compare yet.
    Pending,
    LookupFailed,
}

impl BankStatus {
    fn name(self) -> &'static str {
        match self {
            BankStatus::Succeeded => "succeeded",
            BankStatus::Declined => "declined",
            BankStatus::NeverSeen => "never_seen",
            BankStatus::Pending => "pending",
            BankStatus::LookupFailed => "lookup_failed",
        }
    }
}

/// One movement beside the bank's word on it.
struct Entry {
    ours: CustomerMovement,
    bank: BankStatus,
}

/// The handler.
pub async fn ledger_check(
    State(state): State<AppState>,
    asking: CustomerRequest,
    body: Body,
) -> Result<Json<Value>, Error> {
    let action = action_of(&state, &asking, body).await?;
    let Some(_running) = state.ledger_checks.begin(asking.user.clone()) else {
        return Err(Problem::new(
            ProblemKind::RequestInProgress,
            "A ledger check of this customer is running; look at its result when it ends.",
        )
        .into());
    };
    let mut entries: Vec<Entry> = Vec::new();
    let mut page = Page {
        from: None,
        limit: MOVEMENTS_PER_PAGE,
    };
    let unread_left = loop {
        let movements = state
            .operator_reads()
            .customer_movements(asking.user.clone(), page)
            .await?;
        let asked: Vec<Entry> = stream::iter(movements.items)
            .map(|ours| ask(state.clone(), ours))
            .buffered(CONCURRENT_LOOKUPS)
            .collect()
            .await;
        entries.extend(asked);
        match movements.next {
            None => break false,
            Some(_) if entries.len() >= MAX_MOVEMENTS_CHECKED => break true,
            next => page.from = next,
        }
    };
    let findings = findings(&entries);
    let lookups_failed = entries
        .iter()
        .filter(|entry| matches!(entry.bank, BankStatus::LookupFailed | BankStatus::Pending))
        .count();
    let complete = !unread_left && lookups_failed == 0;
    let detail = format!(
        "{} references checked at the bank; {} findings; {}",
        entries.len(),
        findings.len(),
        if complete {
            "complete".to_owned()
        } else if unread_left {
            format!("not complete: only the newest {MAX_MOVEMENTS_CHECKED} movements were checked")
        } else {
            format!("not complete: {lookups_failed} look-ups failed")
        }
    );
    let cause = asking.cause(action);
    let checked = NewEvent::of_customer(
        asking.user.clone(),
        EventKind::LedgerChecked,
        detail,
        &cause,
    );
    state.trail_writes().append_event(&checked).await?;
    let entries_json: Vec<Value> = entries.iter().map(entry_json).collect();
    Ok(Json(json!({
        "user_id": asking.user.to_string(),
        "checked_at": rfc3339(OffsetDateTime::now_utc()),
        "movements_checked": entries.len(),
        "complete": complete,
        "older_movements_unchecked": unread_left,
        "entries": entries_json,
        "clean": complete && findings.is_empty(),
        "findings": findings,
    })))
}

async fn ask(state: AppState, ours: CustomerMovement) -> Entry {
    let bank = match state
        .ledger_checks
        .look_up(&state.bank, ours.operation, &ours.bank_reference)
        .await
    {
        Ok(LookUp::Succeeded) => BankStatus::Succeeded,
        Ok(LookUp::Declined { .. }) => BankStatus::Declined,
        Ok(LookUp::NeverSeen) => BankStatus::NeverSeen,
        Ok(LookUp::Pending) => BankStatus::Pending,
        Err(error) => {
            tracing::warn!(%error, reference = ours.bank_reference, "ledger check: look-up failed");
            BankStatus::LookupFailed
        }
    };
    Entry { ours, bank }
}

fn entry_json(entry: &Entry) -> Value {
    json!({
        "reference": entry.ours.bank_reference,
        "operation": entry.ours.operation.name(),
        "bill_id": entry.ours.bill_id,
        "amount_paise": entry.ours.amount_paise,
        "our_status": entry.ours.status.name(),
        "bank_status": entry.bank.name(),
    })
}

/// Every mismatch between the bank and us, named.
fn findings(entries: &[Entry]) -> Vec<Value> {
    let mut findings = Vec::new();
    let mut debits_by_bill: BTreeMap<&str, Vec<&Entry>> = BTreeMap::new();
    for entry in entries {
        let ours = &entry.ours;
        let reference = &ours.bank_reference;
        if entry.bank == BankStatus::Succeeded && ours.operation == Operation::PayBill {
            debits_by_bill.entry(&ours.bill_id).or_default().push(entry);
        }
        match (entry.bank, ours.status) {
            (BankStatus::Pending, _) => findings.push(finding(
                "pending_at_bank",
                format!("The bank holds {reference} undecided: check again later."),
                &[reference],
            )),
            (BankStatus::LookupFailed, _) => findings.push(finding(
                "lookup_failed",
                format!("The bank could not be asked about {reference}: check again later."),
                &[reference],
            )),
            (BankStatus::Succeeded, status) if status != MovementStatus::Succeeded => {
                findings.push(finding(
                    "bank_moved_we_did_not",
                    format!(
                        "The bank moved {} paise under {reference}, which we hold as {}{}.",
                        ours.amount_paise,
                        status.name(),
                        if status == MovementStatus::Pending {
                            " (its key is still being settled: ask the bank now from the queue)"
                        } else {
                            ""
                        }
                    ),
                    &[reference],
                ));
            }
            (BankStatus::Declined | BankStatus::NeverSeen, MovementStatus::Succeeded) => {
                findings.push(finding(
                    "we_moved_bank_did_not",
                    format!(
                        "We hold {reference} as succeeded; the bank says {}.",
                        entry.bank.name()
                    ),
                    &[reference],
                ));
            }
            _ => {}
        }
    }
    for (bill, debits) in debits_by_bill {
        if debits.len() > 1 {
            let references: Vec<&String> = debits
                .iter()
                .map(|entry| &entry.ours.bank_reference)
                .collect();
            let total: i64 = debits.iter().map(|entry| entry.ours.amount_paise).sum();
            findings.push(finding(
                "double_charge",
                format!(
                    "Bill {bill} was debited {} times at the bank ({total} paise in all), under \
                     different references.",
                    debits.len()
                ),
                &references,
            ));
        }
    }
    findings
}

fn finding(kind: &str, detail: String, references: &[&String]) -> Value {
    json!({ "kind": kind, "detail": detail, "references": references })
}
