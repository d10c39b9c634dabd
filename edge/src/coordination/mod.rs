//! The Durable Object kept per (user, key), as a protocol of plain values: what the Worker asks
//! ([`BeginRequest`], [`FinishReport`]), what the object replies ([`BeginVerdict`]), what it
//! stores ([`KeyRecord`]) and how each message changes the record ([`begin`], [`finish`],
//! [`on_alarm`]). The runtime object only loads, applies and saves.
//!
//! One attempt at a time is forwarded for a (user, key):
//!
//! | the object holds                      | same fingerprint          | other fingerprint |
//! |---------------------------------------|---------------------------|-------------------|
//! | nothing (or an expired record)        | forward, mark in flight   | forward, mark     |
//! | an in-flight mark                     | 409 `request-in-progress`, or wait (below) | 422 `idempotency-key-reused` |
//! | the backend's final reply            | replay it, `Idempotent-Replayed: true` | 422 |
//!
//! When the forward ends, the Worker reports the backend's reply: a final one (2xx, or a 402
//! decline; the backend's own replays included) is kept until the key's expiry
//! (`keep_keys_for` after the attempt began); anything else (409, 503 outcome pending, 5xx, a
//! 4xx refusal, 502/504 at the edge) clears the mark, so the next attempt asks the backend, which
//! stays the authority. A mark nobody clears (the Worker died mid-forward) expires by itself:
//! the object's alarm fires at the mark's end.
//!
//! **Waiting** (`Prefer: wait=N`, SPEC §4). An attempt that finds the key in flight and asked to
//! wait is parked in the object ([`Waiters`]) until the attempt holding the mark reports, for
//! at most its wait and never past the mark's end ([`wait_until`]). The report hands every
//! parked attempt its reply: a final one is replayed to each (`Idempotent-Replayed: true`), any
//! other (an outcome still pending, a failed forward) is passed on as the first attempt got it;
//! a wait that runs out is the 409. Every reply after a wait carries `Preference-Applied:
//! wait=N`. No parked attempt ever reaches the backend.

mod protocol;
mod record;
mod saved_reply;
mod waiters;

pub use protocol::{BEGIN_PATH, BeginRequest, BeginVerdict, FINISH_PATH, FinishReport, WaitEnd};
pub use record::{
    AlarmStep, FinishStep, KeyRecord, RecordChange, begin, finish, on_alarm, wait_until,
};
pub use saved_reply::SavedReply;
pub use waiters::{MAX_WAITERS_PER_KEY, WaiterNews, Waiters};
