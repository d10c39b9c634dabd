//! Bounded waits, and reading one series out of a `/metrics` text.

use std::time::{Duration, Instant};

/// Polls `check` every 25 ms until it holds; panics naming `what` if it does not within
/// `within`. Every wait in the tests is bounded by one of these.
pub async fn wait_for(what: &str, within: Duration, mut check: impl AsyncFnMut() -> bool) {
    let started = Instant::now();
    loop {
        if check().await {
            return;
        }
        assert!(
            started.elapsed() < within,
            "gave up after {within:?} waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The value of the series `name{labels}` in a `/metrics` text, 0 if absent.
pub fn metric_in(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| {
            let rest = line.strip_prefix(series)?;
            // `name 1` or `name{...} 1`, never a longer name that merely starts with `series`.
            rest.starts_with(' ').then(|| rest.trim().parse().ok())?
        })
        .unwrap_or(0.0)
}
