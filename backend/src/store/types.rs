//! The values the store takes and returns: keys, claims, and the payment and refund rows from
//! which a saved reply is rendered.

use std::time::Duration;

use shared::api::MovementStatus;
use shared::{IdempotencyKey, Operation, StoredRecord, UserId};
use time::OffsetDateTime;
use uuid::Uuid;

/// A key as the store addresses it: always together with its user.
#[derive(Debug, Clone, PartialEq, Eq)]
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

/// A stored key: what the decision needs, plus the movement its reply is rendered from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredKey {
    /// State, fingerprint and timestamps, for `shared::decide`.
    pub record: StoredRecord,
    /// The operation that claimed the key.
    pub operation: Operation,
    /// The payment or refund the key created.
    pub movement_id: Uuid,
    /// The database's clock when the row was read, so expiry and stuck checks use one clock.
    pub read_at: OffsetDateTime,
    /// How many status checks were sent for its movement, by any replica, across re-claims
    /// (the rail's `at_most` counts these).
    pub status_checks: u16,
    /// When the bank's settlement file is due, if the movement's checks ran out undecided.
    pub settlement_due_at: Option<OffsetDateTime>,
    /// For a finished key read by [`crate::store::Store::load_key`] or a claim: its payment or
    /// refund, read in the same query, so a replay costs no further round trip.
    pub saved: Option<Box<SavedMovement>>,
}

/// A movement's final word as [`crate::store::Store::finish`] saved it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    /// The movement as it now stands.
    pub movement: SavedMovement,
    /// The key as this write left it (`done`, with the database's clock), to remember its
    /// reply; `None` if a racing writer (a reconciler) had finished it first.
    pub key: Option<StoredKey>,
}

/// The bank's final word on a movement, as written by [`crate::store::Store::finish`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinalOutcome {
    /// Money moved.
    Succeeded,
    /// The bank declined, with its reason.
    Declined {
        /// The bank's reason, e.g. `insufficient_funds`.
        reason: String,
    },
}

impl FinalOutcome {
    /// The result in a few words, for the audit trail: `succeeded`, `declined: {reason}`. The
    /// view `key_trail` spells the same words from the status and reason for a reply kept on
    /// a payment's row (`migrations/20261207000001_routine_trail_on_movements.sql`).
    pub fn describe(&self) -> String {
        match self {
            FinalOutcome::Succeeded => "succeeded".to_owned(),
            FinalOutcome::Declined { reason } => format!("declined: {reason}"),
        }
    }

    /// The `status` and `decline_reason` columns that record this result.
    pub fn status_and_reason(&self) -> (MovementStatus, Option<&str>) {
        match self {
            FinalOutcome::Succeeded => (MovementStatus::Succeeded, None),
            FinalOutcome::Declined { reason } => (MovementStatus::Declined, Some(reason.as_str())),
        }
    }
}

/// A payment row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentRow {
    /// Its id.
    pub payment_id: Uuid,
    /// The payer.
    pub user_id: UserId,
    /// The bill paid.
    pub bill_id: String,
    /// The amount, in paise.
    pub amount_paise: i64,
    /// The payer's UPI address.
    pub payer_vpa: String,
    /// Pending, succeeded or declined.
    pub status: MovementStatus,
    /// `pay-{payment_id}`, this claim's own (`pay-{user_id}-{key}` on rows written before
    /// references were per claim).
    pub bank_reference: String,
    /// The bank's reason for a decline.
    pub decline_reason: Option<String>,
}

