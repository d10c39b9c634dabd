//! The audit trail (SPEC §8, docs/design.md "The audit trail"): what happened to each key, in
//! order, with the request that caused it and, for an operator's action, who and why. Its
//! vocabulary is [`crate::domain::events`].
//!
//! Two kinds of event reach the `key_events` table:
//! - **state changes** (a claim, the bank's word, a release, a resolution, expiry) are written
//!   by the store in the very statement or transaction that makes the change, recorded against
//!   the [`crate::domain::Cause`] its caller passes in, so one is never committed without the
//!   other;
//! - **observations** that change nothing (a replay, a refused mismatch or duplicate, a wait)
//!   are handed to [`Appender`], which writes them in batches off the request path.

mod appender;

pub use appender::Appender;
