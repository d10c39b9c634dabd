//! The replies the flows share: a finished key's saved reply, rendered from its payment or
//! refund row by [`saved_reply`] both the first time and on every replay (so a replay carries
//! the first reply's status, body and `Location` byte for byte, plus `Idempotent-Replayed:
//! true`), and the problems of a key at work or an outcome still pending.

use std::time::Duration;

use time::OffsetDateTime;

use shared::api::{MovementStatus, Paise, PaymentResponse, RefundResponse};
use shared::decision::{IN_PROGRESS_RETRY_AFTER, OUTCOME_PENDING_RETRY_AFTER};
use shared::server_path::{Ending, ReleaseWhy};
use shared::{Operation, Problem, ProblemKind};
use uuid::Uuid;

use crate::bank::BankUnavailable;
use crate::domain::{Cause, EventKind, Reply};
use crate::metrics::Metrics;
use crate::state::AppState;
use crate::store::{KeyRef, PaymentRow, RefundRow, SavedMovement, StoreError};

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

/// What a request's steps gathered for its reply: the reply a step rendered (the first reply, a
/// replay, or what the bank said when asked), the admission's refusal, the breaker's, and the
/// movement a refused mismatch names in the trail.
#[derive(Default)]
pub(super) struct ReplyParts {
    /// The reply a step rendered.
    pub rendered: Option<Reply>,
    /// The admission's refusal.
    pub not_admitted: Option<Reply>,
    /// The breaker's refusal.
    pub bank_refused: Option<BankUnavailable>,
    /// The movement of the key as last seen.
    pub movement_id: Option<Uuid>,
}

impl ReplyParts {
    /// The reply for `ending`, carrying the key's expiry (`expires_at`) when it is about the key;
    /// `amount_paise` is the request's, for a refund that exceeds what remains.
    pub(super) fn reply(
        self,
        ending: Ending,
        expires_at: Option<OffsetDateTime>,
        amount_paise: Option<i64>,
    ) -> Reply {
        let about_the_key = ending.is_about_the_key();
        let reply = match ending {
            Ending::Rendered => self
                .rendered
                .unwrap_or_else(|| out_of_order("a rendered reply")),
            Ending::NotAdmitted => self
                .not_admitted
                .unwrap_or_else(|| out_of_order("the admission's refusal")),
            Ending::Mismatch => Reply::problem(Problem::idempotency_key_reused()),
            Ending::InProgress => in_progress(),
            Ending::OutcomePending(next_check_at) => outcome_pending(next_check_at),
            Ending::AwaitingSettlement(due_at) => awaiting_settlement(due_at),
            Ending::BankUnavailable => {
                bank_unavailable(self.bank_refused.unwrap_or(BankUnavailable {
                    retry_after: Duration::from_secs(1),
                }))
            }
            Ending::NothingCharged(ReleaseWhy::NotExecuted) => nothing_charged(
                "The bank did not execute this request and has no record of it: no money moved. \
                 Retry with the same Idempotency-Key and body.",
            ),
            Ending::NothingCharged(ReleaseWhy::NoPlace) => nothing_charged(
                "The bank is at capacity; nothing was sent to it. Retry with the same \
                 Idempotency-Key and body.",
            ),
            Ending::PaymentNotFound => payment_not_found(),
            Ending::ExceedsRemaining { remaining_paise } => {
                exceeds_remaining(amount_paise.unwrap_or_default(), remaining_paise)
            }
        };
        match (about_the_key, expires_at) {
            (true, Some(expires_at)) => reply.expiring(expires_at),
            _ => reply,
        }
    }
}

/// A reply the path promised and no step rendered: a bug in the interpreter, logged, and
/// replied to as an outcome still pending (the safe word: the client retries with its key).
fn out_of_order(missing: &str) -> Reply {
    tracing::error!(
        missing,
        "the request's path ended without the reply it named"
    );
    outcome_pending(None)
}

/// The 422 for a key used with another request, counted and recorded in the trail.
pub(super) fn refuse_mismatch(
    state: &AppState,
    (key, movement): (KeyRef, Option<Uuid>),
    operation: Operation,
    cause: &Cause,
) {
    Metrics::count(&state.metrics.mismatches, operation.name());
    let refused = (EventKind::MismatchRefused, MISMATCH);
    state.trail.observe_key(key, movement, refused, cause);
}

/// The trail's word for a refused mismatch.
const MISMATCH: &str = "same key with another request body: refused (422)";

/// A refund of a payment the user does not have (or that did not succeed).
pub(super) fn payment_not_found() -> Reply {
    Reply::problem(Problem::new(
        ProblemKind::NotFound,
        "You have no succeeded payment with this id.",
    ))
}

fn exceeds_remaining(amount_paise: i64, remaining_paise: i64) -> Reply {
    Reply::problem(Problem::new(
        ProblemKind::RefundExceedsPayment,
        format!(
            "The refund of {amount_paise} paise exceeds the {remaining_paise} paise that remain \
             refundable on this payment."
        ),
    ))
}
