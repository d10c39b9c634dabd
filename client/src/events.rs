//! Progress of an action, reported as it happens so a phone can show it (attempt number, wait,
//! outcome) and the incident replay can count it. Reporting is a callback and never decides
//! anything.

use std::fmt;
use std::time::Duration;

use shared::IdempotencyKey;

/// The callback that receives [`Event`]s; `&|_| {}` ignores them.
pub type Report = dyn Fn(&Event) + Send + Sync;

/// Something that happened to an action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A saved action is being carried on after a restart.
    Resuming {
        /// Its key.
        key: IdempotencyKey,
        /// Time since the user started it.
        elapsed: Duration,
    },
    /// An attempt is being sent (1 for the first).
    Sending {
        /// The attempt's number in this run.
        attempt: u32,
    },
    /// The server answered an attempt.
    Answered {
        /// The attempt's number.
        attempt: u32,
        /// The status code.
        status: u16,
        /// Whether the answer was a replay of a saved one.
        replayed: bool,
    },
    /// An attempt got no answer: a timeout or a network error.
    NoAnswer {
        /// The attempt's number.
        attempt: u32,
        /// What happened.
        reason: String,
    },
    /// The client waits before the next try.
    Waiting {
        /// How long.
        wait: Duration,
        /// The server's `Retry-After`, if it sent one.
        retry_after: Option<Duration>,
    },
    /// The deadline (or the attempt bound) is reached: no more sends, ask for the outcome.
    StoppedSending {
        /// Attempts sent in this run.
        attempts: u32,
    },
    /// The key's status is being looked up (1 for the first look-up).
    CheckingStatus {
        /// The look-up's number.
        check: u32,
    },
    /// A status look-up got no usable answer.
    StatusUnavailable {
        /// The look-up's number.
        check: u32,
        /// What happened.
        reason: String,
    },
    /// The final answer is known but the saved action could not be deleted; a later resume
    /// will only get the same answer replayed.
    ForgetFailed {
        /// The store's error.
        reason: String,
    },
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::Resuming { key, elapsed } => {
                write!(f, "resuming {key}, started {} ago", seconds(*elapsed))
            }
            Event::Sending { attempt } => write!(f, "attempt {attempt}: sending"),
            Event::Answered {
                attempt,
                status,
                replayed,
            } => {
                let replay = if *replayed { " (replayed)" } else { "" };
                write!(f, "attempt {attempt}: answered {status}{replay}")
            }
            Event::NoAnswer { attempt, reason } => write!(f, "attempt {attempt}: {reason}"),
            Event::Waiting { wait, retry_after } => match retry_after {
                Some(floor) => write!(
                    f,
                    "waiting {} (Retry-After {})",
                    seconds(*wait),
                    seconds(*floor)
                ),
                None => write!(f, "waiting {}", seconds(*wait)),
            },
            Event::StoppedSending { attempts } => write!(
                f,
                "stopped sending after {attempts} attempts; asking the server for the outcome"
            ),
            Event::CheckingStatus { check } => write!(f, "status look-up {check}"),
            Event::StatusUnavailable { check, reason } => {
                write!(f, "status look-up {check}: {reason}")
            }
            Event::ForgetFailed { reason } => {
                write!(f, "could not delete the finished action: {reason}")
            }
        }
    }
}

fn seconds(duration: Duration) -> String {
    format!("{:.3} s", duration.as_secs_f64())
}
