//! Every SQL statement of the store, one function each, written once for PostgreSQL and SQLite
//! (generic over [`crate::store::db::Db`]) and grouped by the table they act on: the keys, and
//! the money movements (payments and refunds) the keys' claims create, the audit trail's
//! [`events`] and the operator console's reads ([`operator_reads`]); and [`outcome`], the write
//! that touches both.

pub mod events;
pub mod key_row;
pub mod keys;
pub mod movements;
pub mod operator_reads;
pub mod outcome;
pub mod pace;
