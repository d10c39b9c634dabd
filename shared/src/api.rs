//! The request and response bodies of the payments API (SPEC §7), and their field checks.
//!
//! The checks live here so the edge, the backend and the clients agree on what a valid body is
//! and name the same field when one is not. A body is checked after it parsed as JSON (see
//! [`crate::fingerprint`]); each failure is a 422 `invalid-field` problem naming the field, and
//! nothing is saved, so a corrected retry with the same key goes through.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::problem::Problem;

mod key_status;
#[cfg(feature = "schemas")]
mod schemas;

pub use key_status::{KeyProgress, KeyStatusResponse};
#[cfg(feature = "schemas")]
pub use schemas::{body_schemas, problem_type_schema};

/// The largest amount accepted, in paise (Rs 1 crore); well inside an `i64` and a JS number.
pub const MAX_AMOUNT_PAISE: u64 = 1_000_000_000;

/// A positive amount of money in paise (1/100 rupee). Never a float.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Paise(u64);

impl Paise {
    /// An amount from 1 to [`MAX_AMOUNT_PAISE`].
    pub fn new(paise: u64) -> Option<Paise> {
        (1..=MAX_AMOUNT_PAISE)
            .contains(&paise)
            .then_some(Paise(paise))
    }

    /// The amount as a number of paise.
    pub fn get(self) -> u64 {
        self.0
    }

    /// The amount for a signed 64-bit column.
    pub fn as_i64(self) -> i64 {
        i64::try_from(self.0).expect("amounts are capped at MAX_AMOUNT_PAISE")
    }
}

impl fmt::Display for Paise {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} paise", self.0)
    }
}

/// Where a payment or refund stands: one type for the store's rows, the flows and the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schemas", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum MovementStatus {
    /// Claimed; the bank's outcome is not known yet (or its claim was released and may be
    /// retried).
    Pending,
    /// The bank moved the money.
    Succeeded,
    /// The bank refused; no money moved.
    Declined,
    /// Released, and its last look-up when its key expired still found nothing at the bank: no
    /// money moved, and nothing will (the claim can no longer be retried).
    Void,
}

impl MovementStatus {
    /// Every status, in a stable order.
    pub const ALL: [MovementStatus; 4] = [
        MovementStatus::Pending,
        MovementStatus::Succeeded,
        MovementStatus::Declined,
        MovementStatus::Void,
    ];

    /// The name stored in the database and sent on the wire.
    pub fn name(self) -> &'static str {
        match self {
            MovementStatus::Pending => "pending",
            MovementStatus::Succeeded => "succeeded",
            MovementStatus::Declined => "declined",
            MovementStatus::Void => "void",
        }
    }

    /// The inverse of [`MovementStatus::name`].
    pub fn from_name(name: &str) -> Option<MovementStatus> {
        MovementStatus::ALL
            .into_iter()
            .find(|status| status.name() == name)
    }
}

/// `POST /v1/bills/{bill_id}/pay`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "schemas",
    derive(schemars::JsonSchema),
    schemars(deny_unknown_fields)
)]
pub struct PayBillRequest {
    /// The amount to debit.
    pub amount_paise: Paise,
    /// The payer's UPI address (`name@handle`), the account the bank debits.
    #[cfg_attr(feature = "schemas", schemars(length(max = 255), regex(pattern = schemas::VPA_PATTERN), extend("examples" = ["asha@okbank"])))]
    pub payer_vpa: String,
}

/// `POST /v1/payments/{payment_id}/refunds`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "schemas",
    derive(schemars::JsonSchema),
    schemars(deny_unknown_fields)
)]
pub struct RefundRequest {
    /// The amount to give back; at most what remains of the payment.
    pub amount_paise: Paise,
}

/// The 201 reply to a payment, and the payment part of a read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "schemas",
    derive(schemars::JsonSchema),
    schemars(rename = "Payment")
)]
pub struct PaymentResponse {
    /// The payment's id.
    pub payment_id: Uuid,
    /// The bill it paid.
    pub bill_id: String,
    /// The amount debited.
    pub amount_paise: Paise,
    /// `succeeded` in a 201 (a decline is a 402 problem, not a payment); a read may also show
    /// `pending`, `declined` or `void`.
    pub status: MovementStatus,
    /// The reference the bank debited under: `pay-{payment_id}`, one per claim (SPEC §7).
    pub bank_reference: String,
}

