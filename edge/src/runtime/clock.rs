//! The runtime's clock, in the units the protocol uses.

use std::time::Duration;

/// Now, in Unix milliseconds.
pub fn now_ms() -> u64 {
    worker::Date::now().as_millis()
}

/// Now, in Unix seconds (a token's `exp` is in seconds).
pub fn now_unix() -> i64 {
    i64::try_from(now_ms() / 1000).unwrap_or(i64::MAX)
}

/// A duration in whole milliseconds.
pub fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
