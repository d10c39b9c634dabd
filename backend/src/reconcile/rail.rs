//! The rail's rules at the moment of a status check (SPEC §3 `status_checks`; docs/design.md,
//! "Status checks the rail allows"): whether a movement's next check may go now, and when
//! otherwise.
//!
//! A check is never sent before the schedule's time for it (`first_after` for the first, then
//! spread to `within`, [`StatusCheckRules::earliest_check`]), never once the movement has had
//! `at_most`, and, in the quiet hours of the policy's zone, only when someone asked for it (a
//! customer's retry or status look-up, an operator): the reconciler's own wait for the window to
//! end. The deployment's pace is the store's (`Leases::take_status_check`), as it spans
//! replicas. Pure but for the time-zone database, so the rules are tested in microseconds.

use std::time::Duration;

use jiff::tz::TimeZone;
use shared::status_checks::StatusCheckRules;
use time::OffsetDateTime;

/// What the rules say of a movement's next check now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// It may go now (within the deployment's pace).
    CheckNow,
    /// Not yet: it may go after this wait.
    WaitFor(Duration),
    /// The movement has had every check the rail allows.
    NoChecksLeft,
}

/// The facts a check is judged by.
#[derive(Debug, Clone, Copy)]
pub struct CheckAsked {
    /// Checks already sent for the movement.
    pub checks_made: u16,
    /// How long ago the movement's latest call started (its claim).
    pub since_call: Duration,
    /// Now, as the local minute of the day in the rules' zone (0..1440).
    pub local_minute: u16,
    /// Whether a person asked for it (a customer's request or an operator), not the
    /// reconciler on its own.
    pub asked_by_someone: bool,
}

/// Judges one check by the rules.
pub fn gate(rules: &StatusCheckRules, asked: CheckAsked) -> Gate {
    let Some(due) = rules.earliest_check(asked.checks_made) else {
        return Gate::NoChecksLeft;
    };
    if asked.since_call < due {
        return Gate::WaitFor(due - asked.since_call);
    }
    if !asked.asked_by_someone
        && let Some(minutes) = rules.quiet_for(asked.local_minute)
    {
        return Gate::WaitFor(Duration::from_secs(u64::from(minutes) * 60));
    }
    Gate::CheckNow
}

/// How long after a movement's claim the rail allows its next status check: the time its call
/// may take to reach the bank (`calls_land_within`, the bank timeout) plus the check's place in
/// the schedule. `None` once `checks_made` has used every check.
pub fn next_check_after_claim(
    rules: &StatusCheckRules,
    calls_land_within: Duration,
    checks_made: u16,
) -> Option<Duration> {
    Some(calls_land_within + rules.earliest_check(checks_made)?)
}

/// The rules' zone, resolved once at start-up; the error names the policy field.
pub fn zone_of(rules: &StatusCheckRules) -> Result<TimeZone, String> {
    TimeZone::get(&rules.quiet_hours_zone).map_err(|_| {
        format!(
            "invalid policy file: `idempotency.status_checks.quiet_hours_zone` names no known \
             time zone: {:?}",
            rules.quiet_hours_zone
        )
    })
}

/// `at` as the minute of the day in `zone`.
pub fn local_minute(zone: &TimeZone, at: OffsetDateTime) -> u16 {
    let Ok(instant) = jiff::Timestamp::from_second(at.unix_timestamp()) else {
        return 0;
    };
    let local = instant.to_zoned(zone.clone());
    u16::try_from(local.hour()).unwrap_or(0) * 60 + u16::try_from(local.minute()).unwrap_or(0)
}

/// How long from `at` until the bank's settlement file for the day is due: the next local
/// midnight in `zone` (the day's file covers every movement of that day).
pub fn until_settlement(zone: &TimeZone, at: OffsetDateTime) -> Duration {
    let minute = local_minute(zone, at);
    let seconds_into_minute = u64::from(at.second());
    let left = u64::from(24 * 60 - minute) * 60;
    Duration::from_secs(left.saturating_sub(seconds_into_minute).max(1))
}

#[cfg(test)]
mod tests {
    use shared::Policy;

    use super::*;

    fn asked(checks_made: u16, since_call_secs: u64, local_minute: u16) -> CheckAsked {
        CheckAsked {
            checks_made,
            since_call: Duration::from_secs(since_call_secs),
            local_minute,
            asked_by_someone: false,
        }
    }

    const NINE_AM: u16 = 9 * 60;
    const ELEVEN_AM: u16 = 11 * 60;

    #[test]
    fn no_check_before_its_time_none_beyond_at_most() {
        let rules = StatusCheckRules::npci();
        assert_eq!(
            gate(&rules, asked(0, 30, NINE_AM)),
            Gate::WaitFor(Duration::from_secs(60))
        );
        assert_eq!(gate(&rules, asked(0, 90, NINE_AM)), Gate::CheckNow);
        assert_eq!(
            gate(&rules, asked(1, 90, NINE_AM)),
            Gate::WaitFor(Duration::from_secs(715))
        );
        assert_eq!(gate(&rules, asked(2, 7_200, NINE_AM)), Gate::CheckNow);
        assert_eq!(gate(&rules, asked(3, 10_000, NINE_AM)), Gate::NoChecksLeft);
    }

    #[test]
    fn quiet_hours_hold_the_reconciler_but_not_a_customer() {
        let rules = StatusCheckRules::npci();
        assert_eq!(
            gate(&rules, asked(0, 600, ELEVEN_AM)),
            Gate::WaitFor(Duration::from_secs(120 * 60))
        );
        let customer = CheckAsked {
            asked_by_someone: true,
            ..asked(0, 600, ELEVEN_AM)
        };
        assert_eq!(gate(&rules, customer), Gate::CheckNow);
        let too_soon = CheckAsked {
            asked_by_someone: true,
            ..asked(0, 10, ELEVEN_AM)
        };
        assert!(matches!(gate(&rules, too_soon), Gate::WaitFor(_)));
    }

    #[test]
    fn kolkata_is_five_and_a_half_hours_ahead_and_settlement_is_due_at_its_midnight() {
        let zone = zone_of(&StatusCheckRules::npci()).expect("a known zone");
        // 04:30 UTC is 10:00 in Kolkata: the morning's quiet window starts.
        let at = OffsetDateTime::from_unix_timestamp(4 * 3_600 + 30 * 60).expect("valid");
        assert_eq!(local_minute(&zone, at), 10 * 60);
        assert_eq!(until_settlement(&zone, at), Duration::from_secs(14 * 3_600));
    }

    #[test]
    fn an_unknown_zone_is_named() {
        let mut policy = Policy::default_policy();
        policy.status_checks.quiet_hours_zone = "Asia/Mumbai".to_owned();
        let error = zone_of(&policy.status_checks).expect_err("no such zone");
        assert!(error.contains("quiet_hours_zone"), "{error}");
        assert!(error.contains("Asia/Mumbai"), "{error}");
    }
}
