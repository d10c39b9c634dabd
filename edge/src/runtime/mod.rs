//! The Worker: the thin layer between the Workers runtime and the plain modules of this crate.
//! It reads requests and settings, runs the [`crate::gate`], talks to the per-key Durable Object
//! and to the backend, and copies answers back. Nothing here decides a rule.
//!
//! The runtime finds its entry points by their JavaScript names, not through Rust paths: the
//! `fetch` handler, and the `KeyCoordinator` Durable Object class that `wrangler.toml` binds as
//! [`COORDINATOR_BINDING`].

mod body;
mod clock;
mod coordinator_client;
mod fetch_handler;
mod forward;
mod key_coordinator;
mod response;

pub use coordinator_client::COORDINATOR_BINDING;
