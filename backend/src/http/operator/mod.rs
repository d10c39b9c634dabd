//! The operator console and its API, on the admin listener only (SPEC §8): the operators'
//! view of keys and the few actions it may take. Nothing here is on the public listener, and the
//! edge replies 404 for everything under `/admin` (`edge/src/operator_routes.rs`).
//!
//! | route | what |
//! |---|---|
//! | `GET /admin/console` (`.js`, `.css`) | the console page ([`console`]), no token needed to load it |
//! | `GET /admin/openapi.json` | this API's OpenAPI document ([`openapi`]), no token needed |
//! | `GET /admin/api/customers/{user_id}` | a page of a customer's payments, refunds and keys, newest first, each with its trail ([`customers`]) |
//! | `GET /admin/api/customers/{user_id}/trail` | a page of the customer's whole trail, newest first ([`customers`]) |
//! | `GET /admin/api/queue` | a page of the unfinished, unknown and released keys, oldest first, and the newest late debits ([`queue`]) |
//! | `GET /admin/api/late-debits` | a page of the late debits found, newest first ([`queue`]) |
//! | `POST /admin/api/customers/{user_id}/keys/{key}/ask-bank` | "ask the bank now", through the reconciler's own path ([`queue`]) |
//! | `POST /admin/api/customers/{user_id}/ledger-check` | the bank's record of each of the customer's references against ours ([`ledger_check`]) |
//!
//! Every API route needs an operator token ([`token`]); every action is recorded in the trail
//! with the operator's name and reason, and every read of a customer's record or trail with the
//! operator's name (`customer_viewed`). Lists page with a cursor ([`paging`]), so nothing is out
//! of reach. Replies are JSON; refusals are problem+json.

mod console;
mod customers;
mod ledger_check;
mod openapi;
mod paging;
mod queue;

use axum::Router;
use axum::body::Body;
use axum::extract::{FromRequestParts, Path, Request, State};
use axum::http::request::Parts;
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use shared::auth::UserId;
use shared::{Problem, ProblemKind};
use time::OffsetDateTime;

use super::auth::{authorization, unix_now};
use super::body::read_request_body;
use crate::domain::{Cause, EventKind, NewEvent, OperatorAction, RequestId, TraceId};
use crate::error::Error;
use crate::identity::{Operator, Refusal};
use crate::state::AppState;

/// The console and its API, to be merged into the admin listener's router.
pub fn router(state: AppState) -> Router<AppState> {
    let api = Router::new()
        .route("/admin/api/customers/{user_id}", get(customers::customer))
        .route(
            "/admin/api/customers/{user_id}/trail",
            get(customers::trail),
        )
        .route("/admin/api/queue", get(queue::queue))
        .route("/admin/api/late-debits", get(queue::late_debits))
        .route(
            "/admin/api/customers/{user_id}/keys/{key}/ask-bank",
            post(queue::ask_bank),
        )
        .route(
            "/admin/api/customers/{user_id}/ledger-check",
            post(ledger_check::ledger_check),
        )
        .route_layer(from_fn_with_state(state, require_operator));
    Router::new()
        .merge(console::router())
        .merge(openapi::router())
        .merge(api)
}

/// Lets a request through only with an operator token, naming the operator to the handler.
async fn require_operator(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let verified = state
        .operator_tokens
        .verify(authorization(request.headers()), unix_now())
        .await;
    match verified {
        Ok(operator) => {
            request.extensions_mut().insert(operator);
            next.run(request).await
        }
        Err(Refusal::Unauthenticated(reason)) => {
            tracing::info!(%reason, "operator API: token refused");
            Error::from(Problem::new(
                ProblemKind::Unauthenticated,
                "An operator token is required (Authorization: Bearer …).",
            ))
            .into_response()
        }
        Err(Refusal::NotConfigured) => Error::from(Problem::new(
            ProblemKind::Unauthenticated,
            "The operator console is closed on this backend: no operator keys \
             (OPERATOR_JWKS_URL, AUTH_JWKS_URL) or OPERATOR_JWT_SECRET are configured.",
        ))
        .into_response(),
        Err(Refusal::NotOperator) => Error::from(Problem::new(
            ProblemKind::Forbidden,
            "This token is not an operator's: it lacks the operator role.",
        ))
        .into_response(),
    }
}

