//! The knobs as command-line flags and `BANK_*` environment variables.
//!
//! [`bank_api::Knobs`] is the wire type and carries no command-line parser (clients of the bank's
//! API need none); this struct is its command line, one flag per knob with the same name in
//! kebab case, converted with `Knobs::from`. The defaults are those of `Knobs::default()`
//! (tested below).

use bank_api::{DEFAULT_LOST_REPLY_DELAY_MS, Knobs, LookupStatus};
use clap::builder::{PossibleValuesParser, TypedValueParser};

/// The simulator's behaviour at start-up (each can be changed later with `PUT /knobs`).
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct KnobFlags {
    /// Fixed delay in milliseconds before the bank decides anything.
    #[arg(long, env = "BANK_LATENCY_MS", default_value_t = 0)]
    latency_ms: u64,
    /// Extra delay in milliseconds, drawn uniformly from `0..=jitter_ms` per request.
    #[arg(long, env = "BANK_JITTER_MS", default_value_t = 0)]
    jitter_ms: u64,
    /// Probability that a debit is declined for insufficient funds (no money moves).
    #[arg(long, env = "BANK_DECLINE_RATE", default_value_t = 0.0)]
    decline_rate: f64,
    /// Probability that a request gets 500 before anything is done or recorded.
    #[arg(long, env = "BANK_ERROR_RATE", default_value_t = 0.0)]
    error_rate: f64,
    /// Probability that a request is executed and recorded but its reply is held back for
    /// `lost_reply_delay_ms`, so the caller gives up before it arrives.
    #[arg(long, env = "BANK_LOST_REPLY_RATE", default_value_t = 0.0)]
    lost_reply_rate: f64,
    /// How long a lost reply is held back, in milliseconds.
    #[arg(long, env = "BANK_LOST_REPLY_DELAY_MS", default_value_t = DEFAULT_LOST_REPLY_DELAY_MS)]
    lost_reply_delay_ms: u64,
    /// Whether a repeated reference replays its first outcome (`true`, like a real bank) or is
    /// executed again (`false`, to prove that the server alone prevents double debits).
    #[arg(long, env = "BANK_DEDUPE", default_value_t = true, action = clap::ArgAction::Set)]
    dedupe: bool,
    /// With dedupe on, whether a repeated reference is refused (`409 duplicate_reference`)
    /// rather than replayed; no money moves either way.
    #[arg(long, env = "BANK_REFUSE_REPEATS", default_value_t = false, action = clap::ArgAction::Set)]
    refuse_repeats: bool,
    /// Seed of the one random generator behind every draw, for repeatable runs.
    #[arg(long, env = "BANK_SEED", default_value_t = 0)]
    seed: u64,
    /// Whether a call whose caller hangs up before the bank decided it is still decided (and
    /// its money moved) when its latency ends, as a bank that queues requests does: the call
    /// reaches the bank "late", after the caller gave up. Off: the bank drops it with the
    /// connection.
    #[arg(long, env = "BANK_EXECUTES_ABANDONED_CALLS", default_value_t = false, action = clap::ArgAction::Set)]
    executes_abandoned_calls: bool,
    /// The HTTP status of a look-up that finds an outcome: `ok` (200) or `original` (the
    /// status the original call got: 201, 402 or 422), as some banks do.
    #[arg(
        long,
        env = "BANK_LOOKUP_STATUS",
        default_value = "ok",
        value_parser = PossibleValuesParser::new(["ok", "original"])
            .try_map(|value| value.parse::<LookupStatus>()),
    )]
    lookup_status: LookupStatus,
    /// Fixed delay in milliseconds before a status look-up is replied to: a bank whose status API
    /// is slow (money-moving calls keep `latency_ms`).
    #[arg(long, env = "BANK_LOOKUP_LATENCY_MS", default_value_t = 0)]
    lookup_latency_ms: u64,
    /// How long after a call arrives a look-up of its reference replies `pending`; 0: never.
    #[arg(long, env = "BANK_PENDING_MS", default_value_t = 0)]
    pending_ms: u64,
    /// Refuse a look-up sooner than this after its call arrived (the rail's first-check
    /// rule); 0: not enforced.
    #[arg(long, env = "BANK_STATUS_CHECK_FIRST_AFTER_MS", default_value_t = 0)]
    status_check_first_after_ms: u64,
    /// Refuse look-ups of one reference beyond this many (the rail's limit); 0: no limit.
    #[arg(long, env = "BANK_STATUS_CHECKS_AT_MOST", default_value_t = 0)]
    status_checks_at_most: u32,
    /// How long after a call is decided its callback is sent, in milliseconds.
    #[arg(long, env = "BANK_CALLBACK_DELAY_MS", default_value_t = 0)]
    callback_delay_ms: u64,
    /// Probability that a decided call's callback is never sent.
    #[arg(long, env = "BANK_CALLBACK_LOSS_RATE", default_value_t = 0.0)]
    callback_loss_rate: f64,
    /// How many more times each callback is sent after the first.
    #[arg(long, env = "BANK_CALLBACK_DUPLICATES", default_value_t = 0)]
    callback_duplicates: u32,
}

