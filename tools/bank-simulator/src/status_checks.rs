//! The rail's rules on status checks, as the simulated bank enforces and counts them.
//!
//! NPCI forbids a check sooner than the first-check delay after the transaction and more than a
//! few checks per transaction; a real switch refuses them. The simulator does the same when its
//! knobs say so (`status_check_first_after_ms`, `status_checks_at_most`) and counts every check
//! it was asked, every refusal and the busiest second, served at `GET /stats`: a test that
//! breaks the rules sees it there, and the backend sees `429 status_check_refused`.
//!
//! It also plays the "deemed" state: for `pending_ms` after a call arrives, a look-up of its
//! reference replies `pending` even when the call is decided.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use bank_api::Knobs;
use serde::Serialize;

/// What the bank does with one look-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CheckVerdict {
    /// Reply to it from the books.
    Reply,
    /// Reply `pending`: the call arrived less than `pending_ms` ago.
    Pending,
    /// Refuse it: it breaks the rail's rules.
    Refused(Refusal),
}

/// Which rule a refused look-up broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Sooner than `status_check_first_after_ms` after the call arrived.
    TooEarly,
    /// Beyond `status_checks_at_most` for its reference.
    OverLimit,
}

impl Refusal {
    /// For the error reply's message.
    pub(crate) fn message(self) -> &'static str {
        match self {
            Refusal::TooEarly => "status check sooner than the first-check delay after the call",
            Refusal::OverLimit => "more status checks of this transaction than the rail allows",
        }
    }
}

/// The counts `GET /stats` serves.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CheckStats {
    /// Money-moving calls received (each debit or refund call, repeats included), counted on
    /// arrival, before the bank decides them.
    pub money_calls_received: u64,
    /// Look-ups received.
    pub status_checks: u64,
    /// Distinct references looked up.
    pub references_checked: u64,
    /// Look-ups refused as sooner than the first-check delay.
    pub refused_too_early: u64,
    /// Look-ups refused as beyond the per-reference limit.
    pub refused_over_limit: u64,
    /// Look-ups replied `pending`.
    pub replied_pending: u64,
    /// The most look-ups of one reference.
    pub most_checks_of_one_reference: u32,
    /// The most look-ups received within any one second.
    pub busiest_second: u32,
}

/// Every reference's call arrival and look-ups, and the counts.
#[derive(Debug, Default)]
pub(crate) struct CheckLog {
    arrivals: HashMap<String, Instant>,
    checks_of: HashMap<String, u32>,
    last_second: VecDeque<Instant>,
    stats: CheckStats,
}

impl CheckLog {
    /// Notes that a money-moving call under `reference` arrived now (the first arrival counts).
    pub(crate) fn call_arrived(&mut self, reference: &str) {
        self.stats.money_calls_received += 1;
        self.arrivals
            .entry(reference.to_owned())
            .or_insert_with(Instant::now);
    }

    /// Counts a look-up of `reference` and says what to do with it under `knobs`.
    pub(crate) fn look_up(&mut self, reference: &str, knobs: &Knobs) -> CheckVerdict {
        let now = Instant::now();
        self.count_in_the_last_second(now);
        self.stats.status_checks += 1;
        let checks = self.checks_of.entry(reference.to_owned()).or_default();
        *checks += 1;
        let checks = *checks;
        self.stats.references_checked = self.checks_of.len() as u64;
        self.stats.most_checks_of_one_reference =
            self.stats.most_checks_of_one_reference.max(checks);
        let since_call = self
            .arrivals
            .get(reference)
            .map(|arrived| now.duration_since(*arrived));
        let first_after = Duration::from_millis(knobs.status_check_first_after_ms);
        if since_call.is_some_and(|since| since < first_after) {
            self.stats.refused_too_early += 1;
            return CheckVerdict::Refused(Refusal::TooEarly);
        }
        if knobs.status_checks_at_most > 0 && checks > knobs.status_checks_at_most {
            self.stats.refused_over_limit += 1;
            return CheckVerdict::Refused(Refusal::OverLimit);
        }
        let pending_for = Duration::from_millis(knobs.pending_ms);
        if since_call.is_some_and(|since| since < pending_for) {
            self.stats.replied_pending += 1;
            return CheckVerdict::Pending;
        }
        CheckVerdict::Reply
    }

    fn count_in_the_last_second(&mut self, now: Instant) {
        while self
            .last_second
            .front()
            .is_some_and(|at| now.duration_since(*at) >= Duration::from_secs(1))
        {
            self.last_second.pop_front();
        }
        self.last_second.push_back(now);
        let in_window = u32::try_from(self.last_second.len()).unwrap_or(u32::MAX);
        self.stats.busiest_second = self.stats.busiest_second.max(in_window);
    }

    /// The counts so far.
    pub(crate) fn stats(&self) -> CheckStats {
        self.stats.clone()
    }

    /// Forgets every arrival, look-up and count.
    pub(crate) fn clear(&mut self) {
        *self = CheckLog::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_too_soon_or_too_many_are_refused_and_counted() {
        let knobs = Knobs {
            status_check_first_after_ms: 60_000,
            status_checks_at_most: 2,
            ..Knobs::default()
        };
        let mut log = CheckLog::default();
        log.call_arrived("pay-1");
        assert_eq!(
            log.look_up("pay-1", &knobs),
            CheckVerdict::Refused(Refusal::TooEarly)
        );
        // A reference the bank never received has no arrival: only the limit applies.
        assert_eq!(log.look_up("pay-2", &knobs), CheckVerdict::Reply);
        assert_eq!(log.look_up("pay-2", &knobs), CheckVerdict::Reply);
        assert_eq!(
            log.look_up("pay-2", &knobs),
            CheckVerdict::Refused(Refusal::OverLimit)
        );
        let stats = log.stats();
        assert_eq!(
            (
                stats.status_checks,
                stats.refused_too_early,
                stats.refused_over_limit
            ),
            (4, 1, 1)
        );
        assert_eq!(stats.most_checks_of_one_reference, 3);
        assert_eq!(stats.busiest_second, 4);
    }

    #[test]
    fn a_young_call_is_pending_and_nothing_is_refused_with_the_rules_off() {
        let knobs = Knobs {
            pending_ms: 60_000,
            ..Knobs::default()
        };
        let mut log = CheckLog::default();
        log.call_arrived("pay-1");
        assert_eq!(log.look_up("pay-1", &knobs), CheckVerdict::Pending);
        assert_eq!(log.look_up("pay-9", &knobs), CheckVerdict::Reply);
        assert_eq!(log.stats().replied_pending, 1);
    }
}
