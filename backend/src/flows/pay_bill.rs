//! `pay_bill`: claim the key (with a pending payment), debit once, save, answer; or answer a
//! repeat from what is saved.

use shared::api::{PayBillRequest, check_bill_id};
use shared::{Operation, UserId};
use uuid::Uuid;

use super::answer::Answer;
use super::existing_key::{Step, answer_existing_key, outcome_pending};
use super::request::{Admitted, admit};
use crate::bank_client::BankOutcome;
use crate::metrics::Metrics;
use crate::state::AppState;
use crate::store::{
    ClaimResult, KeyRef, MovementResult, NewPayment, PaymentRow, SavedMovement, StoreError,
};

/// How many claim rounds a request makes: an expired or released key is claimed again once.
const CLAIM_ROUNDS: usize = 3;

/// Pays `bill_id` for `user` once per key.
#[tracing::instrument(skip_all, fields(user_id = %user, bill_id, key))]
pub async fn pay_bill<'a>(
    state: &AppState,
    user: UserId,
    key_header_values: impl IntoIterator<Item = &'a [u8]>,
    bill_id: &str,
    body: &[u8],
) -> Answer {
    let admitted = match admit(state, Operation::PayBill, key_header_values, bill_id, body) {
        Ok(admitted) => admitted,
        Err(problem) => return Answer::problem(problem),
    };
    tracing::Span::current().record("key", tracing::field::display(&admitted.key));
    let request =
        match check_bill_id(bill_id).and_then(|()| PayBillRequest::from_json(&admitted.body)) {
            Ok(request) => request,
            Err(problem) => return Answer::problem(problem),
        };
    let work = {
        let (state, bill_id) = (state.clone(), bill_id.to_owned());
        async move { claim_and_pay(&state, user, &admitted, &bill_id, &request).await }
    };
    run_to_completion(work).await
}

/// Runs the claimed work in its own task, so that a client giving up (a phone's timeout closes
/// the connection, and the server drops the request's future) cannot cut it off between the
/// debit and the save. The client's retry then finds the saved answer instead of a key left
/// `started` until reconciliation.
pub(super) async fn run_to_completion(
    work: impl Future<Output = Result<Answer, StoreError>> + Send + 'static,
) -> Answer {
    match tokio::spawn(work).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(error)) => Answer::store_failure(&error),
        Err(error) => {
            tracing::error!(%error, "the request's task failed");
            Answer::store_failure(&StoreError::Corrupt("the request's task failed".to_owned()))
        }
    }
}

async fn claim_and_pay(
    state: &AppState,
    user: UserId,
    admitted: &Admitted,
    bill_id: &str,
    request: &PayBillRequest,
) -> Result<Answer, StoreError> {
    let key = KeyRef::new(user, &admitted.key);
    let payment = NewPayment {
        payment_id: Uuid::new_v4(),
        bill_id: bill_id.to_owned(),
        amount_paise: request.amount_paise.as_i64(),
        payer_vpa: request.payer_vpa.clone(),
        bank_reference: admitted.key.bank_reference(Operation::PayBill, user),
    };
    for _ in 0..CLAIM_ROUNDS {
        let stored = match state
            .store
            .claim_payment(key, &admitted.attempt.fingerprint, &payment)
            .await?
        {
            ClaimResult::Claimed(payment) => return Ok(debit_and_save(state, key, payment).await),
            ClaimResult::Existing(stored) => stored,
        };
        match answer_existing_key(state, key, &admitted.attempt, &stored).await? {
            Step::Answer(answer) => return Ok(answer),
            Step::ClaimAgain => continue,
        }
    }
    Err(StoreError::Corrupt(
        "the key was released on every claim round".to_owned(),
    ))
}

/// The winner's work: one debit, then the outcome and the key's state in one transaction.
/// From here on every failure leaves the key `started` or `unknown` for reconciliation and
/// answers "outcome pending": money may have moved, so no error is final.
async fn debit_and_save(state: &AppState, key: KeyRef, payment: PaymentRow) -> Answer {
    Metrics::count(&state.metrics.claims, Operation::PayBill.name());
    let outcome = state
        .bank
        .debit(
            &payment.bank_reference,
            payment.amount_paise,
            &payment.payer_vpa,
        )
        .await;
    save_outcome(
        state,
        key,
        Operation::PayBill,
        payment.payment_id,
        outcome,
        "debit",
    )
    .await
}

/// Saves a bank outcome and answers it; shared by payments and refunds.
pub(super) async fn save_outcome(
    state: &AppState,
    key: KeyRef,
    operation: Operation,
    resource_id: Uuid,
    outcome: BankOutcome,
    call: &'static str,
) -> Answer {
    let result = match outcome {
        BankOutcome::Succeeded => MovementResult::Succeeded,
        BankOutcome::Declined { reason } => MovementResult::Declined { reason },
        BankOutcome::Unknown { reason } => {
            state.metrics.bank_call(call, "unknown");
            state.metrics.outcome(operation.name(), "unknown");
            tracing::warn!(%reason, "bank outcome unknown; the key goes to reconciliation");
            if let Err(error) = state.store.mark_unknown(key, resource_id).await {
                tracing::error!(%error, "could not mark the key unknown; it stays started");
            }
            return outcome_pending(shared::decision::OUTCOME_PENDING_RETRY_AFTER);
        }
    };
    let label = match result {
        MovementResult::Succeeded => "succeeded",
        MovementResult::Declined { .. } => "declined",
    };
    state.metrics.bank_call(call, label);
    match state
        .store
        .finish(key, operation, resource_id, &result)
        .await
    {
        Ok(Some(movement)) => {
            state.metrics.outcome(operation.name(), label);
            render_fresh(&movement)
        }
        Ok(None) => {
            tracing::error!("the movement vanished before its outcome was saved");
            outcome_pending(shared::decision::OUTCOME_PENDING_RETRY_AFTER)
        }
        Err(error) => {
            tracing::error!(%error, "could not save the bank's outcome; reconciliation will");
            // Best effort: an `unknown` key is looked up at once, a `started` one only after
            // `stuck_after`. If the database is away this fails too, and the key stays `started`.
            if let Err(error) = state.store.mark_unknown(key, resource_id).await {
                tracing::warn!(%error, "could not mark the key unknown either");
            }
            outcome_pending(shared::decision::OUTCOME_PENDING_RETRY_AFTER)
        }
    }
}

fn render_fresh(movement: &SavedMovement) -> Answer {
    Answer::saved(movement).unwrap_or_else(|error| Answer::store_failure(&error))
}
