//! The backend's contract suite, one test binary (one link of the whole stack, not fifteen):
//! every SPEC §4 row and the wire contract over HTTP, bad input, races, a misbehaving bank
//! under load, crashes of real processes, expiry, reconciliation and its leases, the scaling
//! path, start-up refusals. Each module says what it proves; the tests shared by both stores
//! run as `on_postgres::…` and `on_sqlite::…`. (`database_restart` is a binary of its own: it
//! stops the machine's PostgreSQL, which nothing else may see.)

#[path = "../support/mod.rs"]
#[macro_use]
mod support;

mod audit_trail;
mod bad_input;
mod bank_callbacks;
mod bank_timeouts;
mod cors;
mod crash_recovery;
mod database_failover;
mod drain;
mod edge_proof;
mod embedded_store;
mod expiry;
mod hostile_connections;
mod identity_provider;
mod json_logs;
mod key_life;
mod key_row;
mod key_status;
mod layers;
mod leases;
mod limits;
mod observability;
mod openapi;
mod operator_api;
mod operator_completeness;
mod partner_bank;
mod prefer_wait;
mod races;
mod reconciler;
mod released_claims;
mod replay_cache;
mod runtime_role;
mod scaling;
mod settlement_file;
mod sharding_by_user;
mod spec_rows;
mod startup_config;
mod status_check_rules;
mod subjects;

mod tls;
mod traces;
