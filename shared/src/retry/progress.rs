//! One action's course, as a pure state machine: given what the last request came back with and
//! the time since the action's first send, what the client does next. Every client runs this
//! (the Rust `payments-client` calls it; the TypeScript package is held to it by the test
//! vectors in `shared/vectors/`), so "what happens after a 409 at minute nine" is decided once.
//!
//! An action is first *sent*: the saved key and body, again and again, until a final reply
//! (2xx, 402, another 4xx) or a 401. A retryable reply (409, 429, 5xx) or no reply at all
//! (a timeout, a failed connection) is followed by a wait of `uniform(0, ceiling)` with
//! `Retry-After` as its floor ([`RetrySchedule`]). Once the next wait would cross the deadline,
//! or the attempts reach their bound, the action is *looked up* instead
//! (`GET /v1/idempotency-keys/{key}`): paying again cannot be the cure for not knowing. A
//! look-up that tells nothing is asked again a bounded number of times, then the action stays
//! saved as [`Unsettled::Unreachable`].
//!
//! Every request carries the same `Prefer: wait=N` ([`ClientRules::wait_to_ask`]).

use std::time::Duration;

use super::{ClientRules, NextStep, ReplyClass, RetrySchedule, classify_status};

/// The longest `Retry-After` taken at its word (about 31 years); a longer value is read as this.
pub const LONGEST_RETRY_AFTER_SECONDS: u64 = 999_999_999;

/// What one request (an attempt or a look-up) came back with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// No reply: the request timed out or the connection failed.
    Nothing,
    /// An HTTP reply.
    Reply {
        /// Its status.
        status: u16,
        /// Its `Retry-After` ([`parse_retry_after`]).
        retry_after: Option<Duration>,
        /// For a look-up's 200, the key's state read from the body ([`KeyState::from_body`]);
        /// `None` when the body could not be read, or for an attempt.
        key_state: Option<KeyState>,
    },
}

/// Where a looked-up key stands (the `state` of `GET /v1/idempotency-keys/{key}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyState {
    /// The first attempt is still running.
    Started,
    /// The bank's reply is unknown; the server is asking the bank.
    Unknown,
    /// The bank never saw it and the server released the key: nothing charged so far.
    Released,
    /// Finished, with the saved reply's status.
    Done {
        /// 201, or 402 for a decline.
        status: u16,
    },
}

impl KeyState {
    /// The state a look-up's 200 body tells, or `None` when the body is not a key status.
    pub fn from_body(body: &str) -> Option<KeyState> {
        let status: crate::api::KeyStatusResponse = serde_json::from_str(body).ok()?;
        Some(match status.progress {
            crate::api::KeyProgress::Started => KeyState::Started,
            crate::api::KeyProgress::Unknown { .. } => KeyState::Unknown,
            crate::api::KeyProgress::Released => KeyState::Released,
            crate::api::KeyProgress::Done { status, .. } => KeyState::Done { status },
        })
    }
}

/// Why an outcome is not settled yet. The action stays saved: money may have moved, and a later
/// resume asks about the same key rather than paying again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unsettled {
    /// The first attempt is still running on the server.
    Started,
    /// The bank's reply is unknown; the server is asking the bank.
    Unknown,
    /// The server could not be asked.
    Unreachable,
    /// The bank never received the payment and the server released the key: nothing was
    /// charged so far. Resuming sends the same request with the same key, which the bank dedupes
    /// against the first call should that still arrive late.
    Released,
}

/// How a run of an action ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// A final reply with this status, from an attempt or (`from_look_up`) the key's status.
    Replied {
        /// 2xx, 402, or another final 4xx.
        status: u16,
        /// Whether the look-up after the deadline told it.
        from_look_up: bool,
    },
    /// The server has no record of the key: nothing was charged.
    NotReceived,
    /// The token was refused (401): sign in again and resume the same action.
    SignInRequired,
    /// Not settled yet.
    Unsettled(Unsettled),
}

impl Ending {
    /// Whether the action stays saved for a later resume (the outcome is not known to be final).
    pub fn keeps_action(&self) -> bool {
        matches!(self, Ending::SignInRequired | Ending::Unsettled(_))
    }
}

/// What the client does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Wait `after`, then send the saved key and body (unchanged), with `Prefer: wait=N` when
    /// `prefer_wait` is `Some(N)`.
    Send {
        /// The wait before sending.
        after: Duration,
        /// The `Prefer: wait` seconds.
        prefer_wait: Option<u64>,
    },
    /// Wait `after`, then ask for the key's status, with `Prefer: wait=N` as above.
    LookUp {
        /// The wait before asking.
        after: Duration,
        /// The `Prefer: wait` seconds.
        prefer_wait: Option<u64>,
    },
    /// Stop: the run ends so.
    Stop(Ending),
}

