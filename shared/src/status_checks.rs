//! The rail's rules for asking a bank what became of a call (SPEC §3, `status_checks`), and
//! the schedule they give: when a movement's next status check may go, and whether a local
//! time of day is in the rail's quiet hours.
//!
//! NPCI's circulars of 26 April and 21 May 2025 bind every UPI participant: the first check no
//! sooner than 90 s after the transaction, at most three, within two hours, no burst of checks,
//! and no system-initiated checks in peak hours. The defaults here are those; the policy file
//! may scale them (tests do: a first check after 1 s).
//!
//! The schedule ([`StatusCheckRules::earliest_check`]) spreads a movement's `at_most` checks
//! from `first_after` to `within` after the call, each gap a constant factor longer than the
//! one before: with the defaults 90 s, 13 min 25 s and 2 h. An early check finds most replies;
//! the last is the rail's deadline. A `first_after` of zero (a test's "no delay") allows the
//! first check at once and spreads the rest from one second.
//!
//! Pure: the caller brings the clock, and turns its instant into a local time of day in
//! `quiet_hours_zone` (the backend, with a time-zone database; this crate compiles to Wasm and
//! keeps none).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::policy::PolicyError;

/// The validated rules.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StatusCheckRules {
    /// No check before this long after the call started.
    #[serde(rename = "first_after_seconds", serialize_with = "as_seconds")]
    pub first_after: Duration,
    /// At most this many checks per movement, however many replicas and restarts.
    pub at_most: u16,
    /// The last check is due this long after the call.
    #[serde(rename = "within_minutes", serialize_with = "as_minutes")]
    pub within: Duration,
    /// At most this many checks a second across the deployment.
    pub per_second: u32,
    /// Windows of the local day in which the reconciler sends no check of its own.
    pub quiet_hours: Vec<QuietWindow>,
    /// The IANA time zone the windows are written in.
    pub quiet_hours_zone: String,
}

/// One quiet window, `HH:MM-HH:MM` in the policy's zone; may span midnight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuietWindow {
    /// Its first minute of the day (0..1440).
    pub starts: u16,
    /// The minute of the day it ends at (not included).
    pub ends: u16,
}

/// The section as written in the policy file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawStatusChecks {
    #[serde(default = "defaults::first_after_seconds")]
    first_after_seconds: i64,
    #[serde(default = "defaults::at_most")]
    at_most: i64,
    #[serde(default = "defaults::within_minutes")]
    within_minutes: i64,
    #[serde(default = "defaults::per_second")]
    per_second: i64,
    #[serde(default = "defaults::quiet_hours")]
    quiet_hours: Vec<String>,
    #[serde(default = "defaults::quiet_hours_zone")]
    quiet_hours_zone: String,
}

impl Default for RawStatusChecks {
    fn default() -> Self {
        RawStatusChecks {
            first_after_seconds: defaults::first_after_seconds(),
            at_most: defaults::at_most(),
            within_minutes: defaults::within_minutes(),
            per_second: defaults::per_second(),
            quiet_hours: defaults::quiet_hours(),
            quiet_hours_zone: defaults::quiet_hours_zone(),
        }
    }
}

/// NPCI's values, taken when the policy leaves a field out.
mod defaults {
    pub fn first_after_seconds() -> i64 {
        90
    }
    pub fn at_most() -> i64 {
        3
    }
    pub fn within_minutes() -> i64 {
        120
    }
    pub fn per_second() -> i64 {
        20
    }
    pub fn quiet_hours() -> Vec<String> {
        vec!["10:00-13:00".to_owned(), "17:00-21:30".to_owned()]
    }
    pub fn quiet_hours_zone() -> String {
        "Asia/Kolkata".to_owned()
    }
}

/// The longest first delay accepted: an hour (NPCI asks for 90 s, 45-60 s once timers change).
const MAX_FIRST_AFTER_SECONDS: i64 = 3_600;
/// The most checks per movement accepted (NPCI allows three).
const MAX_AT_MOST: i64 = 100;
/// A day: checks meant to end later are the settlement file's job.
const MAX_WITHIN_MINUTES: i64 = 24 * 60;
const MAX_PER_SECOND: i64 = 100_000;
const MINUTES_PER_DAY: u16 = 24 * 60;

