//! A token bucket: it holds up to `burst` tokens, gains `per_minute` tokens a minute, and each
//! request takes one. A full bucket lets `burst` requests through at once; after that, requests
//! pass at the steady rate.
//!
//! Kept in integer units so it is exact on every platform: one token is [`UNITS_PER_TOKEN`]
//! units (the milliseconds in a minute), and the bucket gains `per_minute` units every
//! millisecond, which is `per_minute` tokens a minute.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The units of one token: a bucket refilling at `per_minute` tokens a minute gains
/// `per_minute` units each millisecond.
const UNITS_PER_TOKEN: u64 = 60_000;

/// A rate limit: a steady rate with a burst allowance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limit {
    /// Tokens gained per minute: the steady rate of requests.
    pub per_minute: u32,
    /// The bucket's size: how many requests may arrive at once after a quiet spell.
    pub burst: u32,
}

/// Whether a request may go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Under the limit; one token was taken.
    Allowed,
    /// Over the limit: nothing was taken, and a token will be there after `retry_after`.
    Limited {
        /// How long until the next request would be allowed.
        retry_after: Duration,
    },
}

/// A bucket's level at a moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenBucket {
    /// What the bucket holds, in units (a token is [`UNITS_PER_TOKEN`]).
    units: u64,
    /// When `units` was last brought up to date, Unix milliseconds.
    updated_at_ms: u64,
}

impl Limit {
    /// The bucket's capacity, in units.
    fn capacity(self) -> u64 {
        u64::from(self.burst).saturating_mul(UNITS_PER_TOKEN)
    }
}

impl TokenBucket {
    /// A full bucket at `now_ms`: a requester seen for the first time gets the whole burst.
    pub fn full(limit: Limit, now_ms: u64) -> TokenBucket {
        TokenBucket {
            units: limit.capacity(),
            updated_at_ms: now_ms,
        }
    }

    /// Takes a token for a request at `now_ms`, if there is one. The limit may differ from the
    /// last call's (a changed setting): the level is then capped at the new size.
    pub fn take(&mut self, limit: Limit, now_ms: u64) -> Admission {
        let elapsed_ms = now_ms.saturating_sub(self.updated_at_ms);
        let gained = elapsed_ms.saturating_mul(u64::from(limit.per_minute));
        self.units = self.units.saturating_add(gained).min(limit.capacity());
        self.updated_at_ms = self.updated_at_ms.max(now_ms);
        if self.units >= UNITS_PER_TOKEN {
            self.units -= UNITS_PER_TOKEN;
            return Admission::Allowed;
        }
        let missing = UNITS_PER_TOKEN - self.units;
        let wait_ms = match u64::from(limit.per_minute) {
            // A bucket that never refills (a zero rate is refused by the settings) waits a minute.
            0 => 60_000,
            per_minute => missing.div_ceil(per_minute),
        };
        Admission::Limited {
            retry_after: Duration::from_millis(wait_ms),
        }
    }
}

#[cfg(test)]
mod tests {
    // Under wasm32 the same tests run in Node through wasm-bindgen-test (`.cargo/config.toml`).
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    const T0: u64 = 1_800_000_000_000;

    /// One request a second, five at once.
    const ONE_A_SECOND: Limit = Limit {
        per_minute: 60,
        burst: 5,
    };

    fn allowed_in_a_row(bucket: &mut TokenBucket, limit: Limit, now_ms: u64) -> u32 {
        let mut allowed = 0;
        while bucket.take(limit, now_ms) == Admission::Allowed {
            allowed += 1;
        }
        allowed
    }

    #[test]
    fn a_full_bucket_lets_the_burst_through_then_limits() {
        let mut bucket = TokenBucket::full(ONE_A_SECOND, T0);
        assert_eq!(allowed_in_a_row(&mut bucket, ONE_A_SECOND, T0), 5);
        assert_eq!(
            bucket.take(ONE_A_SECOND, T0),
            Admission::Limited {
                retry_after: Duration::from_secs(1)
            }
        );
    }