/// The 201 reply to a refund.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "schemas",
    derive(schemars::JsonSchema),
    schemars(rename = "Refund")
)]
pub struct RefundResponse {
    /// The refund's id.
    pub refund_id: Uuid,
    /// The payment refunded.
    pub payment_id: Uuid,
    /// The amount refunded.
    pub amount_paise: Paise,
    /// `succeeded` in a 201; a read may also show `pending`, `declined` or `void`.
    pub status: MovementStatus,
    /// The reference the bank refunded under: `refund-{refund_id}`, one per claim (SPEC §7).
    pub bank_reference: String,
}

/// `GET /v1/payments/{payment_id}`: the payment with its refunds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemas", derive(schemars::JsonSchema))]
pub struct PaymentWithRefunds {
    /// The payment.
    #[serde(flatten)]
    pub payment: PaymentResponse,
    /// Its refunds, oldest first.
    pub refunds: Vec<RefundResponse>,
}

impl PayBillRequest {
    /// Checks a parsed body, naming the first field at fault.
    pub fn from_json(body: &Value) -> Result<PayBillRequest, Problem> {
        let object = as_object(body)?;
        reject_unknown_fields(object, &["amount_paise", "payer_vpa"])?;
        Ok(PayBillRequest {
            amount_paise: amount(object)?,
            payer_vpa: payer_vpa(object)?,
        })
    }
}

impl RefundRequest {
    /// Checks a parsed body, naming the first field at fault.
    pub fn from_json(body: &Value) -> Result<RefundRequest, Problem> {
        let object = as_object(body)?;
        reject_unknown_fields(object, &["amount_paise"])?;
        Ok(RefundRequest {
            amount_paise: amount(object)?,
        })
    }
}

/// Checks a path parameter naming a bill: 1–64 characters of `A-Z a-z 0-9 - _ .`.
pub fn check_bill_id(bill_id: &str) -> Result<(), Problem> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "-_.".contains(c);
    if bill_id.is_empty() || bill_id.len() > 64 || !bill_id.chars().all(allowed) {
        return Err(Problem::invalid_field(
            "bill_id",
            "bill_id must be 1-64 characters of letters, digits, '-', '_' or '.'",
        ));
    }
    Ok(())
}

fn as_object(body: &Value) -> Result<&Map<String, Value>, Problem> {
    body.as_object()
        .ok_or_else(|| Problem::invalid_field("body", "the body must be a JSON object"))
}

fn reject_unknown_fields(object: &Map<String, Value>, known: &[&str]) -> Result<(), Problem> {
    match object.keys().find(|name| !known.contains(&name.as_str())) {
        Some(unknown) => Err(Problem::invalid_field(
            unknown,
            format!("unknown field {unknown:?}; expected {}", known.join(", ")),
        )),
        None => Ok(()),
    }
}

fn amount(object: &Map<String, Value>) -> Result<Paise, Problem> {
    const FIELD: &str = "amount_paise";
    let invalid = |detail: String| Problem::invalid_field(FIELD, detail);
    let value = object
        .get(FIELD)
        .ok_or_else(|| invalid("amount_paise is required".to_owned()))?;
    let Value::Number(number) = value else {
        return Err(invalid(format!(
            "amount_paise must be an integer number of paise, not {value}"
        )));
    };
    let paise = number.as_u64().ok_or_else(|| {
        invalid(format!(
            "amount_paise must be a positive whole number of paise (no fractions or floats), not {number}"
        ))
    })?;
    Paise::new(paise).ok_or_else(|| {
        invalid(format!(
            "amount_paise must be between 1 and {MAX_AMOUNT_PAISE}, not {paise}"
        ))
    })
}

