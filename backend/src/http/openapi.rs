//! The published API: an OpenAPI 3.1 document of every route, header and problem type, served at
//! `GET /openapi.json`. Built in code from the same constants the service uses (the problem
//! kinds, the policy's header and limits), so it cannot drift from them; a test checks that its
//! paths and methods are exactly the router's.

use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};
use shared::ProblemKind;
use shared::api::MAX_AMOUNT_PAISE;
use shared::key::MAX_KEY_LEN;

use crate::state::AppState;

/// The document's route.
pub fn router() -> Router<AppState> {
    Router::new().route("/openapi.json", get(serve_document))
}

async fn serve_document(State(state): State<AppState>) -> Response {
    axum::Json(document(&state)).into_response()
}

/// The 429 of the guarded operations: the edge answers it before the key is looked at.
const RATE_LIMITED: &str =
    "Over the edge's rate limit (answered by the edge: nothing was done, the key is untouched)";

/// The OpenAPI document.
pub fn document(state: &AppState) -> Value {
    let policy = &state.policy;
    let problem_slugs: Vec<&str> = ProblemKind::ALL.iter().map(|kind| kind.slug()).collect();
    let problem_types: Vec<String> = ProblemKind::ALL
        .iter()
        .map(|kind| kind.type_uri())
        .collect();
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Safe payment retries",
            "version": env!("CARGO_PKG_VERSION"),
            "description": format!(
                "Bill payments and refunds, done once per (user, {header}) and replayed to every \
                 repeat. Keys are kept {hours} hours. Every error is application/problem+json \
                 (RFC 9457) with type /problems/{{slug}}; slugs: {slugs}.",
                header = policy.header,
                hours = policy.keep_keys_for.as_secs() / 3600,
                slugs = problem_slugs.join(", "),
            ),
        },
        "paths": {
            "/v1/bills/{bill_id}/pay": { "post": secured_operation("bearer",
                "pay_bill", "Pay a bill once per Idempotency-Key",
                &[path_parameter("bill_id", "The bill: 1-64 of A-Z a-z 0-9 - _ ."), key_parameter(), prefer_parameter()],
                Some("PayBillRequest"),
                idempotent_responses(json!({
                    "201": created("Payment", true),
                    "402": replayable_problem("The bank declined (saved and replayed)"),
                    "422": problem("Invalid field, or the key was used for a different request"),
                })),
            )},
            "/v1/payments/{payment_id}/refunds": { "post": secured_operation("bearer",
                "refund_payment", "Refund part of a payment once per Idempotency-Key",
                &[path_parameter("payment_id", "The payment's id (a UUID)"), key_parameter(), prefer_parameter()],
                Some("RefundRequest"),
                idempotent_responses(json!({
                    "201": created("Refund", false),
                    "402": replayable_problem("The bank refused the refund (saved and replayed)"),
                    "404": problem("No succeeded payment with this id for this user"),
                    "422": problem("Invalid field, refund over the remaining amount, or key reused"),
                })),
            )},
            "/v1/payments/{payment_id}": { "get": secured_operation("bearer",
                "read_payment", "Read one of your payments with its refunds",
                &[path_parameter("payment_id", "The payment's id (a UUID)")],
                None,
                json!({
                    "200": { "description": "The payment", "content": { "application/json": {
                        "schema": { "$ref": "#/components/schemas/PaymentWithRefunds" } } } },
                    "401": problem("No valid bearer token"),
                    "404": problem("No such payment for this user"),
                }),
            )},
            "/v1/idempotency-keys/{key}": { "get": secured_operation("bearer",
                "key_status",
                "Where one of your idempotency keys stands: its saved outcome, or pending",
                &[path_parameter("key", "The key as sent in Idempotency-Key: bare, or the quoted form percent-encoded"), prefer_parameter()],
                None,
                json!({
                    "200": {
                        "description": "done: the saved answer (as a retry would replay it); started or unknown: pending, with Retry-After; released: the bank never saw the claim, nothing was charged, and the same request with the key claims it again",
                        "headers": {
                            "Retry-After": { "$ref": "#/components/headers/Retry-After" },
                            "Preference-Applied": { "$ref": "#/components/headers/Preference-Applied" },
                            "Idempotency-Expires": { "$ref": "#/components/headers/Idempotency-Expires" },
                        },
                        "content": { "application/json": { "schema": { "$ref": "#/components/schemas/KeyStatus" } } },
                    },
                    "400": problem("Malformed key (the policy's key format)"),
                    "401": problem("No valid bearer token"),
                    "404": problem("No such key for this user (another user's key is the same 404)"),
                    "503": retry_problem("The database is unavailable"),
                }),
            )},
            "/healthz": { "get": public("healthz", "The process is up", "text/plain") },
            "/readyz": { "get": public("readyz", "The database answered the last readiness check (503 problem if not)", "text/plain") },
            "/idempotency-policy": { "get": public(
                "idempotency_policy",
                "The published idempotency policy: header, key format, retention",
                "application/json",
            )},
            "/problems/{slug}": { "get": {
                "operationId": "problem_type",
                "summary": "The description of a problem type",
                "parameters": [path_parameter("slug", "A problem slug")],
                "responses": {
                    "200": { "description": "The type, title and status" },
                    "404": problem("No such problem type"),
                },
            }},
            "/openapi.json": { "get": public("openapi", "This document", "application/json") },
        },
        "components": {
            "securitySchemes": {
                "bearer": { "type": "http", "scheme": "bearer", "bearerFormat": "JWT (HS256; sub = user id, exp)" },
            },
            "headers": {
                "Idempotent-Replayed": {
                    "description": "true on every answer replayed from a saved result",
                    "schema": { "type": "string", "enum": ["true"] },
                },
                "Retry-After": {
                    "description": "Seconds to wait before retrying with the same key and body",
                    "schema": { "type": "integer", "minimum": 1 },
                },
                "Location": {
                    "description": "The created payment: /v1/payments/{payment_id}",
                    "schema": { "type": "string" },
                },
                "Preference-Applied": {
                    "description": "wait=N on an answer given after waiting (up to N seconds) for the key's first attempt",
                    "schema": { "type": "string", "examples": ["wait=10"] },
                },
                "Idempotency-Expires": {
                    "description": "When the request's key expires (an HTTP date, rounded down to the second), as written on its row at its first claim; on every answer to a request whose key is stored",
                    "schema": { "type": "string", "examples": ["Thu, 03 Dec 2026 10:00:00 GMT"] },
                },
            },
            "schemas": {
                "PayBillRequest": {
                    "type": "object", "additionalProperties": false,
                    "required": ["amount_paise", "payer_vpa"],
                    "properties": { "amount_paise": amount(), "payer_vpa": {
                        "type": "string", "maxLength": 255, "examples": ["asha@okbank"] } },
                },
                "RefundRequest": {
                    "type": "object", "additionalProperties": false,
                    "required": ["amount_paise"], "properties": { "amount_paise": amount() },
                },
                "Payment": {
                    "type": "object",
                    "required": ["payment_id", "bill_id", "amount_paise", "status", "bank_reference"],
                    "properties": {
                        "payment_id": { "type": "string", "format": "uuid" },
                        "bill_id": { "type": "string" },
                        "amount_paise": amount(),
                        "status": { "type": "string", "enum": ["succeeded", "pending", "declined", "void"] },
                        "bank_reference": { "type": "string", "description": "pay-{payment_id}: this claim's own (rows before per-claim references: pay-{user_id}-{key})" },
                    },
                },
                "Refund": {
                    "type": "object",
                    "required": ["refund_id", "payment_id", "amount_paise", "status", "bank_reference"],
                    "properties": {
                        "refund_id": { "type": "string", "format": "uuid" },
                        "payment_id": { "type": "string", "format": "uuid" },
                        "amount_paise": amount(),
                        "status": { "type": "string", "enum": ["succeeded", "pending", "declined", "void"] },
                        "bank_reference": { "type": "string", "description": "refund-{refund_id}: this claim's own (older rows: refund-{user_id}-{key})" },
                    },
                },
                "PaymentWithRefunds": {
                    "allOf": [
                        { "$ref": "#/components/schemas/Payment" },
                        { "type": "object", "required": ["refunds"], "properties": {
                            "refunds": { "type": "array", "items": { "$ref": "#/components/schemas/Refund" } } } },
                    ],
                },
                "KeyStatus": {
                    "type": "object", "required": ["state", "operation", "expires_at"],
                    "properties": {
                        "state": { "type": "string", "enum": ["started", "unknown", "released", "done"] },
                        "operation": { "type": "string", "enum": ["pay_bill", "refund_payment"] },
                        "status": { "type": "integer", "description": "done only: the saved answer's status (201, or 402 for a bank decline)" },
                        "expires_at": { "type": "string", "format": "date-time", "description": "When the key expires: replayed until then, a new request after" },
                        "next_check_at": { "type": "string", "format": "date-time", "description": "unknown only: when the rail's rules let the bank be asked about it next" },
                        "settlement_due_at": { "type": "string", "format": "date-time", "description": "unknown only, once every status check the rail allows was made: when the bank's settlement file is due" },
                        "answer": { "description": "done only: the saved answer's body, byte for byte as a replay carries it", "oneOf": [
                            { "$ref": "#/components/schemas/Payment" },
                            { "$ref": "#/components/schemas/Refund" },
                            { "$ref": "#/components/schemas/Problem" },
                        ] },
                    },
                },
                "Problem": {
                    "type": "object", "required": ["type", "title", "status"],
                    "properties": {
                        "type": { "type": "string", "enum": problem_types },
                        "title": { "type": "string" },
                        "status": { "type": "integer" },
                        "detail": { "type": "string" },
                        "field": { "type": "string", "description": "The body field at fault (invalid-field)" },
                        "settlement_due_at": { "type": "string", "format": "date-time", "description": "When the bank's settlement file is due (outcome-awaiting-settlement)" },
                        "next_check_at": { "type": "string", "format": "date-time", "description": "When the rail's rules let the bank be asked about it next, where known (outcome-pending)" },
                    },
                },
            },
        },
    })
}

