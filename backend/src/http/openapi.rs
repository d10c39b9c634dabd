//! The published API: an OpenAPI 3.1 document of every route, header and problem type, served at
//! `GET /openapi.json`. Built in code from the same constants the service uses (the problem
//! kinds, the policy's header, key format and limits), its body schemas derived from the
//! `shared::api` types that write and read the bodies (`shared::api::body_schemas`), so it
//! cannot drift from them; a test checks
//! that its paths and methods are exactly the router's, and `scripts/schemathesis.sh` that the
//! server accepts what its request schemas allow, refuses what they do not, and replies as its
//! response schemas say.

use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};
use shared::key::MAX_KEY_LEN;
use shared::{KeyFormat, Operation, ProblemKind};

use crate::state::AppState;

/// The document's route.
pub fn router() -> Router<AppState> {
    Router::new().route("/openapi.json", get(serve_document))
}

async fn serve_document(State(state): State<AppState>) -> Response {
    axum::Json(document(&state)).into_response()
}

/// The 429 of the guarded operations: the edge sends it before the key is looked at.
const RATE_LIMITED: &str =
    "Over the edge's rate limit (sent by the edge: nothing was done, the key is untouched)";

/// The OpenAPI document.
pub fn document(state: &AppState) -> Value {
    let policy = &state.policy;
    let problem_slugs: Vec<&str> = ProblemKind::ALL.iter().map(|kind| kind.slug()).collect();
    let operations: Vec<&str> = Operation::ALL.iter().map(|op| op.name()).collect();
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
                &[bill_id_parameter(), key_parameter(policy.key_format), prefer_parameter()],
                Some("PayBillRequest"),
                idempotent_responses(json!({
                    "201": created("Payment", true),
                    "402": replayable_problem("The bank declined (saved and replayed)"),
                    "422": problem("Invalid field, or the key was used for a different request"),
                })),
            )},
            "/v1/payments/{payment_id}/refunds": { "post": secured_operation("bearer",
                "refund_payment", "Refund part of a payment once per Idempotency-Key",
                &[payment_id_parameter(), key_parameter(policy.key_format), prefer_parameter()],
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
                &[payment_id_parameter()],
                None,
                guarded_responses(json!({
                    "200": { "description": "The payment", "content": { "application/json": {
                        "schema": { "$ref": "#/components/schemas/PaymentWithRefunds" } } } },
                    "404": problem("No such payment for this user"),
                    "503": retry_problem("Over capacity or past the reply deadline, or the database is unavailable"),
                })),
            )},
            "/v1/idempotency-keys/{key}": { "get": secured_operation("bearer",
                "key_status",
                "Where one of your idempotency keys stands: its saved outcome, or pending",
                &[json!({ "name": "key", "in": "path", "required": true,
                          "description": "The key as sent in Idempotency-Key (percent-encoded)",
                          "schema": key_schema(policy.key_format) }), prefer_parameter()],
                None,
                guarded_responses(json!({
                    "200": {
                        "description": "done: the saved reply (as a retry would replay it); started or unknown: pending, with Retry-After; released: the bank never saw the claim, nothing was charged, and the same request with the key claims it again",
                        "headers": {
                            "Retry-After": { "$ref": "#/components/headers/Retry-After" },
                            "Preference-Applied": { "$ref": "#/components/headers/Preference-Applied" },
                            "Idempotency-Expires": { "$ref": "#/components/headers/Idempotency-Expires" },
                        },
                        "content": { "application/json": { "schema": { "$ref": "#/components/schemas/KeyStatus" } } },
                    },
                    "400": problem("Malformed key (the policy's key format)"),
                    "404": problem("No such key for this user (another user's key is the same 404)"),
                    "503": retry_problem("Over capacity or past the reply deadline, or the database is unavailable"),
                })),
            )},
            "/healthz": { "get": public("healthz", "The process is up", "text/plain") },
            "/readyz": { "get": readyz() },
            "/idempotency-policy": { "get": {
                "operationId": "idempotency_policy",
                "summary": "The published idempotency policy: header, key format, retention",
                "responses": { "200": json_reply("The policy", json!({
                    "type": "object",
                    "required": ["header", "required_for", "key_format", "key_max_length",
                                 "unique_per", "keep_keys_for_hours", "fingerprint",
                                 "replay_header", "max_wait_seconds"],
                    "properties": {
                        "header": { "type": "string" },
                        "required_for": { "type": "array", "items": {
                            "type": "object", "required": ["operation", "method", "route"],
                            "properties": {
                                "operation": { "type": "string", "enum": operations },
                                "method": { "type": "string" },
                                "route": { "type": "string" },
                            },
                        } },
                        "key_format": { "type": "string", "enum": ["uuid_v4", "any"] },
                        "key_max_length": { "type": "integer" },
                        "unique_per": { "type": "string", "enum": ["user"] },
                        "keep_keys_for_hours": { "type": "integer", "minimum": 1 },
                        "fingerprint": { "type": "string" },
                        "replay_header": { "type": "string" },
                        "max_wait_seconds": { "type": "integer", "minimum": 0 },
                    },
                })) },
            }},
            "/problems/{slug}": { "get": {
                "operationId": "problem_type",
                "summary": "The description of a problem type",
                "parameters": [{ "name": "slug", "in": "path", "required": true,
                    "description": "A problem slug (any other is 404)",
                    "schema": { "type": "string", "enum": problem_slugs } }],
                "responses": {
                    "200": json_reply("The type, title and status", json!({
                        "type": "object", "required": ["type", "title", "status"],
                        "properties": {
                            "type": { "type": "string", "enum": problem_types },
                            "title": { "type": "string" },
                            "status": { "type": "integer" },
                        },
                    })),
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
                    "description": "true on every reply replayed from a saved result",
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
                    "description": "wait=N on a reply given after waiting (up to N seconds) for the key's first attempt",
                    "schema": { "type": "string", "examples": ["wait=10"] },
                },
                "Idempotency-Expires": {
                    "description": "When the request's key expires (an HTTP date, rounded down to the second), as written on its row at its first claim; on every reply to a request whose key is stored",
                    "schema": { "type": "string", "examples": ["Thu, 03 Dec 2026 10:00:00 GMT"] },
                },
            },
            "schemas": shared::api::body_schemas(),
        },
    })
}