/// The course of one run of an action.
#[derive(Debug, Clone)]
pub struct ActionProgress {
    rules: ClientRules,
    attempts: u32,
    look_ups: u32,
    phase: Phase,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Sending,
    LookingUp,
    Stopped(Ending),
}

impl ActionProgress {
    /// Starts a run `elapsed` after the action's first send (zero for a new action; more for a
    /// resumed one): its first move is a send, or a look-up when the deadline has passed.
    pub fn start(rules: ClientRules, elapsed: Duration) -> (ActionProgress, Next) {
        let mut progress = ActionProgress {
            rules,
            attempts: 0,
            look_ups: 0,
            phase: Phase::Sending,
        };
        let first = if elapsed < rules.schedule.deadline && rules.max_attempts > 0 {
            progress.send(Duration::ZERO)
        } else {
            progress.look_up(Duration::ZERO)
        };
        (progress, first)
    }

    /// Attempts sent so far in this run (look-ups not counted).
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The move after the last request came back with `seen`, `elapsed` after the action's first
    /// send; `unit` is a random number in `[0, 1)` for the jitter (drawn whether or not used).
    /// After a `Stop`, it stays stopped.
    pub fn next(&mut self, seen: Seen, elapsed: Duration, unit: f64) -> Next {
        match self.phase {
            Phase::Sending => self.after_attempt(seen, elapsed, unit),
            Phase::LookingUp => self.after_look_up(seen, unit),
            Phase::Stopped(ending) => Next::Stop(ending),
        }
    }

    fn after_attempt(&mut self, seen: Seen, elapsed: Duration, unit: f64) -> Next {
        let retry_after = match seen {
            Seen::Reply { status: 401, .. } => return self.stop(Ending::SignInRequired),
            Seen::Reply { status, .. } if classify_status(status) == ReplyClass::Final => {
                return self.stop(Ending::Replied {
                    status,
                    from_look_up: false,
                });
            }
            Seen::Reply { retry_after, .. } => retry_after,
            Seen::Nothing => None,
        };
        let schedule: RetrySchedule = self.rules.schedule;
        match schedule.next_step(self.attempts, elapsed, retry_after, unit) {
            NextStep::RetryAfter(wait) if self.attempts < self.rules.max_attempts => {
                self.send(wait)
            }
            NextStep::RetryAfter(wait) => self.look_up(wait),
            NextStep::CheckStatus => self.look_up(Duration::ZERO),
        }
    }

    fn after_look_up(&mut self, seen: Seen, unit: f64) -> Next {
        let retry_after = match seen {
            Seen::Reply {
                status: 200,
                key_state: Some(state),
                ..
            } => {
                return self.stop(match state {
                    KeyState::Done { status } => Ending::Replied {
                        status,
                        from_look_up: true,
                    },
                    KeyState::Started => Ending::Unsettled(Unsettled::Started),
                    KeyState::Unknown => Ending::Unsettled(Unsettled::Unknown),
                    KeyState::Released => Ending::Unsettled(Unsettled::Released),
                });
            }
            Seen::Reply { status: 404, .. } => return self.stop(Ending::NotReceived),
            Seen::Reply { status: 401, .. } => return self.stop(Ending::SignInRequired),
            Seen::Reply { retry_after, .. } => retry_after,
            Seen::Nothing => None,
        };
        let jittered = self
            .rules
            .schedule
            .ceiling(self.look_ups)
            .mul_f64(unit.clamp(0.0, 1.0));
        self.look_up(retry_after.map_or(jittered, |floor| jittered.max(floor)))
    }

    fn send(&mut self, after: Duration) -> Next {
        self.attempts += 1;
        Next::Send {
            after,
            prefer_wait: self.prefer_wait(),
        }
    }

    fn look_up(&mut self, after: Duration) -> Next {
        if self.look_ups >= self.rules.status_look_ups {
            return self.stop(Ending::Unsettled(Unsettled::Unreachable));
        }
        self.phase = Phase::LookingUp;
        self.look_ups += 1;
        Next::LookUp {
            after,
            prefer_wait: self.prefer_wait(),
        }
    }

    fn stop(&mut self, ending: Ending) -> Next {
        self.phase = Phase::Stopped(ending);
        Next::Stop(ending)
    }

    fn prefer_wait(&self) -> Option<u64> {
        self.rules.wait_to_ask().map(|wait| wait.as_secs())
    }
}

/// A `Retry-After` value in delta-seconds (RFC 9110: digits only, space around allowed), capped
/// at [`LONGEST_RETRY_AFTER_SECONDS`]. The HTTP-date form is not used by this API and, like
/// anything else, reads as no value.
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    let digits = value.trim_matches([' ', '\t']);
    if digits.is_empty() || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    let seconds = digits
        .parse::<u64>()
        .map_or(LONGEST_RETRY_AFTER_SECONDS, |seconds| {
            seconds.min(LONGEST_RETRY_AFTER_SECONDS)
        });
    Some(Duration::from_secs(seconds))
}

