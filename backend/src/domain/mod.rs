//! The small vocabulary every layer of the backend shares, below all of them: the [`Reply`] a
//! request gets, and the audit trail's events and what a write is recorded against
//! ([`events`]), and the trace id that joins logs, spans and the trail ([`TraceId`]). No I/O;
//! `store`, `trail`, `replay_cache`, `error`, `flows` and `http` all depend on it and it on none
//! of them, which keeps the layers pointing one way (docs/code-map.md).

pub mod events;
mod reply;

pub use events::{Cause, EventKind, NewEvent, Observed, OperatorAction, RequestId};
pub use reply::Reply;
/// A request's trace id, the same in the logs, the exported spans and the audit trail.
pub use shared::trace_context::TraceId;
