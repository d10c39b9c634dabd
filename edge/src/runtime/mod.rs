//! The Worker: the thin layer between the Workers runtime and the plain modules of this crate.
//! It reads requests and settings, runs the [`crate::gate`], talks to the rate limiter and
//! per-key Durable Objects and to the backend, copies replies back and exports the edge's spans.
//! Nothing here decides a rule.
//!
//! The runtime finds its entry points by their JavaScript names, not through Rust paths: the
//! `fetch` handler, and the Durable Object classes that `wrangler.toml` binds: `KeyCoordinator`
//! as [`COORDINATOR_BINDING`] and `RateLimiter` as [`RATE_LIMITER_BINDING`].

mod body;
mod clock;
mod coordinator_client;
mod cross_origin;
mod fetch_handler;
mod forward;
mod identity;
mod key_coordinator;
mod outgoing;
mod provider_keys;
mod rate_limiter;
mod rate_limiter_client;
mod request_points;
mod response;
mod trace_export;
mod web_crypto;

pub use coordinator_client::COORDINATOR_BINDING;
pub use rate_limiter_client::RATE_LIMITER_BINDING;