fn payer_vpa(object: &Map<String, Value>) -> Result<String, Problem> {
    const FIELD: &str = "payer_vpa";
    let invalid = |detail: &str| Problem::invalid_field(FIELD, detail);
    let vpa = object
        .get(FIELD)
        .ok_or_else(|| invalid("payer_vpa is required"))?
        .as_str()
        .ok_or_else(|| invalid("payer_vpa must be a string"))?;
    let is_name_char = |c: char| c.is_ascii_alphanumeric() || "._-".contains(c);
    let valid = vpa.len() <= 255
        && vpa.split_once('@').is_some_and(|(name, handle)| {
            !name.is_empty()
                && name.chars().all(is_name_char)
                && !handle.is_empty()
                && handle.chars().all(|c| c.is_ascii_alphanumeric())
        });
    if !valid {
        return Err(invalid(
            "payer_vpa must be a UPI address such as asha@okbank",
        ));
    }
    Ok(vpa.to_owned())
}

#[cfg(test)]
mod tests {
    // Under wasm32 the same tests run through wasm-bindgen-test (see `.cargo/config.toml`).
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::problem::ProblemKind;
    use serde_json::json;

    fn field_of(result: Result<PayBillRequest, Problem>) -> String {
        let problem = result.expect_err("must be refused");
        assert_eq!(problem.kind(), Some(ProblemKind::InvalidField));
        problem.field.expect("names a field").into()
    }

    #[test]
    fn movement_statuses_round_trip_through_their_names_and_serialise_as_them() {
        for status in MovementStatus::ALL {
            assert_eq!(MovementStatus::from_name(status.name()), Some(status));
            assert_eq!(
                serde_json::to_value(status).expect("serialises"),
                serde_json::Value::String(status.name().to_owned())
            );
        }
        assert_eq!(MovementStatus::from_name("refunded"), None);
    }

    #[test]
    fn valid_payment_body_is_accepted() {
        let request =
            PayBillRequest::from_json(&json!({"amount_paise": 230000, "payer_vpa": "asha@okbank"}))
                .expect("valid");
        assert_eq!(request.amount_paise.get(), 230_000);
        assert_eq!(request.payer_vpa, "asha@okbank");
    }

    #[test]
    fn float_negative_zero_string_and_huge_amounts_are_refused() {
        for amount in [
            json!(2300.5),
            json!(230000.0),
            json!(-5),
            json!(0),
            json!("230000"),
            json!(MAX_AMOUNT_PAISE + 1),
            json!(null),
        ] {
            let body = json!({"amount_paise": amount, "payer_vpa": "asha@okbank"});
            assert_eq!(
                field_of(PayBillRequest::from_json(&body)),
                "amount_paise",
                "{amount}"
            );
        }
    }

    #[test]
    fn missing_and_unknown_fields_are_named() {
        assert_eq!(
            field_of(PayBillRequest::from_json(&json!({"payer_vpa": "a@b"}))),
            "amount_paise"
        );
        assert_eq!(
            field_of(PayBillRequest::from_json(&json!({"amount_paise": 1}))),
            "payer_vpa"
        );
        let extra = json!({"amount_paise": 1, "payer_vpa": "a@b", "tip": 5});
        assert_eq!(field_of(PayBillRequest::from_json(&extra)), "tip");
        assert_eq!(field_of(PayBillRequest::from_json(&json!([1]))), "body");
    }

    #[test]
    fn malformed_vpa_is_refused() {
        for vpa in ["asha", "@okbank", "asha@", "a b@okbank", "asha@ok.bank"] {
            let body = json!({"amount_paise": 1, "payer_vpa": vpa});
            assert_eq!(
                field_of(PayBillRequest::from_json(&body)),
                "payer_vpa",
                "{vpa}"
            );
        }
    }

    #[test]
    fn refund_body_takes_only_an_amount() {
        assert!(RefundRequest::from_json(&json!({"amount_paise": 50000})).is_ok());
        assert!(RefundRequest::from_json(&json!({"amount_paise": 1, "x": 1})).is_err());
    }

    #[test]
    fn bill_ids_are_checked() {
        assert!(check_bill_id("elec-2026-11.a_b").is_ok());
        for bad in ["", "a/b", "bill id", &"x".repeat(65)] {
            assert!(check_bill_id(bad).is_err(), "{bad}");
        }
    }
}
