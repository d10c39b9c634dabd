//! The `/v1` payment routes: pay a bill, refund a payment, read a payment. Each handler reads
//! the raw parts (user, key header values, path parameter, body) and hands them to
//! [`crate::flows`]; only reads talk to the store directly.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{Extension, FromRequest, FromRequestParts, Path, Request, State};
use axum::http::{HeaderMap, HeaderValue};
use axum::routing::{get, post};
use axum::{Json, Router};
use shared::api::PaymentWithRefunds;
use shared::prefer::{self, PREFER_HEADER};
use shared::{Problem, ProblemKind, UserId};
use uuid::Uuid;

use super::body::read_request_body;
use crate::domain::Reply;
use crate::error::{Error, Result};
use crate::flows::{Caller, Submitted, pay_bill, payment_body, refund_body, refund_payment};
use crate::state::AppState;

/// The payment routes, to be nested behind authentication.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/bills/{bill_id}/pay", post(pay))
        .route("/v1/payments/{payment_id}/refunds", post(refund))
        .route("/v1/payments/{payment_id}", get(read_payment_handler))
}

/// A payment or refund request as it arrived: its path parameter (`None` if it is not UTF-8
/// once percent-decoded), its headers and its whole body (read within the body limits, and
/// only when the path parameter is readable).
struct Sent {
    path_parameter: Option<String>,
    headers: HeaderMap,
    body: Bytes,
}

impl FromRequest<AppState> for Sent {
    type Rejection = Error;

    async fn from_request(request: Request, state: &AppState) -> Result<Sent, Error> {
        let (mut parts, body) = request.into_parts();
        let path = Path::<String>::from_request_parts(&mut parts, state).await;
        let path_parameter = path.ok().map(|Path(parameter)| parameter);
        // A path refused is refused before the body is read, whatever the body.
        let body = match path_parameter {
            Some(_) => read_request_body(state, body).await?,
            None => Bytes::new(),
        };
        Ok(Sent {
            path_parameter,
            headers: parts.headers,
            body,
        })
    }
}

impl Sent {
    /// The request for [`crate::flows`], naming `path_parameter`: every value of the policy's
    /// key header as raw bytes (a repeated header is refused there), and the body.
    fn submitted<'a>(&'a self, state: &AppState, path_parameter: &'a str) -> Submitted<'a> {
        let key_header_values = self.headers.get_all(state.policy.header.as_str()).iter();
        Submitted {
            key_header_values: key_header_values.map(HeaderValue::as_bytes).collect(),
            path_parameter,
            body: &self.body,
        }
    }
}

async fn pay(State(state): State<AppState>, caller: Caller, sent: Sent) -> Result<Reply> {
    let bill_id = sent
        .path_parameter
        .as_deref()
        .ok_or_else(|| Problem::invalid_field("bill_id", "bill_id is not a valid path segment"))?;
    pay_bill(&state, &caller, sent.submitted(&state, bill_id)).await
}

async fn refund(State(state): State<AppState>, caller: Caller, sent: Sent) -> Result<Reply> {
    let payment_id = sent.path_parameter.as_deref().ok_or_else(no_such_payment)?;
    refund_payment(&state, &caller, sent.submitted(&state, payment_id)).await
}

async fn read_payment_handler(
    State(state): State<AppState>,
    Extension(user): Extension<UserId>,
    payment_id: Result<Path<Uuid>, PathRejection>,
) -> Result<Json<PaymentWithRefunds>> {
    let Path(payment_id) = payment_id.map_err(|_| no_such_payment())?;
    let (payment, refunds) = state
        .claims()
        .load_payment_with_refunds(user, payment_id)
        .await?
        .ok_or_else(no_such_payment)?;
    let read = PaymentWithRefunds {
        payment: payment_body(&payment)?,
        refunds: refunds.iter().map(refund_body).collect::<Result<_, _>>()?,
    };
    Ok(Json(read))
}

/// The wait asked for with `Prefer: wait=N`, capped by the policy's `max_wait_seconds`.
pub fn requested_wait(state: &AppState, headers: &HeaderMap) -> Option<Duration> {
    let values = headers
        .get_all(PREFER_HEADER)
        .iter()
        .map(HeaderValue::as_bytes);
    prefer::requested_wait(values, state.policy.max_wait)
}

fn no_such_payment() -> Problem {
    Problem::new(ProblemKind::NotFound, "You have no payment with this id.")
}
