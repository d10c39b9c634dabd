//! A customer as operators read them, a page at a time, each read recorded in the
//! customer's trail (`customer_viewed`, with the operator's name):
//! - `GET /admin/api/customers/{user_id}[?before=…&limit=…]`: a page of the customer's payments
//!   and refunds, newest first, each with its key (if still stored) and the trail of its claim,
//!   oldest event first; `next` pages on. Also the newest page of the customer's own events
//!   (operators' ledger checks and reads), oldest first, with `events_next` to page on through
//!   the trail.
//! - `GET /admin/api/customers/{user_id}/trail[?before=…&limit=…]`: the customer's whole trail,
//!   every event of every claim and their own, newest first; `next` pages on.

use std::collections::HashMap;

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};
use uuid::Uuid;

use super::paging::{
    DEFAULT_LIMIT, PageQuery, event_cursor, movement_cursor, movement_cursor_text, page_of,
};
use super::{CustomerRequest, record_read, rfc3339};
use crate::error::Error;
use crate::state::AppState;
use crate::store::{CustomerKey, CustomerMovement, Page, StoredEvent, TrailOf};

/// `GET /admin/api/customers/{user_id}`.
pub async fn customer(
    State(state): State<AppState>,
    asking: CustomerRequest,
    query: PageQuery,
) -> Result<Json<Value>, Error> {
    let page = page_of(query, "before", movement_cursor)?;
    record_read(&state, &asking, "payments, refunds and keys").await?;
    let reads = state.operator_reads();
    let movements = reads.customer_movements(asking.user.clone(), page).await?;
    let claims: Vec<Uuid> = movements.items.iter().map(|movement| movement.id).collect();
    let (keys, events) = reads.customer_claims(asking.user.clone(), &claims).await?;
    let own_page = Page {
        from: None,
        limit: DEFAULT_LIMIT,
    };
    let own = reads
        .customer_trail(asking.user.clone(), TrailOf::CustomerOnly, own_page)
        .await?;
    let events_complete =
        i64::try_from(events.len()).unwrap_or(i64::MAX) < crate::store::CLAIM_EVENTS_LIMIT;
    let keys: HashMap<Uuid, &CustomerKey> = keys.iter().map(|key| (key.movement_id, key)).collect();
    let actions: Vec<Value> = movements
        .items
        .iter()
        .map(|movement| action_json(movement, keys.get(&movement.id).copied(), &events))
        .collect();
    let own_events: Vec<Value> = own.items.iter().rev().map(event_json).collect();
    Ok(Json(json!({
        "user_id": asking.user.to_string(),
        "actions": actions,
        "next": movements.next.as_ref().map(movement_cursor_text),
        "events_complete": events_complete,
        "events": own_events,
        "events_next": own.next.map(|id| id.to_string()),
    })))
}

/// `GET /admin/api/customers/{user_id}/trail`.
pub async fn trail(
    State(state): State<AppState>,
    asking: CustomerRequest,
    query: PageQuery,
) -> Result<Json<Value>, Error> {
    let page = page_of(query, "before", event_cursor)?;
    record_read(&state, &asking, "trail").await?;
    let trail = state
        .operator_reads()
        .customer_trail(asking.user.clone(), TrailOf::Everything, page)
        .await?;
    let events: Vec<Value> = trail.items.iter().map(event_json).collect();
    Ok(Json(json!({
        "user_id": asking.user.to_string(),
        "events": events,
        "next": trail.next.map(|id| id.to_string()),
    })))
}

fn action_json(
    movement: &CustomerMovement,
    key: Option<&CustomerKey>,
    events: &[StoredEvent],
) -> Value {
    let events: Vec<Value> = events
        .iter()
        .filter(|event| event.movement_id == Some(movement.id))
        .map(event_json)
        .collect();
    json!({
        "operation": movement.operation.name(),
        "id": movement.id,
        "bill_id": movement.bill_id,
        "payment_id": movement.payment_id,
        "amount_paise": movement.amount_paise,
        "status": movement.status.name(),
        "bank_reference": movement.bank_reference,
        "created_at": rfc3339(movement.created_at),
        "key": key.map(key_json),
        "events": events,
    })
}

fn key_json(key: &CustomerKey) -> Value {
    json!({
        "key": key.key,
        "state": key.state.as_str(),
        "expires_at": rfc3339(key.expires_at),
    })
}

/// One trail event as the operator API writes it.
pub fn event_json(event: &StoredEvent) -> Value {
    json!({
        "event_id": event.event_id,
        "at": rfc3339(event.at),
        "event": event.event,
        "detail": event.detail,
        "request_id": event.request_id,
        "trace_id": event.trace_id,
        "operator": event.operator,
        "reason": event.reason,
        "repeats": event.repeats,
    })
}
