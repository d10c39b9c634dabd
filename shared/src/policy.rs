//! The idempotency policy file (SPEC §3): one YAML file, read by the edge and the backend alike.
//!
//! ```yaml
//! idempotency:
//!   header: Idempotency-Key
//!   required_for: [pay_bill, refund_payment]
//!   key_format: uuid_v4
//!   unique_per: user
//!   keep_keys_for_hours: 48
//!   stuck_after_minutes: 5
//!   when_stuck: ask_bank_for_status
//!   max_wait_seconds: 10
//!   status_checks:
//!     first_after_seconds: 90
//!     at_most: 3
//!     within_minutes: 120
//!     per_second: 20
//!     quiet_hours: ["10:00-13:00", "17:00-21:30"]
//!     quiet_hours_zone: Asia/Kolkata
//! ```
//!
//! Loading is strict, because a typo in a file that support and security staff edit must stop
//! start-up rather than quietly change behaviour: an unknown field, a wrong type, a zero or
//! negative duration, an unknown operation or format are each an error naming the field.
//! `unique_per` and `when_stuck` accept the one value this system implements, so the file states
//! the behaviour rather than leaving it implied. `max_wait_seconds` (0 to 60; 10 when left out)
//! caps how long a retry sent with `Prefer: wait=N` waits for the first attempt's reply
//! ([`crate::prefer`]); 0 turns waiting off. `status_checks` is the rail's rules for asking the
//! bank about a call without a final reply ([`crate::status_checks`]); each field left out
//! takes NPCI's value, and its errors name the field as `status_checks.<field>`.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::key::{IdempotencyKey, KeyError};
use crate::operation::Operation;
use crate::status_checks::{RawStatusChecks, StatusCheckRules};

/// The policy that ships with the project; `policy.yaml` at the repository root holds the same.
pub const DEFAULT_POLICY_YAML: &str = include_str!("../../policy.yaml");

/// The validated policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Policy {
    /// The request header that carries the key (`Idempotency-Key`).
    pub header: String,
    /// The operations that refuse a request without a key.
    pub required_for: Vec<Operation>,
    /// What a key must look like.
    pub key_format: KeyFormat,
    /// How long a finished key is kept and replayed; after that a reuse is a new request.
    #[serde(serialize_with = "as_hours")]
    pub keep_keys_for: Duration,
    /// How long a key may stay `started` before it is treated as stuck and reconciled.
    #[serde(serialize_with = "as_minutes")]
    pub stuck_after: Duration,
    /// The longest a retry sent with `Prefer: wait=N` waits for the first attempt's reply;
    /// zero when waiting is off.
    #[serde(serialize_with = "as_seconds")]
    pub max_wait: Duration,
    /// When and how often the bank may be asked about a call without a final reply
    /// ([`crate::status_checks`]); NPCI's rules when the file leaves them out.
    pub status_checks: StatusCheckRules,
}

/// The accepted key formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyFormat {
    /// A version-4 (random) UUID in its hyphenated form.
    UuidV4,
    /// Any 1–255 printable ASCII characters.
    Any,
}

/// Why a policy file was refused. The message names the field.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PolicyError {
    /// The YAML did not match the policy's shape (unknown field, wrong type, unknown value).
    #[error("invalid policy file: {0}")]
    Shape(String),
    /// A field had the right type but an unacceptable value.
    #[error("invalid policy file: `idempotency.{field}` {problem}")]
    Value {
        /// The field, under `idempotency.`.
        field: &'static str,
        /// What is wrong with it.
        problem: String,
    },
}

/// The file's top level: one `idempotency` section, nothing else.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    idempotency: RawPolicy,
}

/// The section as written; signed integers so a negative value gets our message, not serde's.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    header: String,
    required_for: Vec<String>,
    key_format: KeyFormat,
    unique_per: UniquePer,
    keep_keys_for_hours: i64,
    stuck_after_minutes: i64,
    when_stuck: WhenStuck,
    #[serde(default = "default_max_wait_seconds")]
    max_wait_seconds: i64,
    #[serde(default)]
    status_checks: RawStatusChecks,
}