impl RawStatusChecks {
    pub(crate) fn validate(self) -> Result<StatusCheckRules, PolicyError> {
        let field = |name: &'static str, problem: String| PolicyError::Value {
            field: name,
            problem,
        };
        let in_range = |name: &'static str, value: i64, low: i64, high: i64| {
            if (low..=high).contains(&value) {
                Ok(value.unsigned_abs())
            } else {
                Err(field(
                    name,
                    format!("must be a whole number from {low} to {high}, not {value}"),
                ))
            }
        };
        let first_after = in_range(
            "status_checks.first_after_seconds",
            self.first_after_seconds,
            0,
            MAX_FIRST_AFTER_SECONDS,
        )?;
        let at_most = in_range("status_checks.at_most", self.at_most, 1, MAX_AT_MOST)?;
        let within = in_range(
            "status_checks.within_minutes",
            self.within_minutes,
            1,
            MAX_WITHIN_MINUTES,
        )?;
        let per_second = in_range(
            "status_checks.per_second",
            self.per_second,
            1,
            MAX_PER_SECOND,
        )?;
        if within * 60 <= first_after {
            return Err(field(
                "status_checks.within_minutes",
                "must end after first_after_seconds".to_owned(),
            ));
        }
        let quiet_hours = self
            .quiet_hours
            .iter()
            .map(|window| QuietWindow::parse(window))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|problem| field("status_checks.quiet_hours", problem))?;
        if self.quiet_hours_zone.is_empty() {
            return Err(field(
                "status_checks.quiet_hours_zone",
                "must name an IANA time zone, such as Asia/Kolkata".to_owned(),
            ));
        }
        Ok(StatusCheckRules {
            first_after: Duration::from_secs(first_after),
            at_most: u16::try_from(at_most).unwrap_or(u16::MAX),
            within: Duration::from_secs(within * 60),
            per_second: u32::try_from(per_second).unwrap_or(u32::MAX),
            quiet_hours,
            quiet_hours_zone: self.quiet_hours_zone,
        })
    }
}

impl StatusCheckRules {
    /// NPCI's rules, as the policy has them when it leaves the section out.
    pub fn npci() -> StatusCheckRules {
        RawStatusChecks::default()
            .validate()
            .expect("NPCI's rules are valid")
    }

    /// How long after the call the check numbered `checks_made` (0 for the first) may go, or
    /// `None` when the movement has had all its checks.
    pub fn earliest_check(&self, checks_made: u16) -> Option<Duration> {
        if checks_made >= self.at_most {
            return None;
        }
        if checks_made == 0 {
            return Some(self.first_after);
        }
        let first = self.first_after.max(Duration::from_secs(1));
        if self.at_most == 1 {
            return Some(first);
        }
        let steps = f64::from(self.at_most - 1);
        let growth = (self.within.as_secs_f64() / first.as_secs_f64()).powf(1.0 / steps);
        let after = first.as_secs_f64() * growth.powi(i32::from(checks_made));
        // Whole seconds, rounded up: a check is never early, and the schedule reads plainly.
        Some(Duration::from_secs_f64(after.ceil()).min(self.within))
    }

    /// The time between two checks at the deployment's pace (`per_second`).
    pub fn pace(&self) -> Duration {
        Duration::from_secs(1) / self.per_second.max(1)
    }

    /// How many minutes until the quiet window holding `minute_of_day` (local, 0..1440) ends, or
    /// `None` outside quiet hours.
    pub fn quiet_for(&self, minute_of_day: u16) -> Option<u16> {
        self.quiet_hours
            .iter()
            .filter_map(|window| window.remaining(minute_of_day % MINUTES_PER_DAY))
            .max()
    }
}

impl QuietWindow {
    /// Reads `HH:MM-HH:MM`; the message says what is wrong.
    fn parse(text: &str) -> Result<QuietWindow, String> {
        let bad = || format!("must be windows written HH:MM-HH:MM, not {text:?}");
        let (starts, ends) = text.split_once('-').ok_or_else(bad)?;
        let minute = |clock: &str| -> Option<u16> {
            let (hours, minutes) = clock.trim().split_once(':')?;
            let (hours, minutes): (u16, u16) = (hours.parse().ok()?, minutes.parse().ok()?);
            (hours < 24 && minutes < 60 && clock.trim().len() == 5).then_some(hours * 60 + minutes)
        };
        let (starts, ends) = (
            minute(starts).ok_or_else(bad)?,
            minute(ends).ok_or_else(bad)?,
        );
        if starts == ends {
            return Err(format!("{text:?} is an empty window"));
        }
        Ok(QuietWindow { starts, ends })
    }

    /// Minutes left in this window at `minute` of the day, if it holds it.
    fn remaining(&self, minute: u16) -> Option<u16> {
        let since_start = (minute + MINUTES_PER_DAY - self.starts) % MINUTES_PER_DAY;
        let length = (self.ends + MINUTES_PER_DAY - self.starts) % MINUTES_PER_DAY;
        (since_start < length).then(|| length - since_start)
    }
}

