//! The backend: the authority over idempotency keys (the database claim, the bank call, save
//! and replay, reconciliation and expiry). The partner bank it calls is played in development
//! and tests by the `bank-simulator` crate (`tools/bank-simulator/`), which the backend uses
//! only in its tests.
//!
//! A request travels: [`http`] (authentication, body limits) → [`flows`] (the shared decision,
//! carried out) → [`replay_cache`] (a repeat of a finished key, replayed from memory) or
//! [`store`] (the claim and the saved outcome) and [`bank`] (the debit, through the bank port).
//! [`reconcile`] and [`janitor`] run beside the server on the same [`state::AppState`];
//! [`settlement`] imports the bank's end-of-day file for what the rail's status checks left
//! undecided.

pub mod bank;
pub mod config;
pub mod domain;
pub mod durability;
pub mod error;
pub mod flows;
#[cfg(test)]
mod generated_docs;
pub mod http;
pub mod identity;
pub mod janitor;
pub mod ledger_check_bounds;
pub mod metrics;
pub mod readiness;
pub mod reconcile;
pub mod replay_cache;
pub mod settlement;
pub mod shutdown;
pub mod startup;
pub mod state;
pub mod store;
pub mod telemetry;
pub mod trail;
pub mod transport_security;