/// The cap on `Prefer: wait` when the file does not set one.
const DEFAULT_MAX_WAIT_SECONDS: i64 = 10;

/// The highest `max_wait_seconds` accepted: a wait holds a request open, and no client waits
/// longer than this for a reply anyway.
pub const MAX_WAIT_SECONDS_LIMIT: u64 = 60;

fn default_max_wait_seconds() -> i64 {
    DEFAULT_MAX_WAIT_SECONDS
}

/// Keys are scoped to the authenticated user; no other scope is implemented.
#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum UniquePer {
    User,
}

/// A stuck key is resolved by asking the bank; no other strategy is implemented.
#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum WhenStuck {
    AskBankForStatus,
}

impl Policy {
    /// Parses and validates a policy file.
    pub fn from_yaml(yaml: &str) -> Result<Policy, PolicyError> {
        let file: PolicyFile =
            serde_saphyr::from_str(yaml).map_err(|error| PolicyError::Shape(error.to_string()))?;
        let raw = file.idempotency;
        let (UniquePer::User, WhenStuck::AskBankForStatus) = (raw.unique_per, raw.when_stuck);
        let keep_keys_for = positive(
            "keep_keys_for_hours",
            raw.keep_keys_for_hours,
            SECONDS_PER_HOUR,
        )?;
        let stuck_after = positive(
            "stuck_after_minutes",
            raw.stuck_after_minutes,
            SECONDS_PER_MINUTE,
        )?;
        // A released claim is looked up once more `stuck_after` after its release and a last
        // time `stuck_after` before its key expires; both must fit in the key's life.
        if keep_keys_for <= stuck_after * 2 {
            return Err(PolicyError::Value {
                field: "keep_keys_for_hours",
                problem: "must be more than twice stuck_after_minutes".to_owned(),
            });
        }
        let max_wait = u64::try_from(raw.max_wait_seconds)
            .ok()
            .filter(|seconds| *seconds <= MAX_WAIT_SECONDS_LIMIT)
            .map(Duration::from_secs)
            .ok_or_else(|| PolicyError::Value {
                field: "max_wait_seconds",
                problem: format!(
                    "must be a whole number from 0 to {MAX_WAIT_SECONDS_LIMIT}, not {}",
                    raw.max_wait_seconds
                ),
            })?;
        let status_checks = raw.status_checks.validate()?;
        // "Never seen" releases a claim only once no call for it can still land (`stuck_after`):
        // a movement's last check must come after that, or it would await settlement instead.
        if status_checks.within < stuck_after {
            return Err(PolicyError::Value {
                field: "status_checks.within_minutes",
                problem: "must be at least stuck_after_minutes".to_owned(),
            });
        }
        Ok(Policy {
            header: validate_header_name(raw.header)?,
            required_for: validate_operations(&raw.required_for)?,
            key_format: raw.key_format,
            keep_keys_for,
            stuck_after,
            max_wait,
            status_checks,
        })
    }

    /// The policy that ships with the project.
    pub fn default_policy() -> Policy {
        Policy::from_yaml(DEFAULT_POLICY_YAML).expect("the shipped policy.yaml is valid")
    }

    /// Whether `operation` refuses requests without a key.
    pub fn requires_key(&self, operation: Operation) -> bool {
        self.required_for.contains(&operation)
    }

    /// Reads the key header for `operation` from all its values in the request: `Ok(None)`
    /// when the operation does not require a key and none was sent, [`KeyError::Missing`] when
    /// it does, [`KeyError::Repeated`] when the header came more than once.
    pub fn parse_key_header<'a>(
        &self,
        operation: Operation,
        header_values: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<Option<IdempotencyKey>, KeyError> {
        let mut values = header_values.into_iter();
        match (values.next(), values.next()) {
            (None, _) if self.requires_key(operation) => Err(KeyError::Missing),
            (None, _) => Ok(None),
            (Some(_), Some(_)) => Err(KeyError::Repeated),
            (Some(value), None) => IdempotencyKey::parse_header(value, self.key_format).map(Some),
        }
    }
}

