//! `POST /bank/callbacks` (SPEC §7, "Bank callbacks"), on the admin listener only: the bank
//! pushes a movement's final status, signed with a secret the two share
//! ([`bank_api::callback`]), and the movement is settled at once, with no status check, as one
//! line of the settlement file would settle it (the store's `settle`).
//!
//! Checked in this order, each refusal a problem that names it: the route is open only when
//! `BANK_CALLBACK_SECRET` is set (404 otherwise); the `Bank-Signature` must be well formed,
//! within 5 minutes of our clock and made under the current or the previous secret (401); the
//! body must be a callback with a settlement word (400, 422). Then: applied (200 `applied`),
//! already so here (200 `already_final`: a duplicate changes nothing), contradicting our records
//! (409 `mismatch`, written to the key's trail, never applied), or a reference we never issued
//! (404 `unknown_reference`, logged and counted for the operator). Every reply is counted in
//! `payments_bank_callbacks_total{result}`.

use axum::Extension;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use bank_api::callback::{CallbackBody, SIGNATURE_HEADER, SignatureError, verify};
use secret_settings::ExposeSecret;
use serde_json::json;
use shared::{Problem, ProblemKind};
use time::OffsetDateTime;

use crate::domain::{Cause, RequestId, TraceId};
use crate::error::{Error, Result};
use crate::state::AppState;
use crate::store::{Settlement, StoreError};

/// `POST /bank/callbacks`: the handler, routed by the admin listener (`http::admin`).
pub async fn receive(
    State(state): State<AppState>,
    Extension(request_id): Extension<RequestId>,
    Extension(trace_id): Extension<TraceId>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response> {
    let counted = |result: &'static str| state.metrics.bank_callback(result);
    if state.bank_callback_secrets.is_empty() {
        counted("closed");
        return Err(Problem::new(
            ProblemKind::NotFound,
            "Bank callbacks are not accepted here: BANK_CALLBACK_SECRET is not set.",
        )
        .into());
    }
    let now = OffsetDateTime::now_utc();
    let signature = headers
        .get(SIGNATURE_HEADER)
        .and_then(|value| value.to_str().ok());
    let secrets = state.bank_callback_secrets.iter();
    if let Err(refused) = verify(
        signature,
        &body,
        now.unix_timestamp(),
        secrets.map(|secret| secret.expose_secret().as_bytes()),
    ) {
        counted("refused");
        tracing::warn!(%refused, "bank callback refused");
        return Err(refusal(refused));
    }
    let callback: CallbackBody = serde_json::from_slice(&body).map_err(|error| {
        counted("refused");
        Problem::new(
            ProblemKind::BodyNotJson,
            format!("The callback is not {{\"reference\", \"amount_paise\", \"status\"}}: {error}"),
        )
    })?;
    let Some(line) = callback.as_settlement(now) else {
        counted("refused");
        return Err(Error::from(Problem::invalid_field(
            "status",
            "A callback's status is debited, refunded, declined or rejected.",
        )));
    };
    let cause = Cause::request(&request_id, trace_id);
    let settled = state
        .leases()
        .settle(std::slice::from_ref(&line), &cause)
        .await?;
    let Some(settlement) = settled.into_iter().next() else {
        return Err(Error::from(StoreError::Corrupt(
            "the store settled no line of a one-line batch".to_owned(),
        )));
    };
    let (status, result, detail) = match settlement {
        Settlement::Resolved => (StatusCode::OK, "applied", None),
        Settlement::AlreadyFinal => (StatusCode::OK, "already_final", None),
        Settlement::Mismatched(why) => {
            tracing::warn!(reference = line.reference, %why, "bank callback contradicts our records; not applied");
            (StatusCode::CONFLICT, "mismatch", Some(why))
        }
        Settlement::UnknownReference => {
            tracing::warn!(
                reference = line.reference,
                "bank callback for a reference we never issued"
            );
            (StatusCode::NOT_FOUND, "unknown_reference", None)
        }
    };
    counted(result);
    let body = json!({ "result": result, "reference": line.reference, "detail": detail });
    Ok((status, axum::Json(body)).into_response())
}

/// 401 naming what was wrong with the signature.
fn refusal(refused: SignatureError) -> Error {
    Problem::new(
        ProblemKind::Unauthenticated,
        format!("The bank callback was refused: {refused}."),
    )
    .into()
}
