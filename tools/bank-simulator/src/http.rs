//! The simulator's HTTP routes: JSON in, [`BankSimulator`] calls, status codes out.
//!
//! Only `POST /debits` and `POST /refunds` are subject to the failure knobs. Look-ups follow the
//! look-up knobs (latency, `pending`, the rail's rules); the ledger, `/stats`, the knobs and
//! `reset` always reply at once, so tests can ask about what happened even while the bank is
//! set to be slow or failing.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use bank_api::{
    DebitOutcome, DebitRequest, Knobs, Ledger, LookupStatus, PendingReference, RefundOutcome,
    RefundRequest, RequestError,
};
use serde_json::{Value, json};
use tower_http::trace::TraceLayer;

use crate::error::SimulatorError;
use crate::extract::JsonBody;
use crate::simulator::BankSimulator;
use crate::status_checks::{CheckStats, CheckVerdict};

impl BankSimulator {
    /// The HTTP API over this simulator (SPEC section 7), for [`crate::serve`]
    /// or for calling without a socket.
    pub fn router(&self) -> Router {
        Router::new()
            .route("/debits", post(post_debit))
            .route("/debits/{reference}", get(get_debit))
            .route("/refunds", post(post_refund))
            .route("/refunds/{reference}", get(get_refund))
            .route("/ledger", get(get_ledger))
            .route("/stats", get(get_stats))
            .route("/settlement", get(get_settlement))
            .route("/knobs", get(get_knobs).put(put_knobs))
            .route("/reset", post(reset))
            .route("/healthz", get(healthz))
            .fallback(unknown_route)
            .layer(TraceLayer::new_for_http())
            .with_state(self.clone())
    }
}

/// A refused call's error, naming its reference when it has one (SPEC §7, "Not executed").
fn refused_naming(refused: RequestError, reference: &str) -> SimulatorError {
    let named = (!reference.trim().is_empty()).then(|| reference.to_owned());
    SimulatorError::InvalidRequest(refused, named)
}

/// 201 debited, 402 declined.
async fn post_debit(
    State(bank): State<BankSimulator>,
    JsonBody(request): JsonBody<DebitRequest>,
) -> Result<(StatusCode, Json<DebitOutcome>), SimulatorError> {
    request
        .validate()
        .map_err(|refused| refused_naming(refused, &request.reference))?;
    let outcome = bank.debit(request).await?;
    let status = match outcome {
        DebitOutcome::Debited { .. } => StatusCode::CREATED,
        DebitOutcome::Declined { .. } => StatusCode::PAYMENT_REQUIRED,
    };
    Ok((status, Json(outcome)))
}

/// The recorded outcome, whichever it was (200, or the original call's status per the
/// `lookup_status` knob); `404 {"status": "unknown"}` if never decided.
async fn get_debit(
    State(bank): State<BankSimulator>,
    Path(reference): Path<String>,
) -> Result<Response, SimulatorError> {
    if let Some(early) = reply_by_the_rules(&bank, &reference).await? {
        return Ok(early);
    }
    let outcome = bank
        .debit_outcome(&reference)
        .ok_or(SimulatorError::UnknownReference(reference))?;
    let original = match outcome {
        DebitOutcome::Debited { .. } => StatusCode::CREATED,
        DebitOutcome::Declined { .. } => StatusCode::PAYMENT_REQUIRED,
    };
    Ok((lookup_status(&bank, original), Json(outcome)).into_response())
}

/// Waits the look-up latency, counts the look-up and applies the rail's rules: a refusal, a
/// `202 pending` reply, or `None` to reply from the books.
async fn reply_by_the_rules(
    bank: &BankSimulator,
    reference: &str,
) -> Result<Option<Response>, SimulatorError> {
    bank.look_up_latency().await;
    match bank.admit_look_up(reference) {
        CheckVerdict::Reply => Ok(None),
        CheckVerdict::Pending => {
            let pending = PendingReference {
                reference: reference.to_owned(),
            };
            Ok(Some((StatusCode::ACCEPTED, Json(pending)).into_response()))
        }
        CheckVerdict::Refused(refusal) => {
            tracing::warn!(
                reference,
                refusal = refusal.message(),
                "status check refused"
            );
            Err(SimulatorError::StatusCheckRefused(
                reference.to_owned(),
                refusal,
            ))
        }
    }
}

/// 201 refunded, 422 rejected.
async fn post_refund(
    State(bank): State<BankSimulator>,
    JsonBody(request): JsonBody<RefundRequest>,
) -> Result<(StatusCode, Json<RefundOutcome>), SimulatorError> {
    request
        .validate()
        .map_err(|refused| refused_naming(refused, &request.reference))?;
    let outcome = bank.refund(request).await?;
    let status = match outcome {
        RefundOutcome::Refunded { .. } => StatusCode::CREATED,
        RefundOutcome::Rejected { .. } => StatusCode::UNPROCESSABLE_ENTITY,
    };
    Ok((status, Json(outcome)))
}

/// The recorded outcome, as [`get_debit`] returns it.
async fn get_refund(
    State(bank): State<BankSimulator>,
    Path(reference): Path<String>,
) -> Result<Response, SimulatorError> {
    if let Some(early) = reply_by_the_rules(&bank, &reference).await? {
        return Ok(early);
    }
    let outcome = bank
        .refund_outcome(&reference)
        .ok_or(SimulatorError::UnknownReference(reference))?;
    let original = match outcome {
        RefundOutcome::Refunded { .. } => StatusCode::CREATED,
        RefundOutcome::Rejected { .. } => StatusCode::UNPROCESSABLE_ENTITY,
    };
    Ok((lookup_status(&bank, original), Json(outcome)).into_response())
}

/// A found look-up's status: 200, or `original` when the knob says so.
fn lookup_status(bank: &BankSimulator, original: StatusCode) -> StatusCode {
    match bank.knobs().lookup_status {
        LookupStatus::Ok => StatusCode::OK,
        LookupStatus::Original => original,
    }
}

async fn get_ledger(State(bank): State<BankSimulator>) -> Json<Ledger> {
    Json(bank.ledger())
}

/// The day's settlement file: every movement the bank executed, as CSV (`bank_api::settlement`).
async fn get_settlement(State(bank): State<BankSimulator>) -> Response {
    let csv = bank.settlement_file();
    ([(axum::http::header::CONTENT_TYPE, "text/csv")], csv).into_response()
}

/// The look-ups counted and refused ([`CheckStats`]).
async fn get_stats(State(bank): State<BankSimulator>) -> Json<CheckStats> {
    Json(bank.check_stats())
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
    SimulatorError::NoSuchRoute
}
