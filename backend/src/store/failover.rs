//! Connections opened before a failover are dropped, not handed out again.
//!
//! When the primary fails over, every pooled connection to it is useless: those whose socket
//! broke fail their next use, and those to a node that stayed up but was demoted (or set
//! read-only) fail every write with SQLSTATE 25006 until they are closed. The first error that
//! says so ([`super::error`]'s `lost_the_primary`) marks the instant; from then on the
//! PostgreSQL pool's acquire hook ([`super::postgres::connect`]) closes any connection opened
//! before that instant instead of lending it, and opens a fresh one, which HAProxy (or whatever
//! routes to the primary) sends to the new leader.
//!
//! A failed ping of an idle connection marks the instant too. Whatever closed it (a restart, an
//! operator's `pg_terminate_backend`, a proxy's idle timeout) most likely closed its siblings,
//! and those used within [`PING_IF_IDLE_FOR`] are lent without a ping: reopening them costs a
//! few connects, lending a dead one costs a customer a 503.
//!
//! The mark is one per process: a process talks to one database. In a test process that runs
//! several applications, one application's mark makes the others reconnect too, and can make
//! one lend a connection it would otherwise have pinged; tests that cut connections and count
//! on the ping run in a binary of their own (`backend/tests/database_restart`).

use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long a connection must have sat idle to be pinged before it is lent (by the pool's
/// acquire hook, `super::postgres::connect`, and by the writer's held connections,
/// `super::writer_connections`).
pub const PING_IF_IDLE_FOR: Duration = Duration::from_secs(1);

/// The instant every age is measured from.
static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

/// Nanoseconds after [`EPOCH`] of the last mark; 0 when there has been none.
static STALE_BEFORE: AtomicU64 = AtomicU64::new(0);

/// Marks every connection opened before now as stale.
pub fn connections_before_now_are_stale() {
    let now = nanos_since_epoch(Instant::now());
    STALE_BEFORE.fetch_max(now, Ordering::Relaxed);
}

/// Whether a connection of this age was opened before the last mark.
pub fn is_stale(connection_age: Duration) -> bool {
    let marked = STALE_BEFORE.load(Ordering::Relaxed);
    if marked == 0 {
        return false;
    }
    let opened = Instant::now()
        .checked_sub(connection_age)
        .map_or(0, nanos_since_epoch);
    opened <= marked
}

fn nanos_since_epoch(instant: Instant) -> u64 {
    u64::try_from(instant.saturating_duration_since(*EPOCH).as_nanos())
        .unwrap_or(u64::MAX)
        .max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_opened_before_the_mark_is_stale_and_one_opened_after_is_not() {
        let opened_long_ago = Duration::from_secs(3600);
        connections_before_now_are_stale();
        assert!(is_stale(opened_long_ago));
        std::thread::sleep(Duration::from_millis(5));
        assert!(!is_stale(Duration::from_millis(1)), "opened after the mark");
    }
}
