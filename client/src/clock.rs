//! Time as the client sees it: the wall clock that dates an action (its deadline survives a
//! restart) and the sleeps between attempts. A parameter, so tests use a fake clock that
//! advances only when slept on, and the incident replay a compressed one.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;

/// The client's source of time.
pub trait Clock: Send + Sync {
    /// The current wall-clock time.
    fn now(&self) -> OffsetDateTime;

    /// Completes after `wait` has passed on this clock.
    fn sleep(&self, wait: Duration) -> impl Future<Output = ()> + Send;
}

/// Real time: the system clock and tokio's timer.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> OffsetDateTime {
        OffsetDateTime::now_utc()
    }

    fn sleep(&self, wait: Duration) -> impl Future<Output = ()> + Send {
        tokio::time::sleep(wait)
    }
}

impl<C: Clock> Clock for Arc<C> {
    fn now(&self) -> OffsetDateTime {
        C::now(self)
    }

    fn sleep(&self, wait: Duration) -> impl Future<Output = ()> + Send {
        C::sleep(self, wait)
    }
}

/// The time from `since` to `now`, zero if the clock went backwards.
pub(crate) fn elapsed_between(since: OffsetDateTime, now: OffsetDateTime) -> Duration {
    Duration::try_from(now - since).unwrap_or(Duration::ZERO)
}

/// Runs `work`, giving up after `limit` on `clock` (the phone stops listening; the request
/// may still have reached the server). `None` when the limit passed first.
pub(crate) async fn within<C: Clock, F: Future>(
    clock: &C,
    limit: Duration,
    work: F,
) -> Option<F::Output> {
    tokio::select! {
        biased;
        output = work => Some(output),
        () = clock.sleep(limit) => None,
    }
}
