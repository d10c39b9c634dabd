//! How patient the client is: the retry schedule, how long one attempt may take, and the
//! bounds that keep every loop finite.

use std::time::Duration;

use shared::client::RetrySchedule;

/// The client's settings. The default is the article's app: give up on an attempt after 15 s,
/// back off from 500 ms doubling to 30 s, stop sending after 10 minutes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientConfig {
    /// Backoff, jitter and the deadline after which the client asks for the outcome instead.
    pub schedule: RetrySchedule,
    /// How long one attempt (or one status look-up) waits for an answer.
    pub attempt_timeout: Duration,
    /// A hard bound on attempts per run, whatever the clock says.
    pub max_attempts: u32,
    /// How many status look-ups to try after the deadline before reporting "unreachable".
    pub status_look_ups: u32,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            schedule: RetrySchedule::default(),
            attempt_timeout: Duration::from_secs(15),
            max_attempts: 100,
            status_look_ups: 3,
        }
    }
}