/// The replies every idempotent operation may give (a refused key or body, the body too slow,
/// the first attempt still running, a rate limit, an outcome pending), with `specific` added:
/// its 201, its 402 and its 422; and those of every guarded operation.
fn idempotent_responses(specific: Value) -> Value {
    let common = json!({
        "400": problem("Missing or malformed key, body not JSON or too deep"),
        "408": problem("The body did not arrive within the read deadline"),
        "409": retry_problem("The first attempt with this key is still running"),
        "413": problem("Body over the size limit"),
        "429": retry_problem(RATE_LIMITED),
        "503": retry_problem("Outcome pending at the bank, over capacity or past the reply deadline, or the database is unavailable"),
    });
    guarded_responses(with_defaults(specific, common))
}

/// `specific` with the replies every operation behind the `/v1` gate (`http::gate`) may give
/// added where it does not name them: no valid token, no valid edge proof.
fn guarded_responses(specific: Value) -> Value {
    with_defaults(
        specific,
        json!({
            "401": problem("No valid bearer token"),
            "403": problem("No valid edge proof: the backend's own check where REQUIRE_EDGE_PROOF is on, never replied through the edge"),
        }),
    )
}

/// `responses` with each of `defaults` that it does not have.
fn with_defaults(mut responses: Value, defaults: Value) -> Value {
    if let (Value::Object(responses), Value::Object(defaults)) = (&mut responses, defaults) {
        for (status, reply) in defaults {
            responses.entry(status).or_insert(reply);
        }
    }
    responses
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

fn readyz() -> Value {
    json!({
        "operationId": "readyz",
        "summary": "The database replied to the last readiness check",
        "responses": {
            "200": { "description": "Ready", "content": { "text/plain": {} } },
            "503": retry_problem("The database is unreachable, or the replica is shutting down"),
        },
    })
}

/// A 200 reply of JSON of `schema`.
fn json_reply(description: &str, schema: Value) -> Value {
    json!({ "description": description, "content": { "application/json": { "schema": schema } } })
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

/// The bill paid (`shared::api::check_bill_id`; any other is a 422 naming `bill_id`).
fn bill_id_parameter() -> Value {
    json!({
        "name": "bill_id", "in": "path", "required": true,
        "description": "The bill: 1-64 of A-Z a-z 0-9 - _ . but not the URL dot segments . and .. \
                        (which clients remove from a URL before sending it)",
        "schema": { "type": "string", "minLength": 1, "maxLength": 64, "pattern": BILL_ID_PATTERN },
    })
}

/// 1-64 of `A-Z a-z 0-9 - _ .`, but not `.` or `..`: a first character that is not a dot, or a
/// dot and then one that is not, or two dots and anything.
const BILL_ID_PATTERN: &str = concat!(
    r"^(?:[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}",
    r"|\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,62}",
    r"|\.\.[A-Za-z0-9._-]{1,62})$",
);

/// A payment's id. One that is not a UUID names no payment: 404, like an unknown one.
fn payment_id_parameter() -> Value {
    json!({
        "name": "payment_id", "in": "path", "required": true,
        "description": "The payment's id, a UUID (anything else is no payment: 404)",
        "schema": { "type": "string", "format": "uuid" },
    })
}

fn key_parameter(format: KeyFormat) -> Value {
    json!({
        "name": "Idempotency-Key", "in": "header", "required": true,
        "description": "The key of one user action, the same on every retry (under the policy's \
                        key_format uuid_v4, a random version-4 UUID). The draft's Structured \
                        Field string (\"…\") or the bare value; the string may also carry \
                        Structured Field parameters (;name=value), which are ignored.",
        "schema": key_schema(format),
    })
}

/// A key as `shared::key::IdempotencyKey::parse_header` accepts it under `format`, bare or as a
/// Structured Field string (without the parameters the string may carry).
fn key_schema(format: KeyFormat) -> Value {
    match format {
        KeyFormat::UuidV4 => {
            let uuid = "[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-4[0-9A-Fa-f]{3}-[89ABab][0-9A-Fa-f]{3}-[0-9A-Fa-f]{12}";
            json!({ "type": "string", "minLength": 36, "maxLength": 38,
                    "pattern": format!("^(?:{uuid}|\"{uuid}\")$"),
                    "examples": ["8e03978e-40d5-43e8-bc93-6894a57f9324"] })
        }
        // Bare: printable ASCII, neither starting with a quote nor starting or ending with a
        // space. Quoted: each character printable ASCII, `"` and `\` escaped.
        KeyFormat::Any => json!({
            "type": "string", "minLength": 1, "maxLength": 2 * MAX_KEY_LEN + 2,
            "pattern": format!(
                r#"^(?:[!#-~](?:[ -~]{{0,{inner}}}[!-~])?|"(?:[ !#-\[\]-~]|\\["\\]){{1,{MAX_KEY_LEN}}}")$"#,
                inner = MAX_KEY_LEN - 2,
            ),
        }),
    }
}

fn prefer_parameter() -> Value {
    json!({
        "name": "Prefer", "in": "header", "required": false,
        "description": "wait=N (RFC 7240): if the key's first attempt is still running, wait up to \
                        N seconds (at most the policy's max_wait_seconds) for its reply instead \
                        of 409; the reply then carries Preference-Applied: wait=N",
        "schema": { "type": "string", "examples": ["wait=10"] },
    })
}

/// A 201 with a body of `schema`, and links to the operations its `payment_id` and the request's
/// key are read with; `of_payment`: with the payment's `Location`, and a link to refund it.
fn created(schema: &str, of_payment: bool) -> Value {
    let mut headers = json!({
        "Idempotent-Replayed": { "$ref": "#/components/headers/Idempotent-Replayed" },
        "Preference-Applied": { "$ref": "#/components/headers/Preference-Applied" },
        "Idempotency-Expires": { "$ref": "#/components/headers/Idempotency-Expires" },
    });
    if of_payment {
        headers["Location"] = json!({ "$ref": "#/components/headers/Location" });
    }
    let payment = json!({ "payment_id": "$response.body#/payment_id" });
    let mut links = json!({
        "ReadPayment": { "operationId": "read_payment", "parameters": payment },
        "KeyStatus": { "operationId": "key_status",
                       "parameters": { "key": "$request.header.Idempotency-Key" } },
    });
    if of_payment {
        links["RefundPayment"] = json!({ "operationId": "refund_payment", "parameters": payment });
    }
    json!({
        "description": "Created (or replayed: the same body, Idempotent-Replayed: true)",
        "headers": headers,
        "content": { "application/json": { "schema": { "$ref": format!("#/components/schemas/{schema}") } } },
        "links": links,
    })
}

/// A problem+json reply.
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

/// A problem reply with `first` among its headers, and the two every keyed reply may carry.
fn problem_with_headers(description: &str, first: &str) -> Value {
    let mut reply = problem(description);
    let mut headers = json!({
        "Preference-Applied": { "$ref": "#/components/headers/Preference-Applied" },
        "Idempotency-Expires": { "$ref": "#/components/headers/Idempotency-Expires" },
    });
    headers[first] = json!({ "$ref": format!("#/components/headers/{first}") });
    reply["headers"] = headers;
    reply
}
