//! `GET /v1/idempotency-keys/{key}`: where one of the caller's keys stands (SPEC §6).
//!
//! A client that stopped retrying (its deadline passed, or it restarted) asks here instead of
//! paying again. The key is written as in the `Idempotency-Key` header, bare or in the draft's
//! quoted form, and parsed with the policy's key format. It is looked up only together with the
//! token's user, so another user's key is the same 404 as a key never sent. Replies, as
//! [`KeyStatusResponse`], each with `expires_at` (the expiry written on the key's row at its
//! claim, also in the `Idempotency-Expires` header):
//! - `done`: the saved reply rendered by [`Reply::saved`], as a retry would replay it: its
//!   status (201, or 402 for a bank decline) and, as `reply`, its body byte for byte;
//! - `started` (the first attempt is running, `Retry-After: 1`) or `unknown` (the bank's reply
//!   is being looked up, `Retry-After: 5`, with `next_check_at`, or `settlement_due_at` once the
//!   rail's checks ran out);
//! - `released`: the bank never saw the key's claim, so nothing was charged; the same request
//!   sent again with the key claims it again.
//!
//! With `Prefer: wait=N` a `started` key is waited on as a payment retry waits
//! ([`crate::flows::Waiting`]): the reply is the key's state once it leaves `started`, or
//! `started` when the wait runs out, with `Preference-Applied: wait=N`.
//!
//! Reading changes nothing: a key stuck in `started` is left to the reconciler.

use std::time::Duration;

use axum::Router;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::value::RawValue;
use shared::api::{KeyProgress, KeyStatusResponse};
use shared::decision::{IN_PROGRESS_RETRY_AFTER, OUTCOME_PENDING_RETRY_AFTER};
use shared::{IdempotencyKey, KeyState, Problem, ProblemKind};

use super::reply_response::{mark_expiry, mark_wait_applied};
use crate::domain::Cause;
use crate::error::Result;
use crate::flows::{Caller, Waiting, saved_reply};
use crate::reconcile;
use crate::state::AppState;
use crate::store::{KeyRef, StoreError, StoredKey};

/// The key status route, to be nested behind authentication.
pub fn router() -> Router<AppState> {
    Router::new().route("/v1/idempotency-keys/{key}", get(key_status_handler))
}

#[tracing::instrument(skip_all, fields(user_id = %caller.user, key))]
async fn key_status_handler(
    State(state): State<AppState>,
    caller: Caller,
    key: Result<Path<String>, PathRejection>,
) -> Result<Response> {
    let Path(key) = key.map_err(|_| {
        Problem::new(
            ProblemKind::IdempotencyKeyMalformed,
            "The key in the path is not valid text.",
        )
    })?;
    let key = IdempotencyKey::parse_header(key.as_bytes(), state.policy.key_format)
        .map_err(|error| Problem::from(&error))?;
    tracing::Span::current().record("key", tracing::field::display(&key));
    let key = KeyRef::new(caller.user, &key);
    let cause = Cause::request(&caller.request_id, caller.trace_id);
    let mut waiting = Waiting::new(&state, caller.wait);
    let started = |stored: &StoredKey| stored.record.state == KeyState::Started;
    let stored = waiting
        .look_until_settled(
            key.clone(),
            &cause,
            |_| load_key(&state, key.clone()),
            started,
        )
        .await?;
    let mut response = reply_stored_key(&state, key, &stored).await?;
    if let Some(wait) = waiting.waited(started(&stored)) {
        mark_wait_applied(response.headers_mut(), wait);
    }
    mark_expiry(response.headers_mut(), stored.record.expires_at);
    Ok(response)
}

/// The caller's key as stored, or 404.
async fn load_key(state: &AppState, key: KeyRef) -> Result<StoredKey> {
    let stored = state.claims().load_key(key).await?;
    stored.ok_or_else(|| {
        Problem::new(
            ProblemKind::NotFound,
            "You have no idempotency key with this value.",
        )
        .into()
    })
}

async fn reply_stored_key(state: &AppState, key: KeyRef, stored: &StoredKey) -> Result<Response> {
    let status = |progress| KeyStatusResponse {
        operation: stored.operation,
        expires_at: stored.record.expires_at,
        progress,
    };
    Ok(match stored.record.state {
        KeyState::Started => {
            json_response(&status(KeyProgress::Started), Some(IN_PROGRESS_RETRY_AFTER))
        }
        KeyState::Unknown => json_response(
            &status(KeyProgress::Unknown {
                next_check_at: reconcile::next_check_at(state, stored),
                settlement_due_at: stored.settlement_due_at,
            }),
            Some(OUTCOME_PENDING_RETRY_AFTER),
        ),
        KeyState::Released => json_response(&status(KeyProgress::Released), None),
        KeyState::Done => json_response(&status(done_progress(state, key, stored).await?), None),
    })
}

/// The finished key's reply, rendered as a replay renders it, its body kept byte for byte.
async fn done_progress(state: &AppState, key: KeyRef, stored: &StoredKey) -> Result<KeyProgress> {
    let movement = state.claims().saved_movement(key, stored).await?;
    let reply = saved_reply(&movement)?;
    let body = String::from_utf8(reply.body)
        .ok()
        .and_then(|text| RawValue::from_string(text).ok())
        .ok_or_else(|| StoreError::Corrupt("saved reply is not JSON".to_owned()))?;
    Ok(KeyProgress::Done {
        status: reply.status,
        reply: body,
    })
}

/// 200 with the status; never cached, since a pending key changes.
fn json_response(status: &KeyStatusResponse, retry_after: Option<Duration>) -> Response {
    let mut response = axum::Json(status).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Some(wait) = retry_after {
        headers.insert(
            header::RETRY_AFTER,
            HeaderValue::from(wait.as_secs().max(1)),
        );
    }
    response
}
