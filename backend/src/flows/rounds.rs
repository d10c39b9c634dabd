//! A request runs in rounds. Each round is the ordinary flow (claim, or decide on the stored
//! key) run to completion in a task of its own, so a client that hangs up never cuts claimed
//! work short. A round that ends with the key still at work gives a request that asked to wait
//! (`Prefer: wait`, [`super::waiting`]) a wait for the key to change and then another round,
//! which reads the key again; otherwise, or once its wait is up, the request gets the 409.

use std::future::Future;

use shared::Operation;
use time::OffsetDateTime;

use super::bank_call::run_to_completion;
use super::replies::in_progress;
use super::waiting::Waiting;
use crate::domain::{Cause, EventKind, Reply};
use crate::error::Result;
use crate::metrics::Metrics;
use crate::state::AppState;
use crate::store::KeyRef;

/// Which round of a request this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Round {
    /// The first: the key is most likely new, so the round claims it at once.
    First,
    /// One after a wait: the key exists, so the round reads it before any claim, which spares
    /// the write (and, on SQLite, the write lock) of a claim that would only find it.
    AfterWait,
}

/// Where one round of a request ended.
#[derive(Debug)]
pub(super) enum RoundEnd {
    /// The request's reply.
    Reply(Reply),
    /// The key's first attempt (or a reconciler) is still at work on the key, which expires at
    /// `expires_at` (its row's): 409, unless the request waits.
    InProgress {
        /// The key's expiry, as its row says.
        expires_at: OffsetDateTime,
    },
}

/// Replies to a request of `operation` on `key` in rounds, waiting between them for up to the
/// caller's wait when the key is in progress. `work` builds one round's work; the request's
/// observations are recorded against `cause`.
pub(super) async fn reply_in_rounds<Work, Done>(
    state: &AppState,
    (operation, key): (Operation, KeyRef),
    mut waiting: Waiting<'_>,
    cause: &Cause,
    mut work: Work,
) -> Result<Reply>
where
    Work: FnMut(Round) -> Done,
    Done: Future<Output = Result<RoundEnd>> + Send + 'static,
{
    let round_after = |waited| match waited {
        false => Round::First,
        true => Round::AfterWait,
    };
    let still_at_work = |end: &RoundEnd| matches!(end, RoundEnd::InProgress { .. });
    let last_round = waiting
        .look_until_settled(
            key,
            cause,
            |waited| run_to_completion(work(round_after(waited))),
            still_at_work,
        )
        .await?;
    let expires_at = match last_round {
        RoundEnd::Reply(reply) => return Ok(waiting.ended(reply, false)),
        RoundEnd::InProgress { expires_at } => expires_at,
    };
    Metrics::count(&state.metrics.conflicts, operation.name());
    let detail = if waiting.has_waited() {
        "waited as long as allowed; the first attempt was still running (409)"
    } else {
        "the first attempt was still running (409)"
    };
    let refused = (EventKind::InProgressRefused, detail);
    state.trail.observe_key(key, None, refused, cause);
    Ok(waiting.ended(in_progress().expiring(expires_at), true))
}
