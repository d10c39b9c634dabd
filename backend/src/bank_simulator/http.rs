//! The simulator's HTTP routes: JSON in, [`BankSimulator`] calls, status codes out.
//!
//! Only `POST /debits` and `POST /refunds` are subject to the knobs. Lookups, the ledger, the
//! knobs and `reset` always answer at once, so reconciliation and tests can ask about what
//! happened even while the bank is set to be slow or failing.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};
use tower_http::trace::TraceLayer;

use super::error::SimulatorError;
use super::extract::JsonBody;
use super::knobs::Knobs;
use super::ledger::Ledger;
use super::simulator::BankSimulator;
use super::wire::{DebitOutcome, DebitRequest, RefundOutcome, RefundRequest};

impl BankSimulator {
    /// The HTTP API over this simulator (SPEC section 7), for [`crate::bank_simulator::serve`]
    /// or for calling without a socket.
    pub fn router(&self) -> Router {
        Router::new()
            .route("/debits", post(post_debit))
            .route("/debits/{reference}", get(get_debit))
            .route("/refunds", post(post_refund))
            .route("/refunds/{reference}", get(get_refund))
            .route("/ledger", get(get_ledger))
            .route("/knobs", get(get_knobs).put(put_knobs))
            .route("/reset", post(reset))
            .route("/healthz", get(healthz))
            .fallback(unknown_route)
            .layer(TraceLayer::new_for_http())
            .with_state(self.clone())
    }
}

/// 201 debited, 402 declined.
async fn post_debit(
    State(bank): State<BankSimulator>,
    JsonBody(request): JsonBody<DebitRequest>,
) -> Result<(StatusCode, Json<DebitOutcome>), SimulatorError> {
    request.validate()?;
    let outcome = bank.debit(request).await?;
    let status = match outcome {
        DebitOutcome::Debited { .. } => StatusCode::CREATED,
        DebitOutcome::Declined { .. } => StatusCode::PAYMENT_REQUIRED,
    };
    Ok((status, Json(outcome)))
}

/// 200 with the recorded outcome, whichever it was; 404 if never decided.
async fn get_debit(
    State(bank): State<BankSimulator>,
    Path(reference): Path<String>,
) -> Result<Json<DebitOutcome>, SimulatorError> {
    bank.debit_outcome(&reference)
        .map(Json)
        .ok_or(SimulatorError::NotFound)
}

/// 201 refunded, 422 rejected.
async fn post_refund(
    State(bank): State<BankSimulator>,
    JsonBody(request): JsonBody<RefundRequest>,
) -> Result<(StatusCode, Json<RefundOutcome>), SimulatorError> {
    request.validate()?;
    let outcome = bank.refund(request).await?;
    let status = match outcome {
        RefundOutcome::Refunded { .. } => StatusCode::CREATED,
        RefundOutcome::Rejected { .. } => StatusCode::UNPROCESSABLE_ENTITY,
    };
    Ok((status, Json(outcome)))
}

/// 200 with the recorded outcome, whichever it was; 404 if never decided.
async fn get_refund(
    State(bank): State<BankSimulator>,
    Path(reference): Path<String>,
) -> Result<Json<RefundOutcome>, SimulatorError> {
    bank.refund_outcome(&reference)
        .map(Json)
        .ok_or(SimulatorError::NotFound)
}

async fn get_ledger(State(bank): State<BankSimulator>) -> Json<Ledger> {
    Json(bank.ledger())
}

async fn get_knobs(State(bank): State<BankSimulator>) -> Json<Knobs> {
    Json(bank.knobs())
}

/// Replaces all knobs (omitted fields take defaults) and re-seeds; 422 if a rate is out of range.
async fn put_knobs(
    State(bank): State<BankSimulator>,
    JsonBody(knobs): JsonBody<Knobs>,
) -> Result<Json<Knobs>, SimulatorError> {
    knobs.validate()?;
    tracing::info!(?knobs, "knobs replaced");
    bank.set_knobs(knobs.clone());
    Ok(Json(knobs))
}

async fn reset(State(bank): State<BankSimulator>) -> StatusCode {
    bank.reset();
    tracing::info!("ledger and outcomes cleared");
    StatusCode::NO_CONTENT
}

async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

async fn unknown_route() -> SimulatorError {
    SimulatorError::NotFound
}