#[cfg(test)]
mod tests {
    // Under wasm32 the same tests run through wasm-bindgen-test (see `.cargo/config.toml`).
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    fn reply(status: u16) -> Seen {
        Seen::Reply {
            status,
            retry_after: None,
            key_state: None,
        }
    }

    fn send(after: Duration) -> Next {
        Next::Send {
            after,
            prefer_wait: Some(10),
        }
    }

    fn look_up(after: Duration) -> Next {
        Next::LookUp {
            after,
            prefer_wait: Some(10),
        }
    }

    #[test]
    fn a_new_action_is_sent_at_once_and_a_final_reply_stops_it() {
        for status in [201, 402, 404, 422] {
            let (mut progress, first) =
                ActionProgress::start(ClientRules::default(), Duration::ZERO);
            assert_eq!(first, send(Duration::ZERO));
            assert_eq!(progress.next(reply(503), SECOND, 0.5), send(SECOND / 4));
            let ending = Ending::Replied {
                status,
                from_look_up: false,
            };
            assert_eq!(
                progress.next(reply(status), 2 * SECOND, 0.5),
                Next::Stop(ending)
            );
            assert!(!ending.keeps_action());
            assert_eq!(progress.attempts(), 2);
            assert_eq!(
                progress.next(reply(503), 3 * SECOND, 0.5),
                Next::Stop(ending)
            );
        }
    }

    #[test]
    fn retry_after_is_the_floor_and_the_deadline_turns_sending_into_a_look_up() {
        let (mut progress, _) = ActionProgress::start(ClientRules::default(), Duration::ZERO);
        let busy = Seen::Reply {
            status: 429,
            retry_after: Some(7 * SECOND),
            key_state: None,
        };
        assert_eq!(progress.next(busy, SECOND, 0.1), send(7 * SECOND));
        // The second wait's ceiling is 1 s: 0.9 of it from half a second before the deadline
        // crosses it.
        let nearly = ClientRules::default().schedule.deadline - SECOND / 2;
        assert_eq!(
            progress.next(Seen::Nothing, nearly, 0.9),
            look_up(Duration::ZERO)
        );
    }

    #[test]
    fn a_resumed_action_past_its_deadline_is_looked_up_not_sent() {
        let rules = ClientRules::default();
        let (_, first) = ActionProgress::start(rules, rules.schedule.deadline);
        assert_eq!(first, look_up(Duration::ZERO));
    }

    #[test]
    fn look_ups_settle_keep_or_end_the_action() {
        let cases = [
            (
                Some(KeyState::Done { status: 201 }),
                200,
                Ending::Replied {
                    status: 201,
                    from_look_up: true,
                },
            ),
            (
                Some(KeyState::Unknown),
                200,
                Ending::Unsettled(Unsettled::Unknown),
            ),
            (
                Some(KeyState::Released),
                200,
                Ending::Unsettled(Unsettled::Released),
            ),
            (None, 404, Ending::NotReceived),
            (None, 401, Ending::SignInRequired),
        ];
        let rules = ClientRules::default();
        for (key_state, status, ending) in cases {
            let (mut progress, _) = ActionProgress::start(rules, rules.schedule.deadline);
            let seen = Seen::Reply {
                status,
                retry_after: None,
                key_state,
            };
            assert_eq!(
                progress.next(seen, rules.schedule.deadline, 0.5),
                Next::Stop(ending)
            );
        }
    }

    #[test]
    fn look_ups_that_tell_nothing_are_bounded() {
        let rules = ClientRules::default();
        let (mut progress, _) = ActionProgress::start(rules, rules.schedule.deadline);
        let late = rules.schedule.deadline;
        assert_eq!(progress.next(reply(503), late, 0.5), look_up(SECOND / 4));
        assert_eq!(progress.next(Seen::Nothing, late, 0.5), look_up(SECOND / 2));
        assert_eq!(
            progress.next(reply(200), late, 0.5),
            Next::Stop(Ending::Unsettled(Unsettled::Unreachable))
        );
    }

    #[test]
    fn retry_after_reads_delta_seconds_only() {
        let cases = [
            ("5", Some(5)),
            (" 12\t", Some(12)),
            ("0", Some(0)),
            ("99999999999999999999999", Some(LONGEST_RETRY_AFTER_SECONDS)),
            ("", None),
            ("+5", None),
            ("-1", None),
            ("1.5", None),
            ("Wed, 21 Oct 2026 07:28:00 GMT", None),
        ];
        for (value, seconds) in cases {
            assert_eq!(
                parse_retry_after(value),
                seconds.map(Duration::from_secs),
                "{value:?}"
            );
        }
    }
}
