//! How patient a client is: the retry schedule, how long one attempt may take, how long it
//! asks the server to wait for the key's first attempt, and the bounds that keep every loop
//! finite. Every client (the Rust `payments-client`, the TypeScript package) runs
//! [`ActionProgress`](super::ActionProgress) under these rules.
//!
//! **`Prefer: wait` (RFC 7240, SPEC §4).** Every attempt and status look-up asks the server to
//! wait up to [`ClientRules::prefer_wait`] for the key's first attempt when that attempt is
//! still running, and to reply with its final reply instead of 409. The header carries whole
//! seconds, so the wait is rounded down; the server applies at most its policy's cap
//! (`max_wait_seconds` at `GET /idempotency-policy`, 10 s by default). The wait is always held
//! *strictly below* the client's own `attempt_timeout`: a server whose wait runs out replies
//! 409 with `Retry-After`, and that reply must reach the client before the client gives up on
//! the attempt, or the wait would turn every "still running" into a timeout. The default leaves
//! [`PREFER_WAIT_MARGIN`] (5 s) for that reply to travel: the article's 15 s timeout asks for
//! `wait=10`, which is also the server's default cap.

use std::time::Duration;

use super::RetrySchedule;

/// How much shorter than the attempt timeout the default wait is: room for the server's reply
/// when its wait runs out (and for the network and the edge) before the client gives up.
pub const PREFER_WAIT_MARGIN: Duration = Duration::from_secs(5);

/// A client's settings. The default is the article's app: give up on an attempt after 15 s,
/// back off from 500 ms doubling to 30 s, stop sending after 10 minutes; ask the server to wait
/// up to 10 s for a first attempt still running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientRules {
    /// Backoff, jitter and the deadline after which the client asks for the outcome instead.
    pub schedule: RetrySchedule,
    /// How long one attempt (or one status look-up) waits for a reply.
    pub attempt_timeout: Duration,
    /// How long the server is asked to wait for the key's first attempt (`Prefer: wait=N`);
    /// `None` sends no `Prefer` header. Sent in whole seconds and strictly below
    /// `attempt_timeout` ([`ClientRules::wait_to_ask`]); after changing `attempt_timeout`, set
    /// it with [`ClientRules::default_prefer_wait`].
    pub prefer_wait: Option<Duration>,
    /// A hard bound on attempts per run, whatever the clock says.
    pub max_attempts: u32,
    /// How many status look-ups to try after the deadline before reporting "unreachable".
    pub status_look_ups: u32,
}

impl ClientRules {
    /// The default wait for an attempt timeout: [`PREFER_WAIT_MARGIN`] less, in whole seconds;
    /// `None` when that leaves nothing (a timeout of 6 s or less).
    pub fn default_prefer_wait(attempt_timeout: Duration) -> Option<Duration> {
        whole_seconds(attempt_timeout.saturating_sub(PREFER_WAIT_MARGIN))
    }

    /// The wait actually asked for: `prefer_wait` rounded down to whole seconds and held to the
    /// largest whole second strictly below `attempt_timeout`; `None` when off or zero.
    pub fn wait_to_ask(&self) -> Option<Duration> {
        let longest = self.attempt_timeout.saturating_sub(Duration::from_nanos(1));
        whole_seconds(self.prefer_wait?.min(longest))
    }
}

impl Default for ClientRules {
    fn default() -> Self {
        let attempt_timeout = Duration::from_secs(15);
        ClientRules {
            schedule: RetrySchedule::default(),
            attempt_timeout,
            prefer_wait: ClientRules::default_prefer_wait(attempt_timeout),
            max_attempts: 100,
            status_look_ups: 3,
        }
    }
}

/// `duration` rounded down to whole seconds; `None` when that is zero.
fn whole_seconds(duration: Duration) -> Option<Duration> {
    Some(Duration::from_secs(duration.as_secs())).filter(|wait| !wait.is_zero())
}

#[cfg(test)]
mod tests {
    // Under wasm32 the same tests run through wasm-bindgen-test (see `.cargo/config.toml`).
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    fn asking(prefer_wait: Option<Duration>, attempt_timeout: Duration) -> Option<Duration> {
        ClientRules {
            attempt_timeout,
            prefer_wait,
            ..ClientRules::default()
        }
        .wait_to_ask()
    }

    #[test]
    fn the_default_wait_is_the_timeout_less_the_margin() {
        assert_eq!(ClientRules::default().wait_to_ask(), Some(10 * SECOND));
        assert_eq!(
            ClientRules::default_prefer_wait(SECOND * 61 / 2),
            Some(25 * SECOND)
        );
        assert_eq!(ClientRules::default_prefer_wait(6 * SECOND), Some(SECOND));
        assert_eq!(ClientRules::default_prefer_wait(5 * SECOND), None);
    }

    #[test]
    fn the_wait_asked_for_is_whole_seconds_strictly_below_the_timeout() {
        assert_eq!(asking(Some(SECOND * 7 / 2), 15 * SECOND), Some(3 * SECOND));
        assert_eq!(asking(Some(15 * SECOND), 15 * SECOND), Some(14 * SECOND));
        assert_eq!(
            asking(Some(60 * SECOND), SECOND * 31 / 2),
            Some(15 * SECOND)
        );
        assert_eq!(asking(Some(5 * SECOND), SECOND), None, "nothing below 1 s");
        assert_eq!(asking(Some(SECOND / 2), 15 * SECOND), None);
        assert_eq!(asking(None, 15 * SECOND), None);
    }
}
