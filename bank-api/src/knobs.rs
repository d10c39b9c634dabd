//! The knobs that make the simulated bank slow, flaky or forgetful.
//!
//! One [`Knobs`] value configures a whole simulator: the `bank-simulator` binary builds it from
//! its flags and environment variables, a running simulator serves and replaces it as JSON at
//! `GET`/`PUT /knobs`, and tests and tools (the incident replay) build it directly. Replacing the
//! knobs also re-seeds the simulator's random generator, so a test that sets knobs and then
//! sends a fixed sequence of requests sees the same outcomes every run.

use serde::{Deserialize, Serialize};

/// How long a lost reply is held back unless told otherwise: longer than any sane client timeout.
pub const DEFAULT_LOST_REPLY_DELAY_MS: u64 = 60_000;

/// The simulator's behaviour. Rates are probabilities in `0.0..=1.0`, drawn per money-moving
/// request (`POST /debits`, `POST /refunds`); lookups, the ledger and the knobs themselves are
/// never failed (look-ups are slowed by `lookup_latency_ms`, replied `pending` for `pending_ms`
/// and refused when they break the rail's rules, `status_check_*`).
///
/// As JSON every field is optional on input (an omitted field takes its default) and unknown
/// fields are refused, so a misspelt knob is an error rather than silently ignored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Knobs {
    /// Fixed delay in milliseconds before the bank decides anything.
    pub latency_ms: u64,
    /// Extra delay in milliseconds, drawn uniformly from `0..=jitter_ms` per request.
    pub jitter_ms: u64,
    /// Probability that a debit is declined for insufficient funds (no money moves).
    pub decline_rate: f64,
    /// Probability that a request gets 503 (naming its reference) before anything is done or recorded.
    pub error_rate: f64,
    /// Probability that a request is executed and recorded but its reply is held back for
    /// `lost_reply_delay_ms`, so the caller gives up before it arrives.
    pub lost_reply_rate: f64,
    /// How long a lost reply is held back, in milliseconds.
    pub lost_reply_delay_ms: u64,
    /// Whether a repeated reference replays its first outcome (`true`, like a real bank) or is
    /// executed again (`false`, to prove that the server alone prevents double debits).
    pub dedupe: bool,
    /// With dedupe on, whether a repeated reference is refused (`409 duplicate_reference`
    /// naming it, as banks that dedupe by refusing do) rather than replayed; no money moves
    /// either way, and a look-up still tells the first outcome.
    pub refuse_repeats: bool,
    /// Seed of the one random generator behind every draw, for repeatable runs.
    pub seed: u64,
    /// Whether a call whose caller hangs up before the bank decided it is still decided (and
    /// its money moved) when its latency ends, as a bank that queues requests does: the call
    /// reaches the bank "late", after the caller gave up. Off: the bank drops it with the
    /// connection.
    pub executes_abandoned_calls: bool,
    /// The HTTP status of a look-up that finds an outcome: `ok` (200) or `original` (the
    /// status the original call got: 201, 402 or 422), as some banks do.
    pub lookup_status: LookupStatus,
    /// Fixed delay in milliseconds before a status look-up is replied to: a bank whose status API
    /// is slow (money-moving calls keep `latency_ms`).
    pub lookup_latency_ms: u64,
    /// How long after a call arrives a look-up of its reference replies `pending` (the bank
    /// holds it undecided, UPI's deemed state), even once it is decided; 0: never.
    pub pending_ms: u64,
    /// The rail's first-check rule as the bank enforces it: a look-up sooner than this after
    /// its reference's call arrived is refused (`429 status_check_refused`); 0: not enforced.
    pub status_check_first_after_ms: u64,
    /// The rail's per-transaction limit: look-ups of one reference beyond this many are
    /// refused (`429 status_check_refused`); 0: no limit.
    pub status_checks_at_most: u32,
    /// How long after a call is decided its signed callback is sent (when the simulator was
    /// given a callback URL and secret).
    pub callback_delay_ms: u64,
    /// Probability that a decided call's callback is never sent.
    pub callback_loss_rate: f64,
    /// How many more times each callback is sent, after the first: duplicates a receiver must
    /// shrug off.
    pub callback_duplicates: u32,
}

/// How look-ups that find an outcome are replied to (SPEC §7: "some banks reply `201` with the
/// debited body, others `200`").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LookupStatus {
    /// 200 with the recorded outcome.
    Ok,
    /// The status the original call got with the same outcome: 201, 402 or 422.
    Original,
}