/// The answers every idempotent operation may give (a refused key or body, no token, the first
/// attempt still running, a rate limit, an outcome pending), with `specific` added: its 201,
/// its 402 and its 422.
fn idempotent_responses(mut specific: Value) -> Value {
    let common = json!({
        "400": problem("Missing or malformed key, body not JSON or too deep"),
        "401": problem("No valid bearer token"),
        "409": retry_problem("The first attempt with this key is still running"),
        "413": problem("Body over the size limit"),
        "429": retry_problem(RATE_LIMITED),
        "503": retry_problem("Outcome pending at the bank, or the database is unavailable"),
    });
    if let (Value::Object(responses), Value::Object(common)) = (&mut specific, common) {
        responses.extend(common);
    }
    specific
}

/// An operation that needs the security scheme `scheme`, with a JSON body of `body_schema`
/// (a component schema's name) if it takes one. Also the operator API's document's.
pub(super) fn secured_operation(
    scheme: &str,
    id: &str,
    summary: &str,
    parameters: &[Value],
    body_schema: Option<&str>,
    responses: Value,
) -> Value {
    let mut operation = json!({
        "operationId": id,
        "summary": summary,
        "security": [{ scheme: [] }],
        "parameters": parameters,
        "responses": responses,
    });
    if let Some(schema) = body_schema {
        operation["requestBody"] = json!({
            "required": true,
            "content": { "application/json": { "schema": { "$ref": format!("#/components/schemas/{schema}") } } },
        });
    }
    operation
}

