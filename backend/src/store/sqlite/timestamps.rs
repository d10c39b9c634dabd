//! Timestamps as SQLite stores them: INTEGER unix microseconds (UTC). [`NOW`] is the SQL for
//! "now" in that unit, so statements compare times on one clock, as PostgreSQL's `now()` does.

use std::time::Duration;

use time::OffsetDateTime;

use crate::store::error::StoreError;

/// The current time in unix microseconds, as SQL (millisecond resolution: SQLite's clock).
pub(super) const NOW: &str = "CAST(unixepoch('subsec') * 1000000 AS INTEGER)";

/// A stored timestamp as a time.
pub(super) fn from_micros(micros: i64) -> Result<OffsetDateTime, StoreError> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(micros) * 1_000)
        .map_err(|_| StoreError::Corrupt(format!("timestamp {micros} out of range")))
}

/// A time as stored.
pub(super) fn to_micros(at: OffsetDateTime) -> i64 {
    i64::try_from(at.unix_timestamp_nanos() / 1_000).unwrap_or(i64::MAX)
}

/// A span in microseconds, for `NOW - ?` and `NOW + ?`.
pub(super) fn span_micros(span: Duration) -> i64 {
    i64::try_from(span.as_micros()).unwrap_or(i64::MAX)
}
