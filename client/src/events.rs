//! Progress of an action, reported as it happens so a phone can show it (attempt number, wait,
//! outcome) and the incident replay can count it. Reporting is a callback and never decides
//! anything.
//!
//! Waiting for the first attempt (`Prefer: wait`, see [`crate::ClientRules`]) shows in two
//! places: [`Event::Sending`] names the wait the attempt asks for, and [`Event::Replied`] names
//! the wait the server applied (`Preference-Applied`), so "the first attempt's reply, after
//! waiting for it" can be told from an ordinary replay.

use std::fmt;
use std::time::Duration;

use shared::IdempotencyKey;
use shared::retry::{ReplyClass, classify_status};

/// The callback that receives [`Event`]s; `&|_| {}` ignores them.
pub type Report = dyn Fn(&Event) + Send + Sync;

/// Something that happened to an action.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
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
        /// The wait it asks for with `Prefer: wait`, if any: how long the server may hold it
        /// for the key's first attempt, should that still be running.
        prefer_wait: Option<Duration>,
    },
    /// The server replied to an attempt.
    Replied {
        /// The attempt's number.
        attempt: u32,
        /// The status code.
        status: u16,
        /// Whether the reply was a replay of a saved one.
        replayed: bool,
        /// The wait the server applied (`Preference-Applied: wait=N`): it held this attempt up
        /// to that long for the key's first attempt. With a final status, the reply is that
        /// attempt's; with 409 or 503, the first attempt had no final reply by then.
        waited: Option<Duration>,
    },
    /// An attempt got no reply: a timeout or a network error.
    NoReply {
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
    /// A status look-up got no usable reply.
    StatusUnavailable {
        /// The look-up's number.
        check: u32,
        /// What happened.
        reason: String,
    },
    /// The final reply is known but the saved action could not be deleted; a later resume
    /// will only get the same reply replayed.
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
            // Attempt 1 of a new action finds no first attempt to wait for; say it from 2 on.
            Event::Sending {
                attempt,
                prefer_wait: Some(wait),
            } if *attempt > 1 => write!(
                f,
                "attempt {attempt}: sending; if the first attempt is still running, waiting up \
                 to {} s for its reply",
                wait.as_secs()
            ),
            Event::Sending { attempt, .. } => write!(f, "attempt {attempt}: sending"),
            Event::Replied {
                attempt,
                status,
                replayed,
                waited,
            } => {
                let replay = if *replayed { " (replayed)" } else { "" };
                write!(f, "attempt {attempt}: replied {status}{replay}")?;
                match waited {
                    None => Ok(()),
                    Some(_) if classify_status(*status) == ReplyClass::Final => {
                        f.write_str("; got the first attempt's reply after waiting for it")
                    }
                    Some(wait) => write!(
                        f,
                        "; the server waited up to {} s for the first attempt, which has no \
                         final reply yet",
                        wait.as_secs()
                    ),
                }
            }
            Event::NoReply { attempt, reason } => write!(f, "attempt {attempt}: {reason}"),
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

#[cfg(test)]
mod tests {
    use super::*;

    const TEN_SECONDS: Option<Duration> = Some(Duration::from_secs(10));

    fn replied(status: u16, waited: Option<Duration>) -> String {
        Event::Replied {
            attempt: 2,
            status,
            replayed: status == 201,
            waited,
        }
        .to_string()
    }

    #[test]
    fn a_retry_says_it_waits_for_the_first_attempt() {
        let sending = |attempt, prefer_wait| Event::Sending {
            attempt,
            prefer_wait,
        };
        assert_eq!(
            sending(2, TEN_SECONDS).to_string(),
            "attempt 2: sending; if the first attempt is still running, waiting up to 10 s for \
             its reply"
        );
        assert_eq!(sending(1, TEN_SECONDS).to_string(), "attempt 1: sending");
        assert_eq!(sending(2, None).to_string(), "attempt 2: sending");
    }

    #[test]
    fn a_reply_after_waiting_says_whose_reply_it_is() {
        assert_eq!(
            replied(201, TEN_SECONDS),
            "attempt 2: replied 201 (replayed); got the first attempt's reply after waiting \
             for it"
        );
        assert_eq!(
            replied(409, TEN_SECONDS),
            "attempt 2: replied 409; the server waited up to 10 s for the first attempt, which \
             has no final reply yet"
        );
        assert_eq!(replied(201, None), "attempt 2: replied 201 (replayed)");
    }
}
