//! The key row, defined once: every column of `idempotency_keys` with what it holds
//! ([`COLUMNS`], [`POSTGRES_ONLY`]; a test holds them against both databases' migrations), the columns a key
//! is read by and their decoder ([`read_columns`], [`stored_key_from_row`]), and the insert of a
//! `started` key with its parameters ([`insert_started`], [`bind_started`]), which every claim
//! statement on both databases uses. docs/code-map.md, "Adding a column to a key", says where a
//! new column goes.

use shared::{Fingerprint, KeyState, Operation, StoredRecord};
use sqlx::query::Query;
use uuid::Uuid;

use crate::store::columns::Subject;
use crate::store::columns::{Label, Span, Timestamp};
use crate::store::db::{Arg, Db, Fields};
use crate::store::error::StoreError;
use crate::store::types::{KeyRef, Lease, StoredKey};

/// Every column of `idempotency_keys`, in PostgreSQL's order, with what it holds.
pub const COLUMNS: [(&str, &str); 19] = [
    (
        "user_id",
        "the user the key belongs to: keys are scoped per user",
    ),
    ("key", "the client's Idempotency-Key"),
    ("operation", "pay_bill or refund_payment"),
    ("state", "started, unknown, released or done"),
    (
        "fingerprint",
        "SHA-256 of the request's method, path and body",
    ),
    (
        "resource_id",
        "the movement (payment or refund) the claim created",
    ),
    ("created_at", "the first claim"),
    (
        "claimed_at",
        "the latest claim (a re-claim of a released key moves it)",
    ),
    ("next_lookup_at", "when a reconciler may take the key next"),
    (
        "failed_lookups",
        "look-ups that failed in a row, for the operator queue",
    ),
    (
        "bank_call_ended",
        "no longer read (the rail's rules replaced it); dropped by a later release",
    ),
    (
        "lease_owner",
        "the holder of the key's lease: its claim, or a reconciler",
    ),
    ("lease_until", "when that lease lapses"),
    (
        "expires_at",
        "when the key may be deleted, decided at the claim",
    ),
    (
        "awaited",
        "a request waits on the key: finishing it announces the change",
    ),
    (
        "claim_token",
        "the claim's own id: an attempt's writes name it",
    ),
    (
        "status_checks",
        "status checks sent for the movement (the rail's at_most)",
    ),
    (
        "last_status_check_at",
        "when the latest status check was sent",
    ),
    (
        "settlement_due_at",
        "set once the checks ran out: when the settlement file is due",
    ),
];

/// The columns of [`COLUMNS`] that only PostgreSQL has: `awaited` marks a key whose change
/// other processes must be told of (`NOTIFY`); SQLite's store is one process, which wakes its
/// own waiters.
pub const POSTGRES_ONLY: [&str; 1] = ["awaited"];

/// The columns [`stored_key_from_row`] decodes.
const DECODED: [&str; 9] = [
    "operation",
    "state",
    "fingerprint",
    "resource_id",
    "created_at",
    "claimed_at",
    "expires_at",
    "status_checks",
    "settlement_due_at",
];

/// The columns [`stored_key_from_row`] decodes, of the table aliased `alias` (`"k."`, or `""`
/// where `RETURNING` takes no alias), without the database's clock: for a statement that
/// selects them beside another table's user id.
pub fn decoded_columns(alias: &str) -> String {
    DECODED.map(|column| format!("{alias}{column}")).join(", ")
}

/// The columns a key is read by: its user and key, [`decoded_columns`], and the database's
/// clock as `read_at`.
pub fn read_columns<D: Db>(alias: &str) -> String {
    format!(
        "{alias}user_id, {alias}key, {}, {now} AS read_at",
        decoded_columns(alias),
        now = D::NOW
    )
}

/// A key row as [`read_columns`] (or a statement naming the same columns) returned it.
pub fn stored_key_from_row<D: Db>(row: &D::Row) -> Result<StoredKey, StoreError> {
    let fields = Fields::<D>::of(row);
    let fingerprint: Vec<u8> = fields.get("fingerprint")?;
    let state: Label<KeyState> = fields.get("state")?;
    let operation: Label<Operation> = fields.get("operation")?;
    let status_checks: i16 = fields.get("status_checks")?;
    let settlement_due_at: Option<Timestamp> = fields.get("settlement_due_at")?;
    Ok(StoredKey {
        record: StoredRecord {
            fingerprint: Fingerprint::from_slice(&fingerprint)
                .ok_or_else(|| StoreError::Corrupt("fingerprint is not 32 bytes".to_owned()))?,
            state: state.0,
            created_at: fields.time("created_at")?,
            claimed_at: fields.time("claimed_at")?,
            expires_at: fields.time("expires_at")?,
        },
        operation: operation.0,
        movement_id: fields.get("resource_id")?,
        read_at: fields.time("read_at")?,
        status_checks: u16::try_from(status_checks).unwrap_or(0),
        settlement_due_at: settlement_due_at.map(|due| due.0),
        saved: None,
    })
}

/// A key about to be claimed: what the insert writes.
#[derive(Debug, Clone)]
pub struct StartedKey<'a> {
    /// Whose key, and which.
    pub key: KeyRef,
    /// What it protects, and the movement the claim creates.
    pub movement: (Operation, Uuid),
    /// The request's fingerprint.
    pub fingerprint: &'a Fingerprint,
    /// The claim: its lease (`lease_owner`, `lease_until`) and `claim_token`.
    pub claim: Lease,
    /// How long the key is kept from now.
    pub kept_for: std::time::Duration,
}

/// The claim's insert of a `started` key, unless the (user, key) exists; it returns the new
/// row's `resource_id` and `expires_at`, and no row if the key was stored already. Its
/// parameters are `$1` to `$8`, bound by [`bind_started`]; a claim statement that writes more
/// numbers its own parameters from `$9`.
pub fn insert_started<D: Db>() -> String {
    format!(
        "INSERT INTO idempotency_keys (user_id, key, operation, state, fingerprint, resource_id,
                              lease_owner, lease_until, expires_at, claim_token)
VALUES ($1, $2, $3, 'started', $4, $5, $6, {now} + $7, {now} + $8, $6)
ON CONFLICT (user_id, key) DO NOTHING RETURNING resource_id, expires_at",
        now = D::NOW
    )
}

/// Binds [`insert_started`]'s parameters `$1` to `$8` to `query`, the first of its parameters.
pub fn bind_started<'q, D: Db>(
    query: Query<'q, D, D::Arguments<'q>>,
    started: &StartedKey<'_>,
) -> Query<'q, D, D::Arguments<'q>> {
    let (operation, movement_id) = started.movement;
    query
        .arg(Subject::of(&started.key.user))
        .arg(started.key.key)
        .arg(Label(operation))
        .arg(started.fingerprint.as_bytes().to_vec())
        .arg(movement_id)
        .arg(started.claim.owner)
        .arg(Span(started.claim.lasts))
        .arg(Span(started.kept_for))
}