impl From<KnobFlags> for Knobs {
    fn from(flags: KnobFlags) -> Knobs {
        Knobs {
            latency_ms: flags.latency_ms,
            jitter_ms: flags.jitter_ms,
            decline_rate: flags.decline_rate,
            error_rate: flags.error_rate,
            lost_reply_rate: flags.lost_reply_rate,
            lost_reply_delay_ms: flags.lost_reply_delay_ms,
            dedupe: flags.dedupe,
            refuse_repeats: flags.refuse_repeats,
            seed: flags.seed,
            executes_abandoned_calls: flags.executes_abandoned_calls,
            lookup_status: flags.lookup_status,
            lookup_latency_ms: flags.lookup_latency_ms,
            pending_ms: flags.pending_ms,
            status_check_first_after_ms: flags.status_check_first_after_ms,
            status_checks_at_most: flags.status_checks_at_most,
            callback_delay_ms: flags.callback_delay_ms,
            callback_loss_rate: flags.callback_loss_rate,
            callback_duplicates: flags.callback_duplicates,
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
        knobs: KnobFlags,
    }

    fn knobs_from(args: &[&str]) -> Knobs {
        let cli =
            Cli::try_parse_from(std::iter::once("bank-simulator").chain(args.iter().copied()))
                .expect("valid flags parse");
        Knobs::from(cli.knobs)
    }

    #[test]
    fn flag_defaults_match_the_default_knobs() {
        assert_eq!(knobs_from(&[]), Knobs::default());
    }

    #[test]
    fn flags_set_every_knob() {
        let knobs = knobs_from(&[
            "--latency-ms=5",
            "--jitter-ms=6",
            "--decline-rate=0.1",
            "--error-rate=0.2",
            "--lost-reply-rate=0.3",
            "--lost-reply-delay-ms=7",
            "--dedupe=false",
            "--refuse-repeats=true",
            "--seed=8",
            "--executes-abandoned-calls=true",
            "--lookup-status=original",
            "--lookup-latency-ms=9",
            "--pending-ms=10",
            "--status-check-first-after-ms=11",
            "--status-checks-at-most=12",
            "--callback-delay-ms=13",
            "--callback-loss-rate=0.4",
            "--callback-duplicates=2",
        ]);
        let expected = Knobs {
            latency_ms: 5,
            jitter_ms: 6,
            decline_rate: 0.1,
            error_rate: 0.2,
            lost_reply_rate: 0.3,
            lost_reply_delay_ms: 7,
            dedupe: false,
            refuse_repeats: true,
            seed: 8,
            executes_abandoned_calls: true,
            lookup_status: LookupStatus::Original,
            lookup_latency_ms: 9,
            pending_ms: 10,
            status_check_first_after_ms: 11,
            status_checks_at_most: 12,
            callback_delay_ms: 13,
            callback_loss_rate: 0.4,
            callback_duplicates: 2,
        };
        assert_eq!(knobs, expected);
    }

    #[test]
    fn every_knob_has_its_flag_and_environment_variable() {
        use clap::CommandFactory;

        let command = Cli::command();
        let names: Vec<(String, String)> = command
            .get_arguments()
            .filter_map(|arg| {
                let env = arg.get_env()?.to_str()?.to_owned();
                Some((arg.get_long()?.to_owned(), env))
            })
            .collect();
        let expected = [
            ("latency-ms", "BANK_LATENCY_MS"),
            ("jitter-ms", "BANK_JITTER_MS"),
            ("decline-rate", "BANK_DECLINE_RATE"),
            ("error-rate", "BANK_ERROR_RATE"),
            ("lost-reply-rate", "BANK_LOST_REPLY_RATE"),
            ("lost-reply-delay-ms", "BANK_LOST_REPLY_DELAY_MS"),
            ("dedupe", "BANK_DEDUPE"),
            ("refuse-repeats", "BANK_REFUSE_REPEATS"),
            ("seed", "BANK_SEED"),
            ("executes-abandoned-calls", "BANK_EXECUTES_ABANDONED_CALLS"),
            ("lookup-status", "BANK_LOOKUP_STATUS"),
            ("lookup-latency-ms", "BANK_LOOKUP_LATENCY_MS"),
            ("pending-ms", "BANK_PENDING_MS"),
            (
                "status-check-first-after-ms",
                "BANK_STATUS_CHECK_FIRST_AFTER_MS",
            ),
            ("status-checks-at-most", "BANK_STATUS_CHECKS_AT_MOST"),
            ("callback-delay-ms", "BANK_CALLBACK_DELAY_MS"),
            ("callback-loss-rate", "BANK_CALLBACK_LOSS_RATE"),
            ("callback-duplicates", "BANK_CALLBACK_DUPLICATES"),
        ]
        .map(|(flag, env)| (flag.to_owned(), env.to_owned()));
        assert_eq!(names, expected);
    }

    #[test]
    fn an_unknown_lookup_status_is_refused() {
        let refused = Cli::try_parse_from(["bank-simulator", "--lookup-status=200"]);
        assert!(refused.is_err());
    }
}
