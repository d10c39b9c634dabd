//! The network as the client loop sees it: send an action's attempt, or look its key up. A
//! parameter, so the loop is tested against scripted replies; [`crate::HttpTransport`] is the
//! real one. Timeouts are not the transport's business: the loop gives up on its own clock.
//! Every request belongs to the trace of its run (one [`TraceId`] per run of an action), so the
//! server's spans for all the attempts of one action hang together.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use shared::IdempotencyKey;
use shared::retry::PendingAction;
use shared::trace_context::TraceId;
use thiserror::Error;

/// A reply from the server, read whole.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// The `Retry-After` header in seconds, when present.
    pub retry_after: Option<Duration>,
    /// Whether the reply carries `Idempotent-Replayed: true`.
    pub replayed: bool,
    /// The wait named by `Preference-Applied: wait=N`, when present: the server held the
    /// request up to that long for the key's first attempt.
    pub wait_applied: Option<Duration>,
    /// The body as JSON (`null` when empty, a string when not JSON).
    pub body: Value,
}

/// No reply came: the connection failed or broke. The request may or may not have arrived.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("no reply: {0}")]
pub struct SendError(pub String);

/// Sends requests for the client loop. `prefer_wait`, when given, goes out as
/// `Prefer: wait=N` in whole seconds: the server may hold the request that long for the key's
/// first attempt (see [`crate::ClientRules::prefer_wait`]). `trace` is the run's trace: each
/// request goes out as a new span in it (W3C `traceparent`).
pub trait Transport: Send + Sync {
    /// Sends one attempt of `action`: its key and its exact body bytes.
    fn send(
        &self,
        action: &PendingAction,
        prefer_wait: Option<Duration>,
        trace: TraceId,
    ) -> impl Future<Output = Result<Reply, SendError>> + Send;

    /// Asks for the outcome of `key` (`GET /v1/idempotency-keys/{key}`).
    fn look_up(
        &self,
        key: &IdempotencyKey,
        prefer_wait: Option<Duration>,
        trace: TraceId,
    ) -> impl Future<Output = Result<Reply, SendError>> + Send;
}

impl<T: Transport> Transport for Arc<T> {
    fn send(
        &self,
        action: &PendingAction,
        prefer_wait: Option<Duration>,
        trace: TraceId,
    ) -> impl Future<Output = Result<Reply, SendError>> + Send {
        T::send(self, action, prefer_wait, trace)
    }

    fn look_up(
        &self,
        key: &IdempotencyKey,
        prefer_wait: Option<Duration>,
        trace: TraceId,
    ) -> impl Future<Output = Result<Reply, SendError>> + Send {
        T::look_up(self, key, prefer_wait, trace)
    }
}