fn public(id: &str, summary: &str, media_type: &str) -> Value {
    json!({
        "operationId": id,
        "summary": summary,
        "responses": { "200": { "description": summary, "content": { media_type: {} } } },
    })
}

/// A required path parameter, a string.
pub(super) fn path_parameter(name: &str, description: &str) -> Value {
    json!({ "name": name, "in": "path", "required": true, "description": description,
            "schema": { "type": "string" } })
}

fn key_parameter() -> Value {
    json!({
        "name": "Idempotency-Key", "in": "header", "required": true,
        "description": "One random version-4 UUID per user action, the same on every retry. \
                        The draft's Structured Field string (\"…\") or the bare value.",
        "schema": { "type": "string", "maxLength": MAX_KEY_LEN + 2 },
    })
}

fn prefer_parameter() -> Value {
    json!({
        "name": "Prefer", "in": "header", "required": false,
        "description": "wait=N (RFC 7240): if the key's first attempt is still running, wait up to \
                        N seconds (at most the policy's max_wait_seconds) for its answer instead \
                        of 409; the answer then carries Preference-Applied: wait=N",
        "schema": { "type": "string", "examples": ["wait=10"] },
    })
}

fn amount() -> Value {
    json!({ "type": "integer", "minimum": 1, "maximum": MAX_AMOUNT_PAISE,
            "description": "Whole paise; never a float" })
}

fn created(schema: &str, with_location: bool) -> Value {
    let mut headers = json!({
        "Idempotent-Replayed": { "$ref": "#/components/headers/Idempotent-Replayed" },
        "Preference-Applied": { "$ref": "#/components/headers/Preference-Applied" },
        "Idempotency-Expires": { "$ref": "#/components/headers/Idempotency-Expires" },
    });
    if with_location {
        headers["Location"] = json!({ "$ref": "#/components/headers/Location" });
    }
    json!({
        "description": "Created (or replayed: the same body, Idempotent-Replayed: true)",
        "headers": headers,
        "content": { "application/json": { "schema": { "$ref": format!("#/components/schemas/{schema}") } } },
    })
}

/// A problem+json answer.
pub(super) fn problem(description: &str) -> Value {
    json!({ "description": description, "content": { "application/problem+json": {
        "schema": { "$ref": "#/components/schemas/Problem" } } } })
}

fn replayable_problem(description: &str) -> Value {
    problem_with_headers(description, "Idempotent-Replayed")
}

fn retry_problem(description: &str) -> Value {
    problem_with_headers(description, "Retry-After")
}

/// A problem answer with `first` among its headers, and the two every keyed answer may carry.
fn problem_with_headers(description: &str, first: &str) -> Value {
    let mut answer = problem(description);
    let mut headers = json!({
        "Preference-Applied": { "$ref": "#/components/headers/Preference-Applied" },
        "Idempotency-Expires": { "$ref": "#/components/headers/Idempotency-Expires" },
    });
    headers[first] = json!({ "$ref": format!("#/components/headers/{first}") });
    answer["headers"] = headers;
    answer
}
