//! The edge Worker (Cloudflare Workers, Rust compiled to Wasm): it stops malformed and duplicate
//! payment requests close to the user and forwards the rest to the backend, which stays the
//! authority on every key.
//!
//! The crate is split so that the rules run and are tested on the host, and only a thin layer
//! touches the Workers runtime:
//!
//! - [`gate`] checks a request to a guarded operation (one in the policy's `required_for`) in the
//!   backend's order, with the `shared` rules: token (401), body size, depth and JSON (413/400),
//!   key (400), fields (422). Its verdict is a refusal or an [`gate::Attempt`] to coordinate.
//! - [`coordination`] is the protocol of the Durable Object kept per (user, key): the record it
//!   stores and the pure transitions that turn an attempt into "forward", "in progress" (409),
//!   "mismatch" (422) or "replay".
//! - [`rate_limit`] is the token bucket kept per user and per client address by a Durable
//!   Object of its own, and the 429 `rate-limited` a request over it gets.
//! - [`operator_routes`] names the routes the edge never forwards (`/metrics`, `/admin/…`).
//! - [`trace`] is the edge's part in a distributed trace: the W3C `traceparent` it joins or
//!   starts and passes to the backend, and its span of the request as OTLP JSON.
//! - [`reply`] and [`forward_rules`] describe the replies the edge makes itself and the failures of
//!   a forward (502/504); [`config`] reads the settings; [`header_bytes`] recovers the bytes of a
//!   header value from the runtime's string.
//! - [`runtime`] is the Worker itself: the fetch handler, the Durable Objects, the calls to the
//!   backend. It only moves bytes between the runtime and the modules above.
//!
//! A request goes through, in order: the operator-route check (404), the client address's rate
//! limit (429), then for a guarded operation the gate (401, 413, 400, 422), the user's rate
//! limit (429) and the key's object (409, 422, replay) before the backend; anything else is
//! forwarded.

pub mod config;
pub mod coordination;
pub mod forward_rules;
pub mod gate;
pub mod header_bytes;
pub mod operator_routes;
pub mod rate_limit;
pub mod reply;
pub mod runtime;
pub mod trace;