const SECONDS_PER_MINUTE: u64 = 60;
const SECONDS_PER_HOUR: u64 = 3_600;

fn positive(field: &'static str, value: i64, unit_seconds: u64) -> Result<Duration, PolicyError> {
    let value = u64::try_from(value)
        .ok()
        .filter(|v| *v > 0)
        .ok_or_else(|| PolicyError::Value {
            field,
            problem: format!("must be a positive whole number, not {value}"),
        })?;
    value
        .checked_mul(unit_seconds)
        .map(Duration::from_secs)
        .ok_or_else(|| PolicyError::Value {
            field,
            problem: format!("is too large: {value}"),
        })
}

fn validate_header_name(header: String) -> Result<String, PolicyError> {
    let is_token_char = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if header.is_empty() || !header.chars().all(is_token_char) {
        return Err(PolicyError::Value {
            field: "header",
            problem: format!("must be an HTTP header name, not {header:?}"),
        });
    }
    Ok(header)
}

fn validate_operations(names: &[String]) -> Result<Vec<Operation>, PolicyError> {
    let mut operations = Vec::with_capacity(names.len());
    for name in names {
        let operation = Operation::from_name(name).ok_or_else(|| PolicyError::Value {
            field: "required_for",
            problem: format!(
                "names an unknown operation {name:?} (known: {})",
                Operation::ALL.map(Operation::name).join(", ")
            ),
        })?;
        if !operations.contains(&operation) {
            operations.push(operation);
        }
    }
    Ok(operations)
}

fn as_hours<S: serde::Serializer>(duration: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(duration.as_secs() / SECONDS_PER_HOUR)
}

fn as_seconds<S: serde::Serializer>(duration: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(duration.as_secs())
}

fn as_minutes<S: serde::Serializer>(duration: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(duration.as_secs() / SECONDS_PER_MINUTE)
}