/// An operator's request about one customer, for a handler behind [`require_operator`]: the
/// operator, the request their reads and actions are recorded against, and the customer the
/// path's first segment names (a positive integer user id, else 404).
pub struct CustomerRequest {
    operator: Operator,
    request_id: RequestId,
    trace_id: TraceId,
    user: UserId,
}

impl FromRequestParts<AppState> for CustomerRequest {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Error> {
        let operator = parts.extensions.get::<Operator>().cloned();
        let request_id = parts.extensions.get::<RequestId>().cloned();
        let trace_id = parts.extensions.get::<TraceId>().copied();
        let Path(segments) = Path::<Vec<String>>::from_request_parts(parts, state)
            .await
            .map_err(|_| no_such_customer())?;
        let first = segments.first().ok_or_else(no_such_customer)?;
        Ok(CustomerRequest {
            operator: operator.ok_or(Error::Misrouted("an operator"))?,
            request_id: request_id.ok_or(Error::Misrouted("a request id"))?,
            trace_id: trace_id.ok_or(Error::Misrouted("a trace id"))?,
            user: UserId::from_subject(first).map_err(|_| no_such_customer())?,
        })
    }
}

impl CustomerRequest {
    /// The cause of this request's action `action`, for the trail.
    fn cause(&self, action: OperatorAction) -> Cause {
        Cause::operator(&self.request_id, self.trace_id, action)
    }
}

fn no_such_customer() -> Error {
    Error::from(Problem::new(
        ProblemKind::NotFound,
        "No such customer: a customer id is a positive integer.",
    ))
}

/// The longest reason kept.
const MAX_REASON_CHARS: usize = 500;

#[derive(Deserialize)]
struct ReasonBody {
    reason: Option<serde_json::Value>,
}

/// The operator's action of this request: who (the token's subject) and why (the body's
/// `reason`, required: 1 to 500 characters).
async fn action_of(
    state: &AppState,
    asking: &CustomerRequest,
    body: Body,
) -> Result<OperatorAction, Error> {
    let bytes = read_request_body(state, body).await?;
    let parsed: ReasonBody = serde_json::from_slice(&bytes).map_err(|_| {
        Problem::new(
            ProblemKind::BodyNotJson,
            "The body must be a JSON object with a \"reason\".",
        )
    })?;
    let reason = match parsed.reason {
        Some(serde_json::Value::String(reason)) => reason.trim().to_owned(),
        _ => String::new(),
    };
    if reason.is_empty() || reason.chars().count() > MAX_REASON_CHARS {
        return Err(Problem::invalid_field(
            "reason",
            format!(
                "Say why, in 1 to {MAX_REASON_CHARS} characters: it is kept in the audit trail."
            ),
        )
        .into());
    }
    if reason.chars().any(char::is_control) {
        return Err(Problem::invalid_field(
            "reason",
            "The reason must be one line of text, without control characters.",
        )
        .into());
    }
    Ok(OperatorAction {
        operator: asking.operator.name.clone(),
        reason: Some(reason),
    })
}

/// Records in the customer's trail that the operator of `asking` read their `what`, before
/// the read is replied to: an operator's look at a customer's money is on the record, like their
/// actions.
async fn record_read(state: &AppState, asking: &CustomerRequest, what: &str) -> Result<(), Error> {
    let reader = OperatorAction {
        operator: asking.operator.name.clone(),
        reason: None,
    };
    let read = NewEvent::of_customer(
        asking.user.clone(),
        EventKind::CustomerViewed,
        format!("read the customer's {what}"),
        &asking.cause(reader),
    );
    state.trail_writes().append_event(&read).await?;
    Ok(())
}

/// RFC 3339, as every time on the operator API is written.
fn rfc3339(at: OffsetDateTime) -> String {
    at.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| at.to_string())
}
