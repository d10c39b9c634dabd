//! The checks every idempotent request passes before any work, in their one order (SPEC §4):
//! the body's size, depth and JSON syntax, then its fingerprint (413, 400), then the
//! `Idempotency-Key` (400), then the fields and the bill in the path (422). The edge's gate and
//! the backend's admission both call [`admit`], so a client gets the same reply wherever it
//! was stopped and the order is written here only. Pure: nothing is saved.

use crate::api::{PayBillRequest, RefundRequest, check_bill_id};
use crate::fingerprint::{BodyLimits, CheckedBody, fingerprint};
use crate::{Fingerprint, IdempotencyKey, Operation, Policy, Problem};

/// The request's fields, checked, by operation.
#[derive(Debug, Clone, PartialEq)]
pub enum Fields {
    /// A payment's body (its bill, in the path, checked too).
    PayBill(PayBillRequest),
    /// A refund's body.
    Refund(RefundRequest),
}

/// A request that passed every check.
#[derive(Debug, Clone, PartialEq)]
pub struct Admission {
    /// The key; `None` only where the policy does not require one for the operation and none
    /// was sent.
    pub key: Option<IdempotencyKey>,
    /// The fingerprint of the operation, path parameter and canonical body.
    pub fingerprint: Fingerprint,
    /// The fields.
    pub fields: Fields,
}

/// Checks a request of `operation` on `path_parameter` (the bill, or the payment refunded) with
/// these values of the policy's key header and this body, in the order above; the first check
/// that fails names the problem.
pub fn admit<'a>(
    (policy, limits): (&Policy, BodyLimits),
    (operation, path_parameter): (Operation, &str),
    key_header_values: impl IntoIterator<Item = &'a [u8]>,
    body: &[u8],
) -> Result<Admission, Problem> {
    let CheckedBody { value, fingerprint } = fingerprint(operation, path_parameter, body, limits)
        .map_err(|error| Problem::from(&error))?;
    let key = policy
        .parse_key_header(operation, key_header_values)
        .map_err(|error| Problem::from(&error))?;
    let fields = match operation {
        Operation::PayBill => {
            check_bill_id(path_parameter)?;
            Fields::PayBill(PayBillRequest::from_json(&value)?)
        }
        Operation::RefundPayment => Fields::Refund(RefundRequest::from_json(&value)?),
    };
    Ok(Admission {
        key,
        fingerprint,
        fields,
    })
}

#[cfg(test)]
mod tests {
    // Under wasm32 the same tests run in Node through wasm-bindgen-test.
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::ProblemKind;

    const KEY: &[u8] = b"8e03978e-40d5-43e8-bc93-6894a57f9324";
    const PAY: &[u8] = br#"{"amount_paise":230000,"payer_vpa":"asha@okbank"}"#;

    fn pay(key: &[&[u8]], body: &[u8], bill: &str) -> Result<Admission, Option<ProblemKind>> {
        let policy = Policy::default_policy();
        let limits = BodyLimits::default();
        let checked = (Operation::PayBill, bill);
        admit((&policy, limits), checked, key.iter().copied(), body).map_err(|p| p.kind())
    }

    /// Key header values, body, bill, and the problem expected.
    type Case<'a> = (&'a [&'a [u8]], &'a [u8], &'a str, ProblemKind);

    #[test]
    fn each_check_comes_before_the_next() {
        let too_large = vec![b' '; BodyLimits::default().max_bytes + 1];
        let cases: [Case<'_>; 6] = [
            (&[], &too_large, "bill!", ProblemKind::BodyTooLarge),
            (&[], b"{", "bill!", ProblemKind::BodyNotJson),
            (&[], PAY, "bill!", ProblemKind::IdempotencyKeyMissing),
            (
                &[b"nope"],
                PAY,
                "bill!",
                ProblemKind::IdempotencyKeyMalformed,
            ),
            (&[KEY], PAY, "bill!", ProblemKind::InvalidField),
            (&[KEY], b"{}", "elec-1", ProblemKind::InvalidField),
        ];
        for (key, body, bill, expected) in cases {
            assert_eq!(pay(key, body, bill).err(), Some(Some(expected)), "{bill}");
        }
    }

    #[test]
    fn a_request_that_passes_carries_its_key_fingerprint_and_fields() {
        let admission = pay(&[KEY], PAY, "elec-1").expect("admitted");
        assert_eq!(
            admission.key.map(|key| key.to_string()).as_deref(),
            Some(std::str::from_utf8(KEY).expect("text"))
        );
        let Fields::PayBill(request) = admission.fields else {
            panic!("a payment's fields");
        };
        assert_eq!(request.payer_vpa, "asha@okbank");
    }
}
