//! Compressed time: one second of the night lasts `real_per_second` here. The client library
//! and the plain-retry phones compute every wait, timeout and deadline in the night's seconds
//! (15 s timeout, 10 min deadline, `Retry-After: 5`) and this clock makes them pass faster, so
//! the replay keeps the article's proportions without taking an evening.

use std::time::{Duration, Instant};

use payments_client::Clock;
use time::OffsetDateTime;

/// A clock whose time runs `1 / real_per_second` times faster than the wall clock.
#[derive(Debug, Clone, Copy)]
pub struct ScaledClock {
    /// The night's time when the clock was made.
    night_origin: OffsetDateTime,
    /// The real instant when the clock was made.
    real_origin: Instant,
    /// Real time per second of the night (10 ms: 100 times faster).
    real_per_second: Duration,
}

impl ScaledClock {
    /// A clock starting now, at the given compression.
    pub fn new(real_per_second: Duration) -> ScaledClock {
        ScaledClock {
            night_origin: OffsetDateTime::now_utc(),
            real_origin: Instant::now(),
            real_per_second,
        }
    }

    /// How long `night` lasts in real time.
    pub fn real(&self, night: Duration) -> Duration {
        self.real_per_second.mul_f64(night.as_secs_f64())
    }

    /// How much of the night `real` time is.
    pub fn night(&self, real: Duration) -> Duration {
        real.div_f64(self.real_per_second.as_secs_f64())
    }

    /// The wall-clock time the night started, in milliseconds since the Unix epoch: another
    /// process shares this clock with it and [`ScaledClock::real`]'s scale.
    pub fn origin_unix_ms(&self) -> f64 {
        self.night_origin.unix_timestamp_nanos() as f64 / 1e6
    }

    /// How much of the night has passed since the clock was made.
    pub fn elapsed(&self) -> Duration {
        self.night(self.real_origin.elapsed())
    }

    /// How much of the night had passed at `wall_time`, a real time such as a bank's ledger
    /// entry's (zero before the clock was made): the night starts at the wall clock's time.
    pub fn elapsed_at(&self, wall_time: OffsetDateTime) -> Duration {
        self.night(Duration::try_from(wall_time - self.night_origin).unwrap_or_default())
    }
}

impl Clock for ScaledClock {
    fn now(&self) -> OffsetDateTime {
        self.night_origin + self.elapsed()
    }

    fn sleep(&self, wait: Duration) -> impl Future<Output = ()> + Send {
        tokio::time::sleep(self.real(wait))
    }
}