    #[test]
    fn the_wait_is_the_time_until_the_next_token() {
        let mut bucket = TokenBucket::full(ONE_A_SECOND, T0);
        allowed_in_a_row(&mut bucket, ONE_A_SECOND, T0);
        assert_eq!(
            bucket.take(ONE_A_SECOND, T0 + 400),
            Admission::Limited {
                retry_after: Duration::from_millis(600)
            }
        );
        assert_eq!(bucket.take(ONE_A_SECOND, T0 + 1000), Admission::Allowed);
        assert!(matches!(
            bucket.take(ONE_A_SECOND, T0 + 1000),
            Admission::Limited { .. }
        ));
    }

    #[test]
    fn a_refused_request_takes_nothing() {
        let mut bucket = TokenBucket::full(ONE_A_SECOND, T0);
        allowed_in_a_row(&mut bucket, ONE_A_SECOND, T0);
        for at in (T0..T0 + 999).step_by(100) {
            assert!(matches!(
                bucket.take(ONE_A_SECOND, at),
                Admission::Limited { .. }
            ));
        }
        assert_eq!(bucket.take(ONE_A_SECOND, T0 + 1000), Admission::Allowed);
    }

    #[test]
    fn the_steady_rate_is_per_minute_over_a_long_run() {
        let limit = Limit {
            per_minute: 120,
            burst: 10,
        };
        let mut bucket = TokenBucket::full(limit, T0);
        // A request every 100 ms for ten minutes: 10 of burst plus 2 a second.
        let allowed = (0..6000)
            .filter(|step| bucket.take(limit, T0 + step * 100) == Admission::Allowed)
            .count();
        assert_eq!(allowed, 10 + 2 * 600 - 1);
    }

    #[test]
    fn slow_rates_below_one_a_second_are_exact() {
        let limit = Limit {
            per_minute: 12,
            burst: 1,
        };
        let mut bucket = TokenBucket::full(limit, T0);
        assert_eq!(bucket.take(limit, T0), Admission::Allowed);
        assert_eq!(
            bucket.take(limit, T0),
            Admission::Limited {
                retry_after: Duration::from_secs(5)
            }
        );
        assert_eq!(bucket.take(limit, T0 + 5_000), Admission::Allowed);
    }

    #[test]
    fn a_quiet_spell_refills_only_up_to_the_burst() {
        let mut bucket = TokenBucket::full(ONE_A_SECOND, T0);
        allowed_in_a_row(&mut bucket, ONE_A_SECOND, T0);
        let a_day_later = T0 + 86_400_000;
        assert_eq!(allowed_in_a_row(&mut bucket, ONE_A_SECOND, a_day_later), 5);
    }

    #[test]
    fn a_clock_that_steps_back_neither_refills_nor_panics() {
        let mut bucket = TokenBucket::full(ONE_A_SECOND, T0);
        allowed_in_a_row(&mut bucket, ONE_A_SECOND, T0);
        assert!(matches!(
            bucket.take(ONE_A_SECOND, T0 - 60_000),
            Admission::Limited { .. }
        ));
        assert_eq!(bucket.take(ONE_A_SECOND, T0 + 1000), Admission::Allowed);
    }

    #[test]
    fn a_smaller_limit_caps_a_fuller_bucket() {
        let mut bucket = TokenBucket::full(ONE_A_SECOND, T0);
        let smaller = Limit {
            per_minute: 60,
            burst: 2,
        };
        assert_eq!(allowed_in_a_row(&mut bucket, smaller, T0), 2);
    }

    #[test]
    fn extreme_limits_neither_overflow_nor_panic() {
        let huge = Limit {
            per_minute: u32::MAX,
            burst: u32::MAX,
        };
        let mut bucket = TokenBucket::full(huge, 0);
        assert_eq!(bucket.take(huge, u64::MAX), Admission::Allowed);
        let stuck = Limit {
            per_minute: 0,
            burst: 0,
        };
        let mut empty = TokenBucket::full(stuck, T0);
        assert_eq!(
            empty.take(stuck, T0),
            Admission::Limited {
                retry_after: Duration::from_secs(60)
            }
        );
    }
}
