//! The open-loop schedule: request *i* is due at `start + i / rate`, whoever sends it. Every
//! connection takes the next index when it is free ([`Schedule::take`]), so requests go out in
//! the order they fall due and no request is skipped, however the connections are shared out.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// How early a request may go out: the timer's grain. Tokio's timer fires on whole
/// milliseconds, at or after the deadline, so sleeping until a request is due would send it up to
/// a millisecond late and count that delay, the generator's own, against the server. Waking one
/// grain before the due time sends it at most that early instead, and [`Due::latency`] then
/// times it from when it went out.
pub const TIMER_GRAIN: Duration = Duration::from_millis(1);

/// The fixed-rate schedule of `total` requests, shared by every connection.
pub struct Schedule {
    start: Instant,
    rate: u64,
    total: u64,
    next: AtomicU64,
}

/// One request's place in the schedule.
#[derive(Clone, Copy)]
pub struct Due {
    /// Its index, from 0: new keys use it in the bill's name.
    pub index: u64,
    /// When it is due.
    pub at: Instant,
}

impl Schedule {
    /// `rate` requests a second (more than 0) for `seconds`, from now.
    pub fn new(rate: u32, seconds: u32) -> Schedule {
        Schedule {
            start: Instant::now(),
            rate: u64::from(rate),
            total: u64::from(rate) * u64::from(seconds),
            next: AtomicU64::new(0),
        }
    }

    /// How many requests the schedule holds.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The next request not yet taken, or `None` once all are.
    pub fn take(&self) -> Option<Due> {
        let index = self.next.fetch_add(1, Ordering::Relaxed);
        (index < self.total).then(|| Due {
            index,
            at: self.start + offset(index, self.rate),
        })
    }
}

impl Due {
    /// Waits until the request may go out: at most [`TIMER_GRAIN`] before it is due, or at
    /// once if that moment has passed (every connection was busy: the server is behind).
    pub async fn wait(&self) {
        if let Some(wake) = self.at.checked_sub(TIMER_GRAIN)
            && wake > Instant::now()
        {
            tokio::time::sleep_until(wake).await;
        }
    }

    /// The latency of a reply received at `replied` to the request sent at `sent`: from
    /// the earlier of the two moments, when it was due or when it went out. Sent late (every
    /// connection busy), it is timed from when it was due, so a stall counts against every
    /// request it delayed (no coordinated omission); sent early, within the timer's grain, from
    /// when it went out.
    pub fn latency(&self, sent: Instant, replied: Instant) -> Duration {
        replied.saturating_duration_since(self.at.min(sent))
    }
}

/// Request `index`'s offset from the start at `rate` a second.
fn offset(index: u64, rate: u64) -> Duration {
    let nanos = u128::from(index) * 1_000_000_000 / u128::from(rate);
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_fall_due_evenly_and_each_is_taken_once() {
        let schedule = Schedule::new(4, 2);
        let taken: Vec<Due> = std::iter::from_fn(|| schedule.take()).collect();
        assert_eq!(taken.len(), 8);
        for (expected, due) in taken.iter().enumerate() {
            assert_eq!(due.index, expected as u64);
            assert_eq!(
                due.at - schedule.start,
                Duration::from_millis(250 * expected as u64)
            );
        }
        assert!(schedule.take().is_none());
    }

    #[test]
    fn a_late_request_is_timed_from_when_it_was_due_an_early_one_from_when_it_went_out() {
        let start = Instant::now();
        let due = Due {
            index: 0,
            at: start + Duration::from_millis(10),
        };
        let replied = start + Duration::from_millis(30);
        // Sent 5 ms late (every connection busy): the wait counts.
        let late = due.latency(start + Duration::from_millis(15), replied);
        assert_eq!(late, Duration::from_millis(20));
        // Sent within the timer's grain before it was due: timed from the send.
        let early = due.latency(start + Duration::from_micros(9_500), replied);
        assert_eq!(early, Duration::from_micros(20_500));
        // Sent on time.
        let on_time = due.latency(due.at, replied);
        assert_eq!(on_time, Duration::from_millis(20));
    }
}
