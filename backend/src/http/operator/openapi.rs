//! The operator API's own OpenAPI 3.1 document, served on the admin listener at
//! `GET /admin/openapi.json` (no token: it is documentation). Kept apart from the public
//! document (`http::openapi`), which customers' clients read; a test checks its paths are
//! exactly the operator API's routes.

use axum::Router;
use axum::routing::get;
use serde_json::{Value, json};

use crate::http::openapi::{path_parameter, problem, secured_operation};
use crate::state::AppState;

/// The document's route.
pub fn router() -> Router<AppState> {
    Router::new().route(
        "/admin/openapi.json",
        get(|| async { axum::Json(document()) }),
    )
}

/// The document.
pub fn document() -> Value {
    let user = path_parameter(
        "user_id",
        "The customer: the identity provider's subject (1-255 printable ASCII characters, percent-encoded)",
    );
    let key = path_parameter(
        "key",
        "The key's stored UUID, as the queue and the customer view show it",
    );
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Safe payment retries: operator API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The operator API on the admin listener (never public, never \
                through the edge). Every route needs an operator token: HS256 with the operator \
                secret (OPERATOR_JWT_SECRET, never the customers'), claim role: \"operator\", \
                sub: the operator's name. Every action is recorded in the audit trail with the \
                operator and the reason. Errors are application/problem+json.",
        },
        "paths": {
            "/admin/api/customers/{user_id}": { "get": operation(
                "customer", "A page of a customer's payments, refunds and keys, newest first, each with its audit trail (the read is recorded in the trail)",
                &[user.clone(), cursor("before"), limit()], None,
                json!({ "200": ok("Customer"), "404": problem("Not a customer id"), "422": problem("before or limit does not read") }),
            )},
            "/admin/api/customers/{user_id}/trail": { "get": operation(
                "customer_trail", "A page of a customer's whole audit trail, newest first (the read is recorded in the trail)",
                &[user.clone(), cursor("before"), limit()], None,
                json!({ "200": ok("Trail"), "404": problem("Not a customer id"), "422": problem("before or limit does not read") }),
            )},
            "/admin/api/queue": { "get": operation(
                "queue", "A page of the unfinished, unknown and released keys, oldest first, and the newest page of late debits",
                &[cursor("after"), limit()], None,
                json!({ "200": ok("Queue"), "422": problem("after or limit does not read") }),
            )},
            "/admin/api/late-debits": { "get": operation(
                "late_debits", "A page of the late debits found, newest first",
                &[cursor("before"), limit()], None,
                json!({ "200": ok("LateDebits"), "422": problem("before or limit does not read") }),
            )},
            "/admin/api/customers/{user_id}/keys/{key}/ask-bank": { "post": operation(
                "ask_bank", "Ask the bank about a key now, through the reconciler's look-up (never a debit)",
                &[user.clone(), key], Some("Reason"),
                json!({
                    "200": ok("AskBankResult"),
                    "400": problem("Body not JSON"),
                    "404": problem("The customer has no such key"),
                    "409": problem("Someone is asking the bank about this key right now"),
                    "422": problem("reason missing, empty, over 500 characters or with control characters"),
                }),
            )},
            "/admin/api/customers/{user_id}/ledger-check": { "post": operation(
                "ledger_check", "The bank's record of each of the customer's references against ours",
                &[user], Some("Reason"),
                json!({
                    "200": ok("LedgerCheck"),
                    "400": problem("Body not JSON"),
                    "404": problem("Not a customer id"),
                    "409": problem("A ledger check of this customer is running"),
                    "422": problem("reason missing, empty, over 500 characters or with control characters"),
                }),
            )},
        },
        "components": {
            "securitySchemes": { "operator": { "type": "http", "scheme": "bearer", "bearerFormat": "JWT" } },
            "schemas": schemas(),
        },
    })
}