impl LookupStatus {
    /// The value as flags and JSON spell it.
    pub const fn as_str(self) -> &'static str {
        match self {
            LookupStatus::Ok => "ok",
            LookupStatus::Original => "original",
        }
    }
}

impl std::fmt::Display for LookupStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A look-up status that is neither `ok` nor `original`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expected `ok` or `original`, got `{0}`")]
pub struct UnknownLookupStatus(String);

impl std::str::FromStr for LookupStatus {
    type Err = UnknownLookupStatus;

    /// Parses the spelling of [`LookupStatus::as_str`] (the `--lookup-status` flag's values).
    fn from_str(value: &str) -> Result<Self, Self::Err> {
        [LookupStatus::Ok, LookupStatus::Original]
            .into_iter()
            .find(|status| status.as_str() == value)
            .ok_or_else(|| UnknownLookupStatus(value.to_owned()))
    }
}

impl Default for Knobs {
    /// A fast, reliable, deduplicating bank.
    fn default() -> Self {
        Self {
            latency_ms: 0,
            jitter_ms: 0,
            decline_rate: 0.0,
            error_rate: 0.0,
            lost_reply_rate: 0.0,
            lost_reply_delay_ms: DEFAULT_LOST_REPLY_DELAY_MS,
            dedupe: true,
            refuse_repeats: false,
            seed: 0,
            executes_abandoned_calls: false,
            lookup_status: LookupStatus::Ok,
            lookup_latency_ms: 0,
            pending_ms: 0,
            status_check_first_after_ms: 0,
            status_checks_at_most: 0,
            callback_delay_ms: 0,
            callback_loss_rate: 0.0,
            callback_duplicates: 0,
        }
    }
}

/// Why a set of knobs was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum KnobsError {
    /// A probability outside `0.0..=1.0` (or not a number).
    #[error("{knob} must be within 0.0..=1.0, got {value}")]
    RateOutOfRange {
        /// The knob's field name, as in JSON.
        knob: &'static str,
        /// The refused value.
        value: f64,
    },
}

impl Knobs {
    /// Checks that every rate is a probability. The simulator's binary refuses to start and
    /// `PUT /knobs` replies 422 on an error; the simulator's in-process `set_knobs` trusts its
    /// caller (a rate above 1 then always fires, one below 0 never does).
    pub fn validate(&self) -> Result<(), KnobsError> {
        let rates = [
            ("decline_rate", self.decline_rate),
            ("error_rate", self.error_rate),
            ("lost_reply_rate", self.lost_reply_rate),
            ("callback_loss_rate", self.callback_loss_rate),
        ];
        match rates
            .into_iter()
            .find(|(_, value)| !(0.0..=1.0).contains(value))
        {
            Some((knob, value)) => Err(KnobsError::RateOutOfRange { knob, value }),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_outside_zero_to_one_are_refused() {
        for (knob, value) in [
            ("decline_rate", 1.5),
            ("error_rate", -0.1),
            ("lost_reply_rate", f64::NAN),
        ] {
            let mut knobs = Knobs::default();
            match knob {
                "decline_rate" => knobs.decline_rate = value,
                "error_rate" => knobs.error_rate = value,
                _ => knobs.lost_reply_rate = value,
            }
            let error = knobs.validate().expect_err("out-of-range rate is refused");
            assert!(
                matches!(error, KnobsError::RateOutOfRange { knob: refused, .. } if refused == knob)
            );
        }
        let edges = Knobs {
            decline_rate: 1.0,
            error_rate: 0.0,
            ..Knobs::default()
        };
        assert_eq!(edges.validate(), Ok(()));
    }

    #[test]
    fn lookup_statuses_parse_as_json_spells_them() {
        for status in [LookupStatus::Ok, LookupStatus::Original] {
            let json = serde_json::to_value(status).expect("serializes");
            assert_eq!(json, status.as_str());
            assert_eq!(status.as_str().parse::<LookupStatus>(), Ok(status));
        }
        assert!("200".parse::<LookupStatus>().is_err());
    }

    #[test]
    fn omitted_json_fields_take_defaults_and_unknown_ones_are_refused() {
        let knobs: Knobs =
            serde_json::from_str(r#"{"decline_rate": 0.5}"#).expect("partial knobs parse");
        assert_eq!(
            knobs,
            Knobs {
                decline_rate: 0.5,
                ..Knobs::default()
            }
        );
        assert!(serde_json::from_str::<Knobs>(r#"{"decline_rte": 0.5}"#).is_err());
    }
}
