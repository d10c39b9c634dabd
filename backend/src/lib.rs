//! The backend: the authority over idempotency keys (the PostgreSQL claim, the bank call, save
//! and replay, reconciliation and expiry), and the bank simulator that plays the partner bank
//! in development and tests.

pub mod bank_simulator;
