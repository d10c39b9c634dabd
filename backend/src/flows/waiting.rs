//! `Prefer: wait=N` (SPEC §4): a request that finds its key's first attempt still running waits
//! for that attempt's reply instead of getting 409 at once.
//!
//! A request runs in rounds (`super::rounds`). Each round is the ordinary flow (claim, or
//! decide on the stored key) run to completion in a task of its own, so a client that hangs up
//! never cuts claimed work short. A round that ends in "the first attempt is still running"
//! gives the request, if it asked to wait, a wait for the key to change
//! ([`crate::store::KeyWatch`]: this process's writes, and on PostgreSQL every replica's
//! `NOTIFY`), at most [`POLL_INTERVAL`] at a time, and then another round, which reads the key
//! again: the saved reply is replayed, an unknown outcome is the usual 503, a released claim is
//! claimed again. Other processes announce a key's change only if a request waits on it, so
//! the first wait marks the key awaited in the store and is a round at once, with no wait: a
//! change committed before the mark is found by that round's read, one after it is announced.
//! When the wait's time is up the request gets the usual 409 with `Retry-After`.
//! The watch is taken *before* each round reads the key, so a change that commits in between
//! still wakes it.
//!
//! The wait happens in the request's own future, not in the round's task: a client that hangs
//! up while waiting drops the wait and its watch at once. Waiting holds no database connection,
//! and the requests waiting at once are bounded (`MAX_WAITING_REQUESTS`): past the bound a
//! request gets 409 at once, as without the header. A reply given after a wait carries
//! `Preference-Applied: wait=N`, N the seconds it was allowed to wait.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;

use crate::domain::{Cause, EventKind, Reply};
use crate::metrics::Metrics;
use crate::state::AppState;
use crate::store::{KeyRef, KeyWatch};

/// The longest a waiting request goes without reading its key again, in case an announcement
/// was lost (a PostgreSQL listener reconnecting).
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// One request's wait for its key's first attempt: how long it may last, and its place among
/// the waiting requests. Used by the payment flows and the key status look-up alike.
pub struct Waiting<'s> {
    state: &'s AppState,
    /// The wait the request asked for, capped by the policy; `None` if it does not wait.
    allowed: Option<Duration>,
    /// Set at the first wait: when waiting ends, and the place held meanwhile.
    started: Option<(Instant, WaitingPlace)>,
}

impl<'s> Waiting<'s> {
    /// The wait of a request that asked for `allowed` (`None`: it does not wait).
    pub fn new(state: &'s AppState, allowed: Option<Duration>) -> Waiting<'s> {
        Waiting {
            state,
            allowed,
            started: None,
        }
    }

    /// Reads the key with `look` (told whether the read follows a wait) until `in_progress`
    /// says its first attempt is no longer at work or the request may wait no longer, and
    /// returns the last read: the one wait loop, of the payment flows' rounds and the key status
    /// alike. The watch is taken before each read, so a change committed in between still wakes
    /// the wait.
    pub async fn look_until_settled<T, E, Look, Read>(
        &mut self,
        key: KeyRef,
        cause: &Cause,
        mut look: Look,
        in_progress: impl Fn(&T) -> bool,
    ) -> Result<T, E>
    where
        Look: FnMut(bool) -> Read,
        Read: Future<Output = Result<T, E>>,
    {
        let mut after_wait = false;
        loop {
            let mut watch = self.watch(key.clone());
            let read = look(after_wait).await?;
            if in_progress(&read)
                && let Some(watch) = watch.as_mut()
                && self.wait(key.clone(), watch, cause).await
            {
                after_wait = true;
                continue;
            }
            return Ok(read);
        }
    }

    /// A watch on `key`, taken before the key is read, if a read that finds it in progress may
    /// still be followed by a wait.
    pub(super) fn watch(&self, key: KeyRef) -> Option<KeyWatch> {
        let may_wait = match &self.started {
            None => self.allowed.is_some(),
            Some((until, _)) => Instant::now() < *until,
        };
        may_wait.then(|| self.state.store.key_changes().watch(key))
    }

    /// Waits for `watch`'s key to change, [`POLL_INTERVAL`] at most, before the next read;
    /// `false` if the request may not wait (any more): it asked for no wait, its time is up, or
    /// no place is free. The start of a wait is recorded in `key`'s audit trail, against `cause`,
    /// and marks the key awaited in the store; that first call returns at once, so that the key
    /// is read again after the mark.
    #[tracing::instrument(name = "wait", skip_all)]
    pub(super) async fn wait(&mut self, key: KeyRef, watch: &mut KeyWatch, cause: &Cause) -> bool {
        let until = match &self.started {
            Some((until, _)) => *until,
            None => {
                let Some(allowed) = self.allowed else {
                    return false;
                };
                let Some(place) = WaitingPlace::take(self.state) else {
                    self.state.metrics.waits_refused.inc();
                    return false;
                };
                self.state.metrics.waits_started.inc();
                let detail = "the first attempt was still running: waited for its reply";
                let waited = (EventKind::Waited, detail);
                self.state
                    .trail
                    .observe_key(key.clone(), None, waited, cause);
                self.started = Some((Instant::now() + allowed, place));
                // The other processes announce the key's change only if it is marked, and a
                // change committed before the mark was not announced: the next round reads
                // the key again before any wait.
                if let Err(error) = self.state.store.mark_awaited(key).await {
                    tracing::warn!(%error, "could not mark the key awaited; the wait looks again every second");
                }
                return true;
            }
        };
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        watch.changed_within(left.min(POLL_INTERVAL)).await;
        true
    }

    /// Whether the request has begun waiting.
    pub fn has_waited(&self) -> bool {
        self.started.is_some()
    }

    /// Ends the wait with `reply` (`timed_out`: the key was still in progress), counting it,
    /// and marks the reply with the wait it was given, if it waited.
    pub fn ended(self, reply: Reply, timed_out: bool) -> Reply {
        match self.waited(timed_out) {
            Some(allowed) => reply.after_waiting(allowed),
            None => reply,
        }
    }

    /// Ends the wait (`timed_out`: the key was still in progress), counting it; the wait it was
    /// given, if it waited.
    pub fn waited(self, timed_out: bool) -> Option<Duration> {
        self.started.as_ref()?;
        let metrics = &self.state.metrics;
        if timed_out {
            metrics.waits_timed_out.inc();
        } else {
            metrics.waits_replied.inc();
        }
        self.allowed
    }
}

/// One of the `MAX_WAITING_REQUESTS` places, counted in the waiting-requests gauge while held.
struct WaitingPlace {
    metrics: Arc<Metrics>,
    _permit: OwnedSemaphorePermit,
}

impl WaitingPlace {
    fn take(state: &AppState) -> Option<WaitingPlace> {
        let permit = Arc::clone(&state.waiting_places).try_acquire_owned().ok()?;
        state.metrics.waiting_requests.inc();
        Some(WaitingPlace {
            metrics: Arc::clone(&state.metrics),
            _permit: permit,
        })
    }
}

impl Drop for WaitingPlace {
    fn drop(&mut self) {
        self.metrics.waiting_requests.dec();
    }
}
