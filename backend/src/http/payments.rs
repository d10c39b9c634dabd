//! The `/v1` payment routes: pay a bill, refund a payment, read a payment. Each handler reads
//! the raw parts (user, key header values, path parameter, body) and hands them to
//! [`crate::flows`]; only reads talk to the store directly.

use std::time::Duration;

use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Extension, Path, State};
use axum::http::{HeaderMap, HeaderValue};
use axum::routing::{get, post};
use axum::{Json, Router};
use shared::api::{Paise, PaymentResponse, PaymentWithRefunds, RefundResponse};
use shared::prefer::{self, PREFER_HEADER};
use shared::{Problem, ProblemKind, UserId};
use uuid::Uuid;

use super::body::read_request_body;
use crate::domain::{Reply, RequestId};
use crate::error::Result;
use crate::flows::{Caller, pay_bill, refund_payment};
use crate::state::AppState;
use crate::store::{PaymentRow, RefundRow, StoreError};

/// The payment routes, to be nested behind authentication.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/bills/{bill_id}/pay", post(pay_bill_handler))
        .route("/v1/payments/{payment_id}/refunds", post(refund_handler))
        .route("/v1/payments/{payment_id}", get(read_payment_handler))
}

async fn pay_bill_handler(
    State(state): State<AppState>,
    Extension(user): Extension<UserId>,
    Extension(request_id): Extension<RequestId>,
    bill_id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Reply> {
    let Path(bill_id) = bill_id
        .map_err(|_| Problem::invalid_field("bill_id", "bill_id is not a valid path segment"))?;
    let body = read_request_body(&state, body).await?;
    let caller = caller(&state, user, request_id, &headers);
    let keys = key_header_values(&state, &headers);
    pay_bill(&state, &caller, keys, &bill_id, &body).await
}

async fn refund_handler(
    State(state): State<AppState>,
    Extension(user): Extension<UserId>,
    Extension(request_id): Extension<RequestId>,
    payment_id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Reply> {
    let Path(payment_id) = payment_id.map_err(|_| no_such_payment())?;
    let body = read_request_body(&state, body).await?;
    let caller = caller(&state, user, request_id, &headers);
    let keys = key_header_values(&state, &headers);
    refund_payment(&state, &caller, keys, &payment_id, &body).await
}

/// Who sent a payment request, and how long it may wait.
fn caller(state: &AppState, user: UserId, request_id: RequestId, headers: &HeaderMap) -> Caller {
    Caller {
        user,
        request_id,
        wait: requested_wait(state, headers),
    }
}

async fn read_payment_handler(
    State(state): State<AppState>,
    Extension(user): Extension<UserId>,
    payment_id: Result<Path<Uuid>, PathRejection>,
) -> Result<Json<PaymentWithRefunds>> {
    let Path(payment_id) = payment_id.map_err(|_| no_such_payment())?;
    let (payment, refunds) = state
        .claims()
        .load_payment_with_refunds(user.as_i64(), payment_id)
        .await?
        .ok_or_else(no_such_payment)?;
    let read = render_read(&payment, &refunds).ok_or_else(|| {
        StoreError::Corrupt(format!("payment {payment_id} has an amount out of range"))
    })?;
    Ok(Json(read))
}

/// All values of the policy's key header, as raw bytes (a repeated header is refused later).
fn key_header_values<'h>(state: &AppState, headers: &'h HeaderMap) -> Vec<&'h [u8]> {
    headers
        .get_all(state.policy.header.as_str())
        .iter()
        .map(HeaderValue::as_bytes)
        .collect()
}

/// The wait asked for with `Prefer: wait=N`, capped by the policy's `max_wait_seconds`.
pub fn requested_wait(state: &AppState, headers: &HeaderMap) -> Option<Duration> {
    let values = headers
        .get_all(PREFER_HEADER)
        .iter()
        .map(HeaderValue::as_bytes);
    prefer::requested_wait(values, state.policy.max_wait)
}

fn render_read(payment: &PaymentRow, refunds: &[RefundRow]) -> Option<PaymentWithRefunds> {
    let paise = |amount: i64| u64::try_from(amount).ok().and_then(Paise::new);
    Some(PaymentWithRefunds {
        payment: PaymentResponse {
            payment_id: payment.payment_id,
            bill_id: payment.bill_id.clone(),
            amount_paise: paise(payment.amount_paise)?,
            status: payment.status,
            bank_reference: payment.bank_reference.clone(),
        },
        refunds: refunds
            .iter()
            .map(|refund| {
                Some(RefundResponse {
                    refund_id: refund.refund_id,
                    payment_id: refund.payment_id,
                    amount_paise: paise(refund.amount_paise)?,
                    status: refund.status,
                    bank_reference: refund.bank_reference.clone(),
                })
            })
            .collect::<Option<Vec<_>>>()?,
    })
}

fn no_such_payment() -> Problem {
    Problem::new(ProblemKind::NotFound, "You have no payment with this id.")
}