/// A refund row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefundRow {
    /// Its id.
    pub refund_id: Uuid,
    /// The payment refunded.
    pub payment_id: Uuid,
    /// The refunding user (the payer).
    pub user_id: UserId,
    /// The amount, in paise.
    pub amount_paise: i64,
    /// Pending, succeeded or declined.
    pub status: MovementStatus,
    /// `refund-{refund_id}`, this claim's own (`refund-{user_id}-{key}` on older rows).
    pub bank_reference: String,
    /// The reference of the debit the refund reverses, which every refund call names.
    pub debit_reference: String,
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
    /// How much it moves, in paise.
    pub fn amount_paise(&self) -> i64 {
        match self {
            SavedMovement::Payment(payment) => payment.amount_paise,
            SavedMovement::Refund(refund) => refund.amount_paise,
        }
    }

    /// The customer it belongs to.
    pub fn user_id(&self) -> UserId {
        match self {
            SavedMovement::Payment(payment) => payment.user_id.clone(),
            SavedMovement::Refund(refund) => refund.user_id.clone(),
        }
    }

    /// The movement's status.
    pub fn status(&self) -> MovementStatus {
        match self {
            SavedMovement::Payment(payment) => payment.status,
            SavedMovement::Refund(refund) => refund.status,
        }
    }

    /// The operation whose claim created it.
    pub fn operation(&self) -> Operation {
        match self {
            SavedMovement::Payment(_) => Operation::PayBill,
            SavedMovement::Refund(_) => Operation::RefundPayment,
        }
    }

    /// Its id: the payment's or the refund's.
    pub fn id(&self) -> Uuid {
        match self {
            SavedMovement::Payment(payment) => payment.payment_id,
            SavedMovement::Refund(refund) => refund.refund_id,
        }
    }

    /// The bank reference every call and look-up for this movement names.
    pub fn bank_reference(&self) -> &str {
        match self {
            SavedMovement::Payment(payment) => &payment.bank_reference,
            SavedMovement::Refund(refund) => &refund.bank_reference,
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
    /// `pay-{payment_id}` (see `shared::Operation::bank_reference`).
    pub bank_reference: String,
    /// How long its key lives from this claim: the policy's `keep_keys_for_hours` in force now,
    /// written on the key's row as its expiry (the database's clock plus this).
    pub key_kept_for: Duration,
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
    /// `refund-{refund_id}`.
    pub bank_reference: String,
    /// How long its key lives from this claim (see [`NewPayment::key_kept_for`]).
    pub key_kept_for: Duration,
}

/// The result of trying to claim a key, for a payment or a refund.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimResult {
    /// This request won the key; its pending payment or refund was written with the claim.
    Claimed {
        /// The pending payment or refund.
        movement: SavedMovement,
        /// The claim, for the writes made on its behalf.
        claim: ClaimToken,
        /// The key's expiry, as written on its row.
        expires_at: OffsetDateTime,
    },
    /// The (user, key) already exists; decide on the stored row.
    Existing(StoredKey),
    /// The key was stored when the claim ran and gone when it was read (expired and deleted in
    /// that instant). Nothing was written: claim again (the flows' one claim loop).
    Vanished,
    /// A refund of no succeeded payment of the user's. Nothing was written.
    PaymentNotFound,
    /// A refund of more than what remains refundable. Nothing was written.
    ExceedsRemaining {
        /// What could still be refunded, in paise.
        remaining_paise: i64,
    },
}

/// How long a process holds a key it claimed without renewing the lease: it renews it every
/// [`CLAIM_LEASE_RENEWAL`] while the claim's bank call runs. When the process dies the lease
/// lapses within this, and reconciliation asks the bank at once instead of after
/// `stuck_after` (docs/design.md, "Crash recovery in seconds").
pub const CLAIM_LEASE: Duration = Duration::from_secs(6);

/// How often a claim's holder renews its lease while the bank call runs.
pub const CLAIM_LEASE_RENEWAL: Duration = Duration::from_secs(2);

/// How long a reconciler holds a key it took: far longer than a bank look-up takes (the bank
/// client gives up after `BANK_TIMEOUT_MS`, 5 s by default), short enough that a key taken by a
/// crashed reconciler is asked about again well within `stuck_after`.
pub const RECONCILE_LEASE: Duration = Duration::from_secs(60);

