//! The knobs that make the simulated bank slow, flaky or forgetful.
//!
//! One [`Knobs`] value configures a whole simulator: it is parsed from flags and environment
//! variables by the `bank-simulator` binary (through `clap`), read and replaced as JSON at
//! `GET`/`PUT /knobs` on a running process, and built directly by in-process tests. Replacing the
//! knobs also re-seeds the random generator, so a test that sets knobs and then sends a fixed
//! sequence of requests sees the same outcomes every run.

use serde::{Deserialize, Serialize};

/// How long a lost reply is held back unless told otherwise: longer than any sane client timeout.
pub const DEFAULT_LOST_REPLY_DELAY_MS: u64 = 60_000;

/// The simulator's behaviour. Rates are probabilities in `0.0..=1.0`, drawn per money-moving
/// request (`POST /debits`, `POST /refunds`); lookups, the ledger and the knobs themselves are
/// never slowed down or failed.
///
/// As JSON every field is optional on input (an omitted field takes its default) and unknown
/// fields are refused, so a misspelt knob is an error rather than silently ignored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, clap::Args)]
#[serde(default, deny_unknown_fields)]
pub struct Knobs {
    /// Fixed delay in milliseconds before the bank decides anything.
    #[arg(long, env = "BANK_LATENCY_MS", default_value_t = 0)]
    pub latency_ms: u64,
    /// Extra delay in milliseconds, drawn uniformly from `0..=jitter_ms` per request.
    #[arg(long, env = "BANK_JITTER_MS", default_value_t = 0)]
    pub jitter_ms: u64,
    /// Probability that a debit is declined for insufficient funds (no money moves).
    #[arg(long, env = "BANK_DECLINE_RATE", default_value_t = 0.0)]
    pub decline_rate: f64,
    /// Probability that a request is answered 500 before anything is done or recorded.
    #[arg(long, env = "BANK_ERROR_RATE", default_value_t = 0.0)]
    pub error_rate: f64,
    /// Probability that a request is executed and recorded but its reply is held back for
    /// `lost_reply_delay_ms`, so the caller gives up before it arrives.
    #[arg(long, env = "BANK_LOST_REPLY_RATE", default_value_t = 0.0)]
    pub lost_reply_rate: f64,
    /// How long a lost reply is held back, in milliseconds.
    #[arg(long, env = "BANK_LOST_REPLY_DELAY_MS", default_value_t = DEFAULT_LOST_REPLY_DELAY_MS)]
    pub lost_reply_delay_ms: u64,
    /// Whether a repeated reference replays its first outcome (`true`, like a real bank) or is
    /// executed again (`false`, to prove that the server alone prevents double debits).
    #[arg(long, env = "BANK_DEDUPE", default_value_t = true, action = clap::ArgAction::Set)]
    pub dedupe: bool,
    /// Seed of the one random generator behind every draw, for repeatable runs.
    #[arg(long, env = "BANK_SEED", default_value_t = 0)]
    pub seed: u64,
    /// Whether a call whose caller hangs up before the bank decided it is still decided (and
    /// its money moved) when its latency ends, as a bank that queues requests does: the call
    /// reaches the bank "late", after the caller gave up. Off: the bank drops it with the
    /// connection.
    #[arg(long, env = "BANK_EXECUTES_ABANDONED_CALLS", default_value_t = false, action = clap::ArgAction::Set)]
    pub executes_abandoned_calls: bool,
    /// The HTTP status of a look-up that finds an outcome: `ok` (200) or `original` (the
    /// status the original call answered: 201, 402 or 422), as some banks do.
    #[arg(long, env = "BANK_LOOKUP_STATUS", value_enum, default_value_t = LookupStatus::Ok)]
    pub lookup_status: LookupStatus,
}

/// How look-ups that find an outcome are answered (SPEC §7: "some banks answer `201` with the
/// debited body, others `200`").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum LookupStatus {
    /// 200 with the recorded outcome.
    Ok,
    /// The status the original call answered with the same outcome: 201, 402 or 422.
    Original,
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
            seed: 0,
            executes_abandoned_calls: false,
            lookup_status: LookupStatus::Ok,
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
    /// Checks that every rate is a probability. The binary refuses to start and `PUT /knobs`
    /// answers 422 on an error; [`crate::bank_simulator::BankSimulator::set_knobs`] trusts its
    /// caller (a rate above 1 then always fires, one below 0 never does).
    pub fn validate(&self) -> Result<(), KnobsError> {
        let rates = [
            ("decline_rate", self.decline_rate),
            ("error_rate", self.error_rate),
            ("lost_reply_rate", self.lost_reply_rate),
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
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        knobs: Knobs,
    }

    #[test]
    fn flag_defaults_match_the_default_knobs() {
        let cli = Cli::try_parse_from(["bank-simulator"]).expect("no flags parse");
        assert_eq!(cli.knobs, Knobs::default());
    }

    #[test]
    fn flags_set_every_knob() {
        let cli = Cli::try_parse_from([
            "bank-simulator",
            "--latency-ms=5",
            "--jitter-ms=6",
            "--decline-rate=0.1",
            "--error-rate=0.2",
            "--lost-reply-rate=0.3",
            "--lost-reply-delay-ms=7",
            "--dedupe=false",
            "--seed=8",
            "--executes-abandoned-calls=true",
            "--lookup-status=original",
        ])
        .expect("valid flags parse");
        let expected = Knobs {
            latency_ms: 5,
            jitter_ms: 6,
            decline_rate: 0.1,
            error_rate: 0.2,
            lost_reply_rate: 0.3,
            lost_reply_delay_ms: 7,
            dedupe: false,
            seed: 8,
            executes_abandoned_calls: true,
            lookup_status: LookupStatus::Original,
        };
        assert_eq!(cli.knobs, expected);
    }

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