#[cfg(test)]
mod tests {
    // Under wasm32 the same tests run through wasm-bindgen-test (see `.cargo/config.toml`).
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    fn with_line(field: &str, value: &str) -> String {
        DEFAULT_POLICY_YAML
            .lines()
            .map(|line| {
                if line.trim_start().starts_with(&format!("{field}:")) {
                    format!("  {field}: {value}")
                } else {
                    line.to_owned()
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn error_for(field: &str, value: &str) -> String {
        Policy::from_yaml(&with_line(field, value))
            .expect_err("must be refused")
            .to_string()
    }

    #[test]
    fn shipped_policy_loads_with_the_spec_values() {
        let policy = Policy::default_policy();
        assert_eq!(policy.header, "Idempotency-Key");
        assert_eq!(
            policy.required_for,
            vec![Operation::PayBill, Operation::RefundPayment]
        );
        assert_eq!(policy.key_format, KeyFormat::UuidV4);
        assert_eq!(policy.keep_keys_for, Duration::from_secs(48 * 3600));
        assert_eq!(policy.stuck_after, Duration::from_secs(5 * 60));
        assert_eq!(policy.max_wait, Duration::from_secs(10));
    }

    #[test]
    fn unknown_field_is_named() {
        let yaml = format!("{DEFAULT_POLICY_YAML}  retries: 3\n");
        let error = Policy::from_yaml(&yaml)
            .expect_err("unknown field")
            .to_string();
        assert!(error.contains("retries"), "{error}");
    }

    #[test]
    fn wrong_type_is_refused() {
        let error = error_for("keep_keys_for_hours", "forty-eight");
        assert!(error.contains("keep_keys_for_hours"), "{error}");
    }

    #[test]
    fn zero_and_negative_durations_are_named() {
        for (field, value) in [
            ("keep_keys_for_hours", "0"),
            ("keep_keys_for_hours", "-1"),
            ("stuck_after_minutes", "0"),
            ("stuck_after_minutes", "-5"),
        ] {
            let error = error_for(field, value);
            assert!(error.contains(field), "{field}={value}: {error}");
            assert!(error.contains("positive"), "{field}={value}: {error}");
        }
    }

    #[test]
    fn retention_too_short_for_the_late_debit_checks_is_named() {
        // 1 hour is not more than twice 30 minutes: no room for a released claim's checks.
        let yaml = with_line("stuck_after_minutes", "30")
            .replace("keep_keys_for_hours: 48", "keep_keys_for_hours: 1");
        let error = Policy::from_yaml(&yaml)
            .expect_err("retention too short")
            .to_string();
        assert!(error.contains("keep_keys_for_hours"), "{error}");
        assert!(error.contains("stuck_after_minutes"), "{error}");
    }

    #[test]
    fn status_checks_must_last_past_stuck_after() {
        let yaml = DEFAULT_POLICY_YAML.replace("within_minutes: 120", "within_minutes: 4");
        let error = Policy::from_yaml(&yaml).expect_err("too short").to_string();
        assert!(error.contains("status_checks.within_minutes"), "{error}");
        let npci = Policy::default_policy().status_checks;
        assert_eq!(npci, crate::status_checks::StatusCheckRules::npci());
    }

    #[test]
    fn unknown_operation_is_named() {
        let error = error_for("required_for", "[pay_bill, transfer_money]");
        assert!(error.contains("required_for"), "{error}");
        assert!(error.contains("transfer_money"), "{error}");
    }

    #[test]
    fn unknown_key_format_is_named() {
        let error = error_for("key_format", "ulid");
        assert!(error.contains("ulid"), "{error}");
        assert!(error.contains("key_format"), "{error}");
    }

    #[test]
    fn unsupported_scope_and_stuck_strategy_are_refused() {
        assert!(error_for("unique_per", "global").contains("unique_per"));
        assert!(error_for("when_stuck", "retry_blindly").contains("when_stuck"));
    }

    #[test]
    fn bad_header_name_is_named() {
        assert!(error_for("header", "\"Idempotency Key\"").contains("header"));
    }

    #[test]
    fn missing_key_is_an_error_only_where_required() {
        let policy = Policy::default_policy();
        assert_eq!(
            policy.parse_key_header(Operation::PayBill, []),
            Err(KeyError::Missing)
        );
        let relaxed = Policy::from_yaml(&with_line("required_for", "[pay_bill]")).expect("valid");
        assert_eq!(
            relaxed.parse_key_header(Operation::RefundPayment, []),
            Ok(None)
        );
    }

    #[test]
    fn a_repeated_key_header_is_refused() {
        let key = IdempotencyKey::mint().to_string();
        let values = [key.as_bytes(), key.as_bytes()];
        assert_eq!(
            Policy::default_policy().parse_key_header(Operation::PayBill, values),
            Err(KeyError::Repeated)
        );
        assert!(
            Policy::default_policy()
                .parse_key_header(Operation::PayBill, [key.as_bytes()])
                .is_ok()
        );
    }

    #[test]
    fn the_wait_cap_defaults_to_ten_seconds_and_is_bounded() {
        let without: String = DEFAULT_POLICY_YAML
            .lines()
            .filter(|line| !line.trim_start().starts_with("max_wait_seconds:"))
            .map(|line| format!("{line}\n"))
            .collect();
        let policy = Policy::from_yaml(&without).expect("valid without the cap");
        assert_eq!(policy.max_wait, Duration::from_secs(10));
        let off = Policy::from_yaml(&with_line("max_wait_seconds", "0")).expect("valid");
        assert_eq!(off.max_wait, Duration::ZERO);
        for bad in ["-1", "61"] {
            let error = error_for("max_wait_seconds", bad);
            assert!(error.contains("max_wait_seconds"), "{bad}: {error}");
        }
    }
}
