//! The state-changing operations an `Idempotency-Key` protects.
//!
//! Reads (`GET /v1/payments/{payment_id}`) are idempotent by nature and never take a key, so
//! they are not listed here. The policy's `required_for` names these operations by
//! [`Operation::name`], and the fingerprint covers [`Operation::method`] and
//! [`Operation::route_template`] so that a key reused for another operation is caught.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// A state-changing operation of the payments API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schemas", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    /// `POST /v1/bills/{bill_id}/pay`: debit the payer and pay a bill.
    PayBill,
    /// `POST /v1/payments/{payment_id}/refunds`: refund part or all of a payment.
    RefundPayment,
}

impl Operation {
    /// Every operation, in a stable order.
    pub const ALL: [Operation; 2] = [Operation::PayBill, Operation::RefundPayment];

    /// The name used in the policy file and in logs.
    pub fn name(self) -> &'static str {
        match self {
            Operation::PayBill => "pay_bill",
            Operation::RefundPayment => "refund_payment",
        }
    }

    /// Looks an operation up by its policy name.
    pub fn from_name(name: &str) -> Option<Operation> {
        Operation::ALL.into_iter().find(|op| op.name() == name)
    }

    /// The HTTP method of the operation.
    pub fn method(self) -> &'static str {
        "POST"
    }

    /// The route with its path parameter named, as the router declares it.
    pub fn route_template(self) -> &'static str {
        match self {
            Operation::PayBill => "/v1/bills/{bill_id}/pay",
            Operation::RefundPayment => "/v1/payments/{payment_id}/refunds",
        }
    }

    /// The bank reference of the payment or refund `movement_id` that a claim of this
    /// operation minted: `pay-{payment_id}` or `refund-{refund_id}` (SPEC §7, "Bank references
    /// identify one claim"). Every call and look-up for that claim names it, across a release
    /// and the retry that re-claims it; a key claimed again after it expired mints a new
    /// movement and so a reference never used before.
    pub fn bank_reference(self, movement_id: Uuid) -> String {
        let prefix = match self {
            Operation::PayBill => "pay",
            Operation::RefundPayment => "refund",
        };
        format!("{prefix}-{}", movement_id.hyphenated())
    }

    /// Recognises a request path, returning the operation and its one path parameter.
    ///
    /// The parameter must be a non-empty single segment; anything else is not an operation.
    pub fn match_path<'p>(method: &str, path: &'p str) -> Option<(Operation, &'p str)> {
        if method != "POST" {
            return None;
        }
        let single_segment = |s: &str| !s.is_empty() && !s.contains('/');
        if let Some(bill_id) = path
            .strip_prefix("/v1/bills/")
            .and_then(|rest| rest.strip_suffix("/pay"))
            .filter(|id| single_segment(id))
        {
            return Some((Operation::PayBill, bill_id));
        }
        path.strip_prefix("/v1/payments/")
            .and_then(|rest| rest.strip_suffix("/refunds"))
            .filter(|id| single_segment(id))
            .map(|payment_id| (Operation::RefundPayment, payment_id))
    }
}

#[cfg(test)]
mod tests {
    // Under wasm32 the same tests run through wasm-bindgen-test (see `.cargo/config.toml`).
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn names_round_trip() {
        for op in Operation::ALL {
            assert_eq!(Operation::from_name(op.name()), Some(op));
        }
        assert_eq!(Operation::from_name("pay"), None);
    }

    #[test]
    fn bank_references_name_the_operation_and_the_claims_movement() {
        let id = Uuid::from_u128(0x0123_4567_89ab_4def_8123_4567_89ab_cdef);
        assert_eq!(
            Operation::PayBill.bank_reference(id),
            "pay-01234567-89ab-4def-8123-456789abcdef"
        );
        assert_eq!(
            Operation::RefundPayment.bank_reference(id),
            "refund-01234567-89ab-4def-8123-456789abcdef"
        );
    }

    #[test]
    fn paths_match_their_operation_and_nothing_else() {
        assert_eq!(
            Operation::match_path("POST", "/v1/bills/elec-42/pay"),
            Some((Operation::PayBill, "elec-42"))
        );
        assert_eq!(
            Operation::match_path("POST", "/v1/payments/7/refunds"),
            Some((Operation::RefundPayment, "7"))
        );
        assert_eq!(Operation::match_path("GET", "/v1/bills/elec-42/pay"), None);
        assert_eq!(Operation::match_path("POST", "/v1/bills//pay"), None);
        assert_eq!(Operation::match_path("POST", "/v1/bills/a/b/pay"), None);
        assert_eq!(Operation::match_path("POST", "/v1/payments/7"), None);
    }
}
