//! The replies the flows share: a finished key's saved reply, rendered from its payment or
//! refund row by [`saved_reply`] both the first time and on every replay (so a replay carries
//! the first reply's status, body and `Location` byte for byte, plus `Idempotent-Replayed:
//! true`), and the problems of a key at work or an outcome still pending.

use std::time::Duration;

use time::OffsetDateTime;

use shared::api::{MovementStatus, Paise, PaymentResponse, RefundResponse};
use shared::decision::{IN_PROGRESS_RETRY_AFTER, OUTCOME_PENDING_RETRY_AFTER};
use shared::{Problem, ProblemKind};

use crate::bank::BankUnavailable;
use crate::domain::Reply;
use crate::store::{PaymentRow, RefundRow, SavedMovement, StoreError};

/// The reply a finished payment or refund stands for: 201 with the movement, or the 402
/// decline. A pending or void movement has no saved reply, which is a broken invariant.
pub fn saved_reply(movement: &SavedMovement) -> Result<Reply, StoreError> {
    match movement {
        SavedMovement::Payment(payment) => payment_reply(payment),
        SavedMovement::Refund(refund) => refund_reply(refund),
    }
}

fn payment_reply(payment: &PaymentRow) -> Result<Reply, StoreError> {
    match payment.status {
        MovementStatus::Succeeded => {
            let body = payment_body(payment)?;
            Ok(Reply {
                location: Some(format!("/v1/payments/{}", payment.payment_id)),
                ..created(&body)
            })
        }
        MovementStatus::Declined => Ok(declined("debit", payment.decline_reason.as_deref())),
        MovementStatus::Pending | MovementStatus::Void => {
            Err(unfinished_has_no_reply(payment.payment_id))
        }
    }
}

fn refund_reply(refund: &RefundRow) -> Result<Reply, StoreError> {
    match refund.status {
        MovementStatus::Succeeded => Ok(created(&refund_body(refund)?)),
        MovementStatus::Declined => Ok(declined("refund", refund.decline_reason.as_deref())),
        MovementStatus::Pending | MovementStatus::Void => {
            Err(unfinished_has_no_reply(refund.refund_id))
        }
    }
}

/// A payment row as the wire shows it: the body of its `201` (and every replay of it) and of the
/// payment read (`GET /v1/payments/{id}`). The one place a row becomes a body.
pub fn payment_body(payment: &PaymentRow) -> Result<PaymentResponse, StoreError> {
    Ok(PaymentResponse {
        payment_id: payment.payment_id,
        bill_id: payment.bill_id.clone(),
        amount_paise: paise(payment.amount_paise)?,
        status: payment.status,
        bank_reference: payment.bank_reference.clone(),
    })
}

/// A refund row as the wire shows it, as [`payment_body`] does a payment.
pub fn refund_body(refund: &RefundRow) -> Result<RefundResponse, StoreError> {
    Ok(RefundResponse {
        refund_id: refund.refund_id,
        payment_id: refund.payment_id,
        amount_paise: paise(refund.amount_paise)?,
        status: refund.status,
        bank_reference: refund.bank_reference.clone(),
    })
}

fn created(body: &impl serde::Serialize) -> Reply {
    Reply {
        status: 201,
        content_type: "application/json",
        body: serde_json::to_vec(body).expect("responses always serialise"),
        location: None,
        retry_after: None,
        replayed: false,
        waited: None,
        expires_at: None,
    }
}

fn declined(what: &str, reason: Option<&str>) -> Reply {
    let reason = reason.unwrap_or("no reason given");
    Reply::problem(Problem::new(
        ProblemKind::PaymentDeclined,
        format!("The bank declined the {what}: {reason}."),
    ))
}

fn paise(amount: i64) -> Result<Paise, StoreError> {
    u64::try_from(amount)
        .ok()
        .and_then(Paise::new)
        .ok_or_else(|| StoreError::Corrupt(format!("amount {amount} out of range")))
}

fn unfinished_has_no_reply(id: uuid::Uuid) -> StoreError {
    StoreError::Corrupt(format!(
        "finished key points at movement {id}, which has no final reply"
    ))
}

/// "Still in progress": the key's first attempt (or a reconciler) is at work on it (409).
pub(super) fn in_progress() -> Reply {
    Reply::problem(Problem::request_in_progress(IN_PROGRESS_RETRY_AFTER))
}

/// "Outcome pending": the bank's reply is unknown and is being looked up (503), naming when
/// the rail lets the bank be asked next where that is known (SPEC §4).
pub(super) fn outcome_pending(next_check_at: Option<OffsetDateTime>) -> Reply {
    let mut problem = Problem::new(
        ProblemKind::OutcomePending,
        "The bank has not confirmed the outcome of this request yet; it is being checked. \
         Retry with the same Idempotency-Key and body; you will not be charged twice.",
    )
    .with_retry_after(OUTCOME_PENDING_RETRY_AFTER);
    problem.next_check_at = next_check_at.map(|at| Box::new(rfc3339(at)));
    Reply::problem(problem)
}

/// `at` as RFC 3339, as the wire writes times.
fn rfc3339(at: OffsetDateTime) -> String {
    at.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// The bank's reply is unknown after every status check the rail allows: 503
/// `outcome-awaiting-settlement`, naming when the settlement file is due and asking the client
/// to come back then. No bank call is made for it.
pub(super) fn awaiting_settlement(due_at: OffsetDateTime) -> Reply {
    let due = rfc3339(due_at);
    let until_due = (due_at - OffsetDateTime::now_utc())
        .try_into()
        .unwrap_or(Duration::ZERO);
    let mut problem = Problem::new(
        ProblemKind::OutcomeAwaitingSettlement,
        format!(
            "The bank has not confirmed the outcome of this request after every status check \
             the payment rail allows; its settlement file, due at {due}, will. You will not be \
             charged twice: retry with the same Idempotency-Key and body after then."
        ),
    )
    .with_retry_after(until_due.max(Duration::from_secs(1)));
    problem.settlement_due_at = Some(Box::new(due));
    Reply::problem(problem)
}

/// The bank breaker is open: nothing was claimed or sent; retry after `refused.retry_after`
/// (503 `bank-unavailable`).
pub(super) fn bank_unavailable(refused: BankUnavailable) -> Reply {
    Reply::problem(
        Problem::new(
            ProblemKind::BankUnavailable,
            "The bank is failing; nothing was sent to it and nothing was charged. Retry with \
             the same Idempotency-Key and body after Retry-After.",
        )
        .with_retry_after(refused.retry_after.max(Duration::from_secs(1))),
    )
}

/// Nothing was sent to the bank, or the bank has no record of it: retry (503).
pub(super) fn nothing_charged(detail: &str) -> Reply {
    Reply::problem(
        Problem::new(ProblemKind::ServiceUnavailable, detail)
            .with_retry_after(Duration::from_secs(1)),
    )
}
