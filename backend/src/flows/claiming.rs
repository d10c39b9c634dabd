//! What a claim writes with the key: a payment of a bill, or a refund of a payment, made from
//! the admitted request's fields and path.

use shared::admission::Fields;
use shared::api::{PayBillRequest, RefundRequest};
use shared::{Fingerprint, Operation};
use uuid::Uuid;

use super::replies::payment_not_found;
use crate::domain::{Cause, Reply};
use crate::state::AppState;
use crate::store::{ClaimResult, ClaimToken, KeyRef, NewPayment, NewRefund, StoreError};

/// What a claim writes with the key: a payment of a bill, or a refund of a payment.
#[derive(Debug)]
pub(super) enum Claiming {
    /// `pay_bill` of `bill_id`.
    Payment {
        /// The bill.
        bill_id: String,
        /// The checked body.
        request: PayBillRequest,
    },
    /// `refund_payment` of `payment_id`.
    Refund {
        /// The payment refunded.
        payment_id: Uuid,
        /// The checked body.
        request: RefundRequest,
    },
}

impl Claiming {
    /// What an admitted request claims: a payment of the bill in its path, or a refund of the
    /// payment in its path; the 404 reply if that is no payment id.
    pub(super) fn of(fields: Fields, path_parameter: &str) -> Result<Claiming, Reply> {
        Ok(match fields {
            Fields::PayBill(request) => Claiming::Payment {
                bill_id: path_parameter.to_owned(),
                request,
            },
            Fields::Refund(request) => Claiming::Refund {
                payment_id: Uuid::try_parse(path_parameter).map_err(|_| payment_not_found())?,
                request,
            },
        })
    }

    /// The operation claimed.
    pub(super) fn operation(&self) -> Operation {
        match self {
            Claiming::Payment { .. } => Operation::PayBill,
            Claiming::Refund { .. } => Operation::RefundPayment,
        }
    }

    /// The amount the request moves.
    pub(super) fn amount_paise(&self) -> i64 {
        match self {
            Claiming::Payment { request, .. } => request.amount_paise.as_i64(),
            Claiming::Refund { request, .. } => request.amount_paise.as_i64(),
        }
    }

    /// Claims `key` as the claim `claim`, with a fresh pending movement whose id is `id` (the
    /// request's own, `shared::movement_id`, and so its bank reference).
    pub(super) async fn claim(
        &self,
        state: &AppState,
        (key, id, claim): (KeyRef, Uuid, ClaimToken),
        fingerprint: &Fingerprint,
        cause: &Cause,
    ) -> Result<ClaimResult, StoreError> {
        let bank_reference = self.operation().bank_reference(id);
        let key_kept_for = state.policy.keep_keys_for;
        let claims = state.claims();
        match self {
            Claiming::Payment { bill_id, request } => {
                let payment = NewPayment {
                    payment_id: id,
                    bill_id: bill_id.clone(),
                    amount_paise: request.amount_paise.as_i64(),
                    payer_vpa: request.payer_vpa.clone(),
                    bank_reference,
                    key_kept_for,
                };
                claims
                    .claim_payment(key, fingerprint, &payment, claim, cause)
                    .await
            }
            Claiming::Refund {
                payment_id,
                request,
            } => {
                let refund = NewRefund {
                    refund_id: id,
                    payment_id: *payment_id,
                    amount_paise: request.amount_paise.as_i64(),
                    bank_reference,
                    key_kept_for,
                };
                claims
                    .claim_refund(key, fingerprint, &refund, claim, cause)
                    .await
            }
        }
    }
}
