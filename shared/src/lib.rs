//! The pure idempotency rules that the edge Worker, the backend and the clients must agree on.
//!
//! Everything here is a function of its inputs: no clock, no network, no database. The edge and
//! the backend parse the same [`IdempotencyKey`], compute the same [`Fingerprint`], load the same
//! [`Policy`] file and turn a stored record into the same [`Decision`]; clients mint keys and pace
//! their retries with [`client`]. The crate compiles natively and to `wasm32-unknown-unknown`.
//!
//! How the parts fit, for one request:
//! 0. At the backend, [`edge_proof`] says whether the request came through the edge.
//! 1. [`auth`] turns the bearer token into a [`UserId`] (or a 401): its signature checked with
//!    the identity provider's published key ([`auth::jwks`]) or a shared secret, its claims
//!    held to [`auth::TokenRules`].
//! 2. [`Policy::parse_key_header`] reads the `Idempotency-Key` header (or a 400).
//! 3. [`fingerprint::fingerprint`] checks and hashes the body with the operation (or a 400/413).
//! 4. [`decision::decide`] says what to do given the record stored for (user, key), if any.
//! 5. [`problem::Problem`] is the `application/problem+json` body of every refusal.
//!
//! Beside the rules: [`trace_context`] reads and writes the W3C `traceparent` that joins edge,
//! backend and bank in one trace.

pub mod admission;
pub mod api;
pub mod auth;
pub mod cors;
pub mod decision;
pub mod edge_proof;
pub mod expiry;
pub mod fingerprint;
pub mod key;
pub mod movement_id;
pub mod operation;
pub mod policy;
pub mod prefer;
pub mod problem;
pub mod retry;
pub mod server_path;
pub mod status_checks;
pub mod trace_context;

pub use auth::{SubjectError, UserId};
pub use decision::{Decision, KeyState, StoredRecord, decide};
pub use fingerprint::Fingerprint;
pub use key::{IdempotencyKey, KeyError};
pub use operation::Operation;
pub use policy::{KeyFormat, Policy, PolicyError};
pub use problem::{Problem, ProblemKind};
