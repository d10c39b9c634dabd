//! The values the store takes and returns: keys, claims, and the payment and refund rows from
//! which a saved answer is rendered.

use shared::{IdempotencyKey, Operation, StoredRecord, UserId};
use time::OffsetDateTime;
use uuid::Uuid;

/// A key as the store addresses it: always together with its user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRef {
    /// The authenticated user.
    pub user: UserId,
    /// The key's storage form (`IdempotencyKey::storage_uuid`).
    pub key: Uuid,
}

impl KeyRef {
    /// The key of `user` as stored.
    pub fn new(user: UserId, key: &IdempotencyKey) -> KeyRef {
        KeyRef {
            user,
            key: key.storage_uuid(),
        }
    }
}

/// A stored key: what the decision needs, plus the resource its answer is rendered from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredKey {
    /// State, fingerprint and timestamps, for `shared::decide`.
    pub record: StoredRecord,
    /// The operation that claimed the key.
    pub operation: Operation,
    /// The payment or refund the key created.
    pub resource_id: Uuid,
    /// The database's clock when the row was read, so expiry and stuck checks use one clock.
    pub read_at: OffsetDateTime,
    /// For a finished key read by [`crate::store::Store::load_key`] or a claim: its payment or
    /// refund, read in the same query, so a replay costs no further round trip.
    pub saved: Option<Box<SavedMovement>>,
}

/// Where a payment or refund stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, sqlx::Type)]
#[sqlx(type_name = "movement_status", rename_all = "snake_case")]
pub enum MovementStatus {
    /// Claimed; the bank's outcome is not known yet.
    Pending,
    /// The bank moved the money.
    Succeeded,
    /// The bank refused; no money moved.
    Declined,
}

/// The bank's final word on a movement, as written by [`crate::store::Store::finish`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MovementResult {
    /// Money moved.
    Succeeded,
    /// The bank declined, with its reason.
    Declined {
        /// The bank's reason, e.g. `insufficient_funds`.
        reason: String,
    },
}

impl MovementResult {
    /// The `status` and `decline_reason` columns that record this result.
    pub fn status_and_reason(&self) -> (MovementStatus, Option<&str>) {
        match self {
            MovementResult::Succeeded => (MovementStatus::Succeeded, None),
            MovementResult::Declined { reason } => {
                (MovementStatus::Declined, Some(reason.as_str()))
            }
        }
    }
}

/// A payment row.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct PaymentRow {
    /// Its id.
    pub payment_id: Uuid,
    /// The payer.
    pub user_id: i64,
    /// The bill paid.
    pub bill_id: String,
    /// The amount, in paise.
    pub amount_paise: i64,
    /// The payer's UPI address.
    pub payer_vpa: String,
    /// Pending, succeeded or declined.
    pub status: MovementStatus,
    /// `pay-{user_id}-{key}`.
    pub bank_reference: String,
    /// The bank's reason for a decline.
    pub decline_reason: Option<String>,
}

/// A refund row.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct RefundRow {
    /// Its id.
    pub refund_id: Uuid,
    /// The payment refunded.
    pub payment_id: Uuid,
    /// The refunding user (the payer).
    pub user_id: i64,
    /// The amount, in paise.
    pub amount_paise: i64,
    /// Pending, succeeded or declined.
    pub status: MovementStatus,
    /// `refund-{user_id}-{key}`.
    pub bank_reference: String,
    /// The bank's reason for a refusal.
    pub decline_reason: Option<String>,
}

/// The payment or refund behind a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SavedMovement {
    /// A `pay_bill` key's payment.
    Payment(PaymentRow),
    /// A `refund_payment` key's refund.
    Refund(RefundRow),
}

impl SavedMovement {
    /// The movement's status.
    pub fn status(&self) -> MovementStatus {
        match self {
            SavedMovement::Payment(payment) => payment.status,
            SavedMovement::Refund(refund) => refund.status,
        }
    }
}

/// A payment to create, pending, together with its key's claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPayment {
    /// A fresh id.
    pub payment_id: Uuid,
    /// The bill.
    pub bill_id: String,
    /// The amount, in paise.
    pub amount_paise: i64,
    /// The payer's UPI address.
    pub payer_vpa: String,
    /// `pay-{user_id}-{key}`.
    pub bank_reference: String,
}

/// A refund to create, pending, together with its key's claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRefund {
    /// A fresh id.
    pub refund_id: Uuid,
    /// The payment to refund; must be the user's and succeeded.
    pub payment_id: Uuid,
    /// The amount, in paise.
    pub amount_paise: i64,
    /// `refund-{user_id}-{key}`.
    pub bank_reference: String,
}

/// The result of trying to claim a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimResult<T> {
    /// This request won the key; the pending movement was written with the claim.
    Claimed(T),
    /// The (user, key) already exists; decide on the stored row.
    Existing(StoredKey),
}

/// The result of trying to claim a key for a refund, which also checks the payment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefundClaimResult {
    /// The key was claimed and the refund written pending.
    Claimed {
        /// The pending refund.
        refund: RefundRow,
        /// The bank reference of the payment's debit, which the refund call names.
        debit_reference: String,
    },
    /// The (user, key) already exists; decide on the stored row.
    Existing(StoredKey),
    /// The user has no succeeded payment with that id. Nothing was written.
    PaymentNotFound,
    /// The refund is more than what remains refundable. Nothing was written.
    ExceedsRemaining {
        /// What could still be refunded, in paise.
        remaining_paise: i64,
    },
}

/// An unfinished key taken by reconciliation, with everything needed to ask the bank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnfinishedKey {
    /// The key.
    pub key: KeyRef,
    /// The stored key.
    pub stored: StoredKey,
    /// Its pending movement.
    pub movement: SavedMovement,
    /// How many bank look-ups for it have failed so far.
    pub failed_lookups: i16,
}