impl Serialize for QuietWindow {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let clock = |minute: u16| format!("{:02}:{:02}", minute / 60, minute % 60);
        s.serialize_str(&format!("{}-{}", clock(self.starts), clock(self.ends)))
    }
}

fn as_seconds<S: serde::Serializer>(duration: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(duration.as_secs())
}

fn as_minutes<S: serde::Serializer>(duration: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(duration.as_secs() / 60)
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    fn rules(first_after: i64, at_most: i64, within: i64) -> StatusCheckRules {
        RawStatusChecks {
            first_after_seconds: first_after,
            at_most,
            within_minutes: within,
            ..RawStatusChecks::default()
        }
        .validate()
        .expect("valid")
    }

    fn seconds(rules: &StatusCheckRules) -> Vec<u64> {
        (0..=rules.at_most)
            .map_while(|made| rules.earliest_check(made))
            .map(|after| after.as_secs())
            .collect()
    }

    #[test]
    fn npci_defaults_give_three_checks_from_90_seconds_to_two_hours() {
        let npci = StatusCheckRules::npci();
        assert_eq!(seconds(&npci), vec![90, 805, 7200]);
        assert_eq!(npci.earliest_check(3), None);
        assert_eq!(npci.pace(), Duration::from_millis(50));
    }

    #[test]
    fn every_check_is_later_than_the_one_before_and_none_after_within() {
        for (first, at_most, within) in [(0, 12, 60), (2, 3, 1), (90, 10, 120), (1, 1, 1)] {
            let rules = rules(first, at_most, within);
            let checks: Vec<Duration> = (0..rules.at_most)
                .map(|made| rules.earliest_check(made).expect("within at_most"))
                .collect();
            assert_eq!(checks.len(), usize::from(rules.at_most));
            assert_eq!(checks[0], rules.first_after, "{first} {at_most} {within}");
            assert!(
                checks.windows(2).all(|pair| pair[0] < pair[1]),
                "{checks:?}"
            );
            assert!(
                checks.iter().all(|check| *check <= rules.within),
                "{checks:?}"
            );
        }
    }

    #[test]
    fn quiet_windows_say_how_long_they_last_and_may_span_midnight() {
        let npci = StatusCheckRules::npci();
        assert_eq!(npci.quiet_for(9 * 60 + 59), None);
        assert_eq!(npci.quiet_for(10 * 60), Some(180));
        assert_eq!(npci.quiet_for(12 * 60 + 59), Some(1));
        assert_eq!(npci.quiet_for(13 * 60), None);
        assert_eq!(npci.quiet_for(21 * 60 + 29), Some(1));
        let night = QuietWindow::parse("23:00-01:00").expect("valid");
        assert_eq!(night.remaining(23 * 60 + 30), Some(90));
        assert_eq!(night.remaining(30), Some(30));
        assert_eq!(night.remaining(60), None);
    }

    #[test]
    fn bad_values_are_refused_naming_the_field() {
        let cases = [
            (
                RawStatusChecks {
                    at_most: 0,
                    ..RawStatusChecks::default()
                },
                "at_most",
            ),
            (
                RawStatusChecks {
                    first_after_seconds: -1,
                    ..RawStatusChecks::default()
                },
                "first_after_seconds",
            ),
            (
                RawStatusChecks {
                    per_second: 0,
                    ..RawStatusChecks::default()
                },
                "per_second",
            ),
            (
                RawStatusChecks {
                    first_after_seconds: 600,
                    within_minutes: 5,
                    ..RawStatusChecks::default()
                },
                "within_minutes",
            ),
            (
                RawStatusChecks {
                    quiet_hours: vec!["10-13".to_owned()],
                    ..RawStatusChecks::default()
                },
                "quiet_hours",
            ),
            (
                RawStatusChecks {
                    quiet_hours: vec!["25:00-26:00".to_owned()],
                    ..RawStatusChecks::default()
                },
                "quiet_hours",
            ),
            (
                RawStatusChecks {
                    quiet_hours_zone: String::new(),
                    ..RawStatusChecks::default()
                },
                "quiet_hours_zone",
            ),
        ];
        for (raw, field) in cases {
            let error = raw.validate().expect_err(field).to_string();
            assert!(error.contains(field), "{field}: {error}");
        }
    }

    #[test]
    fn an_empty_quiet_hours_list_turns_them_off() {
        let off = RawStatusChecks {
            quiet_hours: vec![],
            ..RawStatusChecks::default()
        }
        .validate()
        .expect("valid");
        assert!((0..MINUTES_PER_DAY).all(|minute| off.quiet_for(minute).is_none()));
    }
}
