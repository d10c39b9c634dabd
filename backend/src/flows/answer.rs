//! [`Answer`]: what an operation answers, and how a saved outcome is rendered.
//!
//! A finished key's answer is rendered from its payment or refund row by [`Answer::saved`],
//! both the first time and on every replay, so a replay carries the first answer's status, body
//! and `Location` byte for byte (plus `Idempotent-Replayed: true`).

use std::time::Duration;

use shared::api::{MovementStatus, Paise, PaymentResponse, RefundResponse};
use shared::problem::PROBLEM_CONTENT_TYPE;
use shared::{Problem, ProblemKind};
use time::OffsetDateTime;

use crate::store::{PaymentRow, RefundRow, SavedMovement, StoreError};

/// An HTTP answer in domain terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The status code.
    pub status: u16,
    /// `application/json` or `application/problem+json`.
    pub content_type: &'static str,
    /// The body.
    pub body: Vec<u8>,
    /// The `Location` header, for a created payment.
    pub location: Option<String>,
    /// The `Retry-After` header.
    pub retry_after: Option<Duration>,
    /// Whether this is a replay of a saved answer (`Idempotent-Replayed: true`).
    pub replayed: bool,
    /// The wait the request was given for its key's first attempt, when it waited
    /// (`Preference-Applied: wait=N`).
    pub waited: Option<Duration>,
    /// The expiry of the request's key, as its row says, on every answer to a request whose
    /// key is stored (`Idempotency-Expires`, SPEC §4).
    pub expires_at: Option<OffsetDateTime>,
}

impl Answer {
    /// A problem answer.
    pub fn problem(problem: Problem) -> Answer {
        Answer {
            status: problem.status,
            content_type: PROBLEM_CONTENT_TYPE,
            retry_after: problem.retry_after,
            body: problem.to_json(),
            location: None,
            replayed: false,
            waited: None,
            expires_at: None,
        }
    }

    /// The answer a finished payment or refund stands for: 201 with the resource, or the 402
    /// decline. A pending or void movement has no saved answer, which is a broken invariant.
    pub fn saved(movement: &SavedMovement) -> Result<Answer, StoreError> {
        match movement {
            SavedMovement::Payment(payment) => payment_answer(payment),
            SavedMovement::Refund(refund) => refund_answer(refund),
        }
    }

    /// Marks the answer as a replay.
    pub fn replayed(self) -> Answer {
        Answer {
            replayed: true,
            ..self
        }
    }

    /// Marks the answer as one about a key that expires at `at` (its row's expiry).
    pub fn expiring(self, at: OffsetDateTime) -> Answer {
        Answer {
            expires_at: Some(at),
            ..self
        }
    }

    /// Marks the answer as given after waiting (up to `allowed`) for the key's first attempt.
    pub fn after_waiting(self, allowed: Duration) -> Answer {
        Answer {
            waited: Some(allowed),
            ..self
        }
    }
}

fn payment_answer(payment: &PaymentRow) -> Result<Answer, StoreError> {
    match payment.status {
        MovementStatus::Succeeded => {
            let body = PaymentResponse {
                payment_id: payment.payment_id,
                bill_id: payment.bill_id.clone(),
                amount_paise: paise(payment.amount_paise)?,
                status: MovementStatus::Succeeded,
                bank_reference: payment.bank_reference.clone(),
            };
            Ok(Answer {
                location: Some(format!("/v1/payments/{}", payment.payment_id)),
                ..created(&body)
            })
        }
        MovementStatus::Declined => Ok(declined("debit", payment.decline_reason.as_deref())),
        MovementStatus::Pending | MovementStatus::Void => {
            Err(unfinished_has_no_answer(payment.payment_id))
        }
    }
}

fn refund_answer(refund: &RefundRow) -> Result<Answer, StoreError> {
    match refund.status {
        MovementStatus::Succeeded => Ok(created(&RefundResponse {
            refund_id: refund.refund_id,
            payment_id: refund.payment_id,
            amount_paise: paise(refund.amount_paise)?,
            status: MovementStatus::Succeeded,
            bank_reference: refund.bank_reference.clone(),
        })),
        MovementStatus::Declined => Ok(declined("refund", refund.decline_reason.as_deref())),
        MovementStatus::Pending | MovementStatus::Void => {
            Err(unfinished_has_no_answer(refund.refund_id))
        }
    }
}

fn created(body: &impl serde::Serialize) -> Answer {
    Answer {
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

fn declined(what: &str, reason: Option<&str>) -> Answer {
    let reason = reason.unwrap_or("no reason given");
    Answer::problem(Problem::new(
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

fn unfinished_has_no_answer(id: uuid::Uuid) -> StoreError {
    StoreError::Corrupt(format!(
        "finished key points at movement {id}, which has no final answer"
    ))
}
