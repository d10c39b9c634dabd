//! The retry schedule: exponential backoff with full jitter, a cap, `Retry-After`, a deadline.
//!
//! Full jitter (wait a uniform random time between zero and the exponential ceiling) spreads a
//! crowd of phones that all timed out at once, so their retries do not arrive together and
//! overload a bank that is already slow. The randomness is a parameter, so the schedule is a pure
//! function that tests can drive; [`random_unit`] draws it from the platform's secure source.

use std::time::Duration;

/// How a client paces its retries of one action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetrySchedule {
    /// The ceiling of the first wait; it doubles after each failed attempt.
    pub base: Duration,
    /// The largest ceiling.
    pub cap: Duration,
    /// After this long since the first attempt, stop retrying and ask for the outcome.
    pub deadline: Duration,
}

impl Default for RetrySchedule {
    /// 500 ms doubling to 30 s, for 10 minutes: the article's app.
    fn default() -> Self {
        RetrySchedule {
            base: Duration::from_millis(500),
            cap: Duration::from_secs(30),
            deadline: Duration::from_secs(10 * 60),
        }
    }
}

/// What the client does after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextStep {
    /// Wait this long, then send the same key and body again.
    RetryAfter(Duration),
    /// The deadline is reached: stop sending and ask the server for the outcome by key.
    CheckStatus,
}

/// How a client must treat a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyClass {
    /// A final reply (2xx, a 402 decline, any other 4xx): stop; the action is over.
    Final,
    /// Not final (409 in progress, 503 outcome pending, 429, 5xx from a proxy): retry the same.
    Retry,
}

/// Classifies an HTTP status. Every retry reuses the key, so retrying a 5xx is safe: the server
/// never saves a server error as a final reply.
pub fn classify_status(status: u16) -> ReplyClass {
    match status {
        409 | 429 | 500..=599 => ReplyClass::Retry,
        _ => ReplyClass::Final,
    }
}

impl RetrySchedule {
    /// The next step after `failed_attempts` failures (1 after the first), `elapsed` since the
    /// first send. `retry_after` is the server's `Retry-After`, a lower bound on the wait;
    /// `unit` is a random number in `[0, 1)`, picking the jittered wait below the ceiling.
    pub fn next_step(
        &self,
        failed_attempts: u32,
        elapsed: Duration,
        retry_after: Option<Duration>,
        unit: f64,
    ) -> NextStep {
        let jittered = self.ceiling(failed_attempts).mul_f64(unit.clamp(0.0, 1.0));
        let wait = retry_after.map_or(jittered, |floor| jittered.max(floor));
        if elapsed.saturating_add(wait) >= self.deadline {
            NextStep::CheckStatus
        } else {
            NextStep::RetryAfter(wait)
        }
    }

    /// `min(cap, base · 2^(failed_attempts − 1))`.
    pub fn ceiling(&self, failed_attempts: u32) -> Duration {
        let doublings = failed_attempts.saturating_sub(1).min(32);
        self.base
            .saturating_mul(1u32 << doublings.min(31))
            .min(self.cap)
    }
}

/// A uniformly random number in `[0, 1)` from the operating system (or the browser's crypto).
pub fn random_unit() -> f64 {
    let mut bytes = [0u8; 8];
    // Failing to read randomness would be a broken platform; fall back to the full wait.
    if getrandom::fill(&mut bytes).is_err() {
        return 1.0 - f64::EPSILON;
    }
    // The top 53 bits give every representable step of a double in [0, 1).
    (u64::from_le_bytes(bytes) >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    // Under wasm32 the same tests run through wasm-bindgen-test (see `.cargo/config.toml`).
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn ceiling_doubles_from_base_up_to_cap() {
        let schedule = RetrySchedule::default();
        let ceilings: Vec<u128> = (1..=9).map(|n| schedule.ceiling(n).as_millis()).collect();
        assert_eq!(
            ceilings,
            [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]
        );
        assert_eq!(schedule.ceiling(u32::MAX), schedule.cap);
    }

    #[test]
    fn wait_is_the_jitter_fraction_of_the_ceiling() {
        let schedule = RetrySchedule::default();
        assert_eq!(
            schedule.next_step(3, SECOND, None, 0.0),
            NextStep::RetryAfter(Duration::ZERO)
        );
        assert_eq!(
            schedule.next_step(3, SECOND, None, 0.5),
            NextStep::RetryAfter(Duration::from_secs(1))
        );
    }

    #[test]
    fn retry_after_is_a_floor_on_the_wait() {
        let schedule = RetrySchedule::default();
        assert_eq!(
            schedule.next_step(1, SECOND, Some(5 * SECOND), 0.9),
            NextStep::RetryAfter(5 * SECOND)
        );
        assert_eq!(
            schedule.next_step(7, SECOND, Some(SECOND), 0.5),
            NextStep::RetryAfter(15 * SECOND)
        );
    }

    #[test]
    fn deadline_turns_a_retry_into_a_status_check() {
        let schedule = RetrySchedule::default();
        let nearly = schedule.deadline - SECOND;
        assert_eq!(
            schedule.next_step(3, nearly, None, 0.9),
            NextStep::CheckStatus
        );
        assert_eq!(
            schedule.next_step(2, schedule.deadline, None, 0.0),
            NextStep::CheckStatus
        );
    }

    #[test]
    fn random_units_spread_over_zero_to_one() {
        let draws: Vec<f64> = (0..2000).map(|_| random_unit()).collect();
        assert!(draws.iter().all(|u| (0.0..1.0).contains(u)));
        let below_half = draws.iter().filter(|u| **u < 0.5).count();
        // A fair source lands 1000 ± 3σ (σ ≈ 22) below one half.
        assert!((930..=1070).contains(&below_half), "{below_half}");
        let deciles = draws.iter().fold([0usize; 10], |mut bins, u| {
            bins[(*u * 10.0) as usize] += 1;
            bins
        });
        assert!(deciles.iter().all(|count| *count > 100), "{deciles:?}");
    }

    #[test]
    fn replies_are_classified_final_or_retry() {
        for status in [200, 201, 400, 401, 402, 404, 413, 422] {
            assert_eq!(classify_status(status), ReplyClass::Final, "{status}");
        }
        for status in [409, 429, 500, 502, 503, 504] {
            assert_eq!(classify_status(status), ReplyClass::Retry, "{status}");
        }
    }
}