fn schemas() -> Value {
    let event_names = [
        "claimed",
        "claimed_again",
        "replayed",
        "mismatch_refused",
        "in_progress_refused",
        "waited",
        "bank_answered",
        "bank_answer_unknown",
        "looked_up",
        "released",
        "late_debit_found",
        "resolved",
        "voided",
        "expired",
        "operator_lookup",
        "ledger_checked",
        "customer_viewed",
    ];
    let text = json!({ "type": "string" });
    let maybe_text = json!({ "type": ["string", "null"] });
    let next = json!({ "type": ["string", "null"], "description": "pass back to read the next page; null on the last" });
    let time = json!({ "type": "string", "format": "date-time" });
    json!({
        "Reason": object(json!({ "reason": { "type": "string", "minLength": 1, "maxLength": 500 } })),
        "Event": object(json!({
            "event_id": { "type": "integer", "description": "the order events were written in" },
            "at": time, "event": { "enum": event_names }, "detail": maybe_text,
            "request_id": maybe_text,
            "trace_id": { "type": ["string", "null"], "description": "the causing request's W3C trace id (32 hex digits)" },
            "operator": maybe_text, "reason": maybe_text,
            "repeats": { "type": "integer", "description": "identical observations folded into this one" },
        })),
        "Action": object(json!({
            "operation": { "enum": ["pay_bill", "refund_payment"] }, "id": text, "bill_id": text,
            "payment_id": text, "amount_paise": { "type": "integer" },
            "status": { "enum": ["pending", "succeeded", "declined", "void"] },
            "bank_reference": text, "created_at": time,
            "key": { "oneOf": [{ "type": "null" }, object(json!({
                "key": text, "state": { "enum": ["started", "unknown", "released", "done"] }, "expires_at": time,
            }))] },
            "events": { "type": "array", "items": { "$ref": "#/components/schemas/Event" } },
        })),
        "Customer": object(json!({
            "user_id": text,
            "actions": { "type": "array", "items": { "$ref": "#/components/schemas/Action" }, "description": "newest first" },
            "next": next.clone(),
            "events_complete": { "type": "boolean", "description": "false when this page's claims have more events than one read returns: page through the trail" },
            "events": { "type": "array", "items": { "$ref": "#/components/schemas/Event" }, "description": "the newest page of the customer's own events (ledger checks, reads), oldest first" },
            "events_next": next.clone(),
        })),
        "Trail": object(json!({
            "user_id": text,
            "events": { "type": "array", "items": { "$ref": "#/components/schemas/Event" }, "description": "newest first" },
            "next": next.clone(),
        })),
        "LateDebit": object(json!({
            "user_id": text, "key": maybe_text, "movement_id": maybe_text,
            "bank_reference": maybe_text, "amount_paise": { "type": ["integer", "null"] },
            "found": { "$ref": "#/components/schemas/Event" },
        })),
        "LateDebits": object(json!({
            "late_debits": { "type": "array", "items": { "$ref": "#/components/schemas/LateDebit" }, "description": "newest first" },
            "next": next.clone(),
        })),
        "Queue": object(json!({
            "keys": { "type": "array", "items": object(json!({
                "user_id": text, "key": text, "operation": text,
                "state": { "enum": ["started", "unknown", "released"] }, "movement_id": text,
                "bank_reference": maybe_text, "amount_paise": { "type": ["integer", "null"] },
                "claimed_at": time, "age_seconds": { "type": "integer" },
                "next_lookup_at": { "type": ["string", "null"], "format": "date-time" },
                "failed_lookups": { "type": "integer" },
                "status_checks": { "type": "integer", "description": "status checks sent for its movement (of the policy's status_checks.at_most)" },
                "settlement_due_at": { "type": ["string", "null"], "format": "date-time", "description": "set when its checks ran out undecided: it awaits the bank's settlement file" },
            })) },
            "next": next.clone(),
            "late_debits": { "type": "array", "items": { "$ref": "#/components/schemas/LateDebit" }, "description": "the newest page, newest first" },
            "late_debits_next": next.clone(),
        })),
        "AskBankResult": object(json!({
            "result": { "enum": ["resolved", "released", "voided", "not_yet", "awaiting_settlement", "already_final"] },
            "state": text, "status": maybe_text,
        })),
        "LedgerCheck": object(json!({
            "user_id": text, "checked_at": time, "movements_checked": { "type": "integer" },
            "complete": { "type": "boolean", "description": "every movement of the customer checked, and the bank's word had on each" },
            "older_movements_unchecked": { "type": "boolean" },
            "clean": { "type": "boolean", "description": "complete, and nothing found" },
            "entries": { "type": "array", "items": object(json!({
                "reference": text, "operation": text, "bill_id": text, "amount_paise": { "type": "integer" },
                "our_status": text,
                "bank_status": { "enum": ["succeeded", "declined", "never_seen", "pending", "lookup_failed"] },
            })) },
            "findings": { "type": "array", "items": object(json!({
                "kind": { "enum": ["double_charge", "bank_moved_we_did_not", "we_moved_bank_did_not", "lookup_failed"] },
                "detail": text,
                "references": { "type": "array", "items": text },
            })) },
        })),
        "Problem": object(json!({
            "type": text, "title": text, "status": { "type": "integer" }, "detail": text, "field": text,
        })),
    })
}

fn object(properties: Value) -> Value {
    json!({ "type": "object", "properties": properties })
}

/// An operation of the operator API: every one may reply 401 and 403.
fn operation(
    id: &str,
    summary: &str,
    parameters: &[Value],
    body_schema: Option<&str>,
    mut responses: Value,
) -> Value {
    responses["401"] = problem("No operator token, or a forged, malformed or expired one");
    responses["403"] = problem("A genuine token without the operator role");
    secured_operation("operator", id, summary, parameters, body_schema, responses)
}

/// A page's cursor parameter (`before` or `after`), as a previous page's `next` gave it.
fn cursor(name: &str) -> Value {
    json!({ "name": name, "in": "query", "required": false,
            "description": "The next value of the page before (absent for the first page)",
            "schema": { "type": "string" } })
}

fn limit() -> Value {
    json!({ "name": "limit", "in": "query", "required": false,
            "description": "Items per page", "schema": { "type": "integer", "minimum": 1, "maximum": 200, "default": 50 } })
}

fn ok(schema: &str) -> Value {
    json!({ "description": "OK", "content": { "application/json": {
        "schema": { "$ref": format!("#/components/schemas/{schema}") } } } })
}