/// An unfinished (or released) key taken by reconciliation under a lease, with everything
/// needed to ask the bank. Until the lease is given back (by writing the bank's reply,
/// releasing, voiding or postponing, each checking the lease is still this one's) or runs out,
/// no other reconciler or retry takes the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeasedKey {
    /// The key.
    pub key: KeyRef,
    /// The stored key.
    pub stored: StoredKey,
    /// Its pending movement.
    pub movement: SavedMovement,
    /// Who holds the lease: every write of this taking checks the row still names it.
    pub(in crate::store) owner: Uuid,
}

/// One claim of a key: its first claim, or a re-claim after a release. The claiming request
/// mints it ([`ClaimToken::mint`]) and the claim writes it on the key row, as `claim_token`
/// (which a reconciler's lease never changes) and as the owner of the claim's lease; every
/// later write on behalf of that claim (marking its call unknown, releasing it unsent) matches
/// the first, renewing its lease the second. So a write left over from an earlier claim (a
/// release retried after the database came back, say) never changes a later one, even in the
/// same process (docs/design.md, "A release is tied to its claim").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimToken(Uuid);

impl ClaimToken {
    /// A token never used before.
    pub fn mint() -> ClaimToken {
        ClaimToken(Uuid::new_v4())
    }

    /// The lease the claim takes on its key.
    pub(in crate::store) fn lease(self) -> Lease {
        Lease {
            owner: self.0,
            lasts: CLAIM_LEASE,
        }
    }

    /// The id written on the row.
    pub(in crate::store) fn id(self) -> Uuid {
        self.0
    }
}

/// A lease to take on a key: a fresh owner id, for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::store) struct Lease {
    /// Written to the row; a later taking writes another.
    pub owner: Uuid,
    /// How long the lease holds unless given back.
    pub lasts: Duration,
}

impl Lease {
    /// A new lease for a reconciler.
    pub fn for_reconciler() -> Lease {
        Lease {
            owner: Uuid::new_v4(),
            lasts: RECONCILE_LEASE,
        }
    }
}

/// The unfinished keys at a glance, for the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnfinishedKeys {
    /// How long the oldest `started` key has been claimed.
    pub oldest_started: Duration,
    /// How long the oldest `unknown` key not yet awaiting settlement has been claimed.
    pub oldest_unknown: Duration,
    /// How many keys await the bank's settlement file.
    pub awaiting_settlement: u64,
}

/// What one line of the bank's settlement file did to our records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settlement {
    /// The movement was undecided here; the bank's word is now saved and its key `done`.
    Resolved,
    /// The movement was already final here, as the bank says.
    AlreadyFinal,
    /// The bank's line disagrees with our records (another amount, a status that contradicts
    /// ours, a word for the other operation): recorded on the key's trail, never applied.
    Mismatched(String),
    /// No movement of ours has that reference.
    UnknownReference,
}

/// Where a movement's status checks stand after one was taken or refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckSlot {
    /// The check is counted on the key; send it after this wait (the deployment's pace).
    SendAfter(Duration),
    /// The deployment's pace is spoken for; nothing was counted. Try again after this wait.
    PaceFull(Duration),
}

/// What a PostgreSQL server says of its own replication, as start-up and readiness read it
/// (`crate::durability` judges it). SQLite has none: one file on one machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicationState {
    /// The server is a standby (in recovery), so it takes no writes.
    pub in_recovery: bool,
    /// `synchronous_commit` in this process's sessions: `off`, `local`, `remote_write`, `on` or
    /// `remote_apply`.
    pub synchronous_commit: String,
    /// Standbys that acknowledge commits now (`sync` or `quorum` in `pg_stat_replication`).
    pub synchronous_standbys: u32,
    /// Whether this role may read `pg_stat_replication`'s states (a superuser, or a member of
    /// `pg_read_all_stats`, as `pg_monitor` is); without it every standby looks asynchronous.
    pub sees_replication: bool,
}
