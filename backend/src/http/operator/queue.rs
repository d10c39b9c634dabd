//! The queue of keys that need someone, and "ask the bank now".
//!
//! `GET /admin/api/queue[?after=…&limit=…]`: a page of the `started`, `unknown` and released
//! keys still to be checked, oldest claim first (`next` pages on), and the newest page of the
//! late debits found (money that moved after its claim was released; `late_debits_next` pages
//! on through `GET /admin/api/late-debits[?before=…&limit=…]`, newest first, so a new late debit
//! is always on the first page however many came before it).
//!
//! `POST …/keys/{key}/ask-bank` with `{"reason": "…"}`: takes the key under a reconciler's
//! lease (so no reconciler, and no second operator, asks at the same time) and records the
//! operator's look-up in the trail in the lease's own transaction, then resolves it exactly as
//! the reconciler does
//! (`reconcile::resolve_leased`): a look-up by the claim's reference, never a debit. The reply
//! says what came of it: `resolved`, `released`, `voided`, `not_yet` (no final word at the
//! bank yet, or the rail's rules put the check off), `awaiting_settlement` (that was the
//! movement's last check the rail allows), or `already_final` (nothing to ask). The operator's
//! check counts against the movement's `status_checks.at_most` like any other. 409 while someone else holds the key (its
//! own request's bank call, or a reconciler); 404 for a key the customer does not have.

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use serde_json::{Value, json};
use shared::{KeyState, Problem, ProblemKind};
use uuid::Uuid;

use super::customers::event_json;
use super::paging::{
    DEFAULT_LIMIT, PageQuery, event_cursor, page_of, queue_cursor, queue_cursor_text,
};
use super::{CustomerRequest, action_of, rfc3339};
use crate::error::Error;
use crate::reconcile::{Resolution, resolve_leased};
use crate::state::AppState;
use crate::store::{KeyRef, LateDebit, Page, QueuedKey};

/// `GET /admin/api/queue`.
pub async fn queue(State(state): State<AppState>, query: PageQuery) -> Result<Json<Value>, Error> {
    let page = page_of(query, "after", queue_cursor)?;
    let keys = state.operator_reads().queued_keys(page).await?;
    let first_late = Page {
        from: None,
        limit: DEFAULT_LIMIT,
    };
    let late = state.operator_reads().late_debits(first_late).await?;
    let queued: Vec<Value> = keys.items.iter().map(queued_json).collect();
    let late_debits: Vec<Value> = late.items.iter().map(late_debit_json).collect();
    Ok(Json(json!({
        "keys": queued,
        "next": keys.next.as_ref().map(queue_cursor_text),
        "late_debits": late_debits,
        "late_debits_next": late.next.map(|id| id.to_string()),
    })))
}

/// `GET /admin/api/late-debits`.
pub async fn late_debits(
    State(state): State<AppState>,
    query: PageQuery,
) -> Result<Json<Value>, Error> {
    let page = page_of(query, "before", event_cursor)?;
    let late = state.operator_reads().late_debits(page).await?;
    let late_debits: Vec<Value> = late.items.iter().map(late_debit_json).collect();
    Ok(Json(json!({
        "late_debits": late_debits,
        "next": late.next.map(|id| id.to_string()),
    })))
}

fn late_debit_json(late: &LateDebit) -> Value {
    json!({
        "user_id": late.user_id.to_string(),
        "key": late.event.key,
        "movement_id": late.event.movement_id,
        "bank_reference": late.bank_reference,
        "amount_paise": late.amount_paise,
        "found": event_json(&late.event),
    })
}

fn queued_json(queued: &QueuedKey) -> Value {
    let age = (queued.read_at - queued.claimed_at).whole_seconds().max(0);
    json!({
        "user_id": queued.user_id.to_string(),
        "key": queued.key,
        "operation": queued.operation.name(),
        "state": queued.state.as_str(),
        "movement_id": queued.movement_id,
        "bank_reference": queued.bank_reference,
        "amount_paise": queued.amount_paise,
        "claimed_at": rfc3339(queued.claimed_at),
        "age_seconds": age,
        "next_lookup_at": queued.next_lookup_at.map(rfc3339),
        "failed_lookups": queued.failed_lookups,
        "status_checks": queued.status_checks,
        "settlement_due_at": queued.settlement_due_at.map(rfc3339),
    })
}

/// `POST /admin/api/customers/{user_id}/keys/{key}/ask-bank`.
pub async fn ask_bank(
    State(state): State<AppState>,
    asking: CustomerRequest,
    Path((_, key)): Path<(String, String)>,
    body: Body,
) -> Result<Json<Value>, Error> {
    let key = KeyRef {
        user: asking.user.clone(),
        key: Uuid::parse_str(&key).map_err(|_| no_such_key())?,
    };
    let action = action_of(&state, &asking, body).await?;
    let cause = asking.cause(action);
    let Some(leased) = state.leases().lease_key(key.clone(), Some(&cause)).await? else {
        return nothing_to_ask(&state, key).await;
    };
    let result = match resolve_leased(&state, leased, &cause).await? {
        Resolution::Finished(_) => "resolved",
        Resolution::Released => "released",
        Resolution::Voided => "voided",
        Resolution::NotYet { .. } => "not_yet",
        Resolution::AwaitingSettlement { .. } => "awaiting_settlement",
    };
    reply(&state, key, result).await
}

/// The key is not to be had: finished (or past its checks), held by someone, or not there.
async fn nothing_to_ask(state: &AppState, key: KeyRef) -> Result<Json<Value>, Error> {
    let Some(stored) = state.claims().load_key(key.clone()).await? else {
        return Err(no_such_key());
    };
    if stored.record.state == KeyState::Done || stored.record.state == KeyState::Released {
        return reply(state, key, "already_final").await;
    }
    Err(Problem::new(
        ProblemKind::RequestInProgress,
        "Someone is asking the bank about this key right now (its own request, or the \
         reconciler); look again in a few seconds.",
    )
    .into())
}

/// The reply: what came of it, and the key and its movement as they now stand.
async fn reply(state: &AppState, key: KeyRef, result: &str) -> Result<Json<Value>, Error> {
    let stored = state
        .claims()
        .load_key(key.clone())
        .await?
        .ok_or_else(no_such_key)?;
    let movement = state
        .claims()
        .load_movement(key, stored.operation, stored.movement_id)
        .await?;
    Ok(Json(json!({
        "result": result,
        "state": stored.record.state.as_str(),
        "status": movement.map(|movement| movement.status().name()),
    })))
}

fn no_such_key() -> Error {
    Problem::new(
        ProblemKind::NotFound,
        "This customer has no such key (a key is shown in the queue and on the customer's \
         actions as a UUID).",
    )
    .into()
}
