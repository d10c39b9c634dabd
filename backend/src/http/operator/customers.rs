//! `GET /admin/api/customers/{user_id}`: a customer's payments and refunds, newest first, each
//! with its key (if still stored) and the trail of its claim, oldest event first; and the
//! customer's own events (ledger checks). Reading it is not recorded: it changes nothing.

use axum::Json;
use axum::extract::{Path, State};
use serde_json::{Value, json};

use super::{customer_from_path, rfc3339};
use crate::error::Error;
use crate::state::AppState;
use crate::store::{CustomerKey, CustomerRecord, StoredEvent};

/// The handler.
pub async fn customer(
    State(state): State<AppState>,
    Path(user_id): Path<String>,
) -> Result<Json<Value>, Error> {
    let user = customer_from_path(&user_id)?;
    let record = state.store.customer_record(user.as_i64()).await?;
    Ok(Json(customer_json(user.get(), &record)))
}

fn customer_json(user_id: u64, record: &CustomerRecord) -> Value {
    let actions: Vec<Value> = record
        .movements
        .iter()
        .map(|movement| {
            let key = record
                .keys
                .iter()
                .find(|key| key.resource_id == movement.id)
                .map(key_json);
            let events: Vec<Value> = record
                .events
                .iter()
                .filter(|event| event.resource_id == Some(movement.id))
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
                "key": key,
                "events": events,
            })
        })
        .collect();
    let own_events: Vec<Value> = record
        .events
        .iter()
        .filter(|event| event.resource_id.is_none())
        .map(event_json)
        .collect();
    json!({
        "user_id": user_id.to_string(),
        "actions": actions,
        "events": own_events,
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
        "at": rfc3339(event.at),
        "event": event.event,
        "detail": event.detail,
        "request_id": event.request_id,
        "operator": event.operator,
        "reason": event.reason,
        "repeats": event.repeats,
    })
}
