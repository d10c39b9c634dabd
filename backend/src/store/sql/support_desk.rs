//! The support desk's reads (SPEC §8, the operator console): a customer's payments, refunds
//! and keys, and the queue of keys that need someone: unfinished, unknown and released keys,
//! and late debits. Read-only; the operator's actions go through the reconciler's own writes.

use shared::api::MovementStatus;
use shared::{KeyState, Operation};
use time::OffsetDateTime;
use uuid::Uuid;

use super::events::{self, StoredEvent};
use crate::store::columns::{Label, Timestamp};
use crate::store::db::{Arg, Db, Fields};
use crate::store::error::StoreError;

/// One payment or refund of a customer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomerMovement {
    /// `pay_bill` or `refund_payment`.
    pub operation: Operation,
    /// The payment's or refund's id (the claim's `resource_id`).
    pub id: Uuid,
    /// The bill paid (for a refund, the bill of its payment).
    pub bill_id: String,
    /// The payment (for a refund, the payment it reverses).
    pub payment_id: Uuid,
    /// The amount.
    pub amount_paise: i64,
    /// pending, succeeded, declined or void.
    pub status: MovementStatus,
    /// The reference the bank knows it by.
    pub bank_reference: String,
    /// When it was claimed.
    pub created_at: OffsetDateTime,
}

/// A customer's key as it stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomerKey {
    /// The key's storage UUID.
    pub key: Uuid,
    /// The claim's payment or refund.
    pub resource_id: Uuid,
    /// Its state.
    pub state: KeyState,
    /// When it was first claimed.
    pub created_at: OffsetDateTime,
    /// When it expires, as written on its row at the claim.
    pub expires_at: OffsetDateTime,
}

/// What the console shows of one customer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomerRecord {
    /// Payments and refunds, newest first.
    pub movements: Vec<CustomerMovement>,
    /// The keys still stored.
    pub keys: Vec<CustomerKey>,
    /// The trail, oldest first.
    pub events: Vec<StoredEvent>,
}

/// A key in the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedKey {
    /// The customer.
    pub user_id: i64,
    /// The key's storage UUID.
    pub key: Uuid,
    /// What it claimed.
    pub operation: Operation,
    /// started, unknown or released.
    pub state: KeyState,
    /// The claim's payment or refund.
    pub resource_id: Uuid,
    /// Its bank reference and amount (`None` if the row is missing: a corrupt claim).
    pub bank_reference: Option<String>,
    /// The amount.
    pub amount_paise: Option<i64>,
    /// When it was (last) claimed.
    pub claimed_at: OffsetDateTime,
    /// When the reconciler asks the bank next.
    pub next_lookup_at: Option<OffsetDateTime>,
    /// Failed look-ups so far.
    pub failed_lookups: i16,
    /// The database's clock at the read.
    pub read_at: OffsetDateTime,
}

/// A late debit: money that moved at the bank after its claim had been released.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LateDebit {
    /// The customer.
    pub user_id: i64,
    /// Its `late_debit_found` event.
    pub event: StoredEvent,
    /// The claim's bank reference and amount.
    pub bank_reference: Option<String>,
    /// The amount.
    pub amount_paise: Option<i64>,
}

/// The most events, movements or queued keys one read returns.
pub const READ_LIMIT: i64 = 500;

/// Everything the console shows of `user_id`.
pub async fn customer_record<D: Db>(
    conn: &mut D::Connection,
    user_id: i64,
) -> Result<CustomerRecord, StoreError> {
    let movements_sql = "SELECT 'pay_bill' AS operation, payment_id AS id, bill_id, payment_id, \
                amount_paise, status, bank_reference, created_at \
         FROM payments WHERE user_id = $1 \
         UNION ALL \
         SELECT 'refund_payment' AS operation, r.refund_id AS id, p.bill_id, r.payment_id, \
                r.amount_paise, r.status, r.bank_reference, r.created_at \
         FROM refunds r JOIN payments p ON p.user_id = r.user_id AND p.payment_id = r.payment_id \
         WHERE r.user_id = $1 \
         ORDER BY created_at DESC LIMIT $2";
    let rows = D::fetch_all(
        conn,
        sqlx::query(movements_sql).arg(user_id).arg(READ_LIMIT),
    )
    .await?;
    let movements = rows
        .iter()
        .map(|row| {
            let fields = Fields::<D>::of(row);
            Ok(CustomerMovement {
                operation: operation_named(&fields.get::<String>("operation")?)?,
                id: fields.get("id")?,
                bill_id: fields.get("bill_id")?,
                payment_id: fields.get("payment_id")?,
                amount_paise: fields.get("amount_paise")?,
                status: fields.get::<Label<MovementStatus>>("status")?.0,
                bank_reference: fields.get("bank_reference")?,
                created_at: fields.get::<Timestamp>("created_at")?.0,
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    let keys_sql = "SELECT key, resource_id, state, created_at, expires_at FROM idempotency_keys \
                    WHERE user_id = $1 ORDER BY created_at DESC LIMIT $2";
    let rows = D::fetch_all(conn, sqlx::query(keys_sql).arg(user_id).arg(READ_LIMIT)).await?;
    let keys = rows
        .iter()
        .map(|row| {
            let fields = Fields::<D>::of(row);
            Ok(CustomerKey {
                key: fields.get("key")?,
                resource_id: fields.get("resource_id")?,
                state: fields.get::<Label<KeyState>>("state")?.0,
                created_at: fields.get::<Timestamp>("created_at")?.0,
                expires_at: fields.get::<Timestamp>("expires_at")?.0,
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    let events = events::select_for_user::<D>(conn, user_id, READ_LIMIT * 4).await?;
    Ok(CustomerRecord {
        movements,
        keys,
        events,
    })
}

fn operation_named(name: &str) -> Result<Operation, StoreError> {
    Operation::from_name(name)
        .ok_or_else(|| StoreError::Corrupt(format!("unknown operation {name:?}")))
}

/// The unfinished, unknown and released keys still to be checked, oldest claim first.
pub async fn queued_keys<D: Db>(conn: &mut D::Connection) -> Result<Vec<QueuedKey>, StoreError> {
    let sql = format!(
        "SELECT k.user_id, k.key, k.operation, k.state, k.resource_id, k.claimed_at, \
                k.next_lookup_at, k.failed_lookups, {now} AS read_at, \
                COALESCE(p.bank_reference, r.bank_reference) AS bank_reference, \
                COALESCE(p.amount_paise, r.amount_paise) AS amount_paise \
         FROM idempotency_keys k \
         LEFT JOIN payments p ON k.operation = 'pay_bill' \
              AND p.user_id = k.user_id AND p.payment_id = k.resource_id \
         LEFT JOIN refunds r ON k.operation = 'refund_payment' \
              AND r.user_id = k.user_id AND r.refund_id = k.resource_id \
         WHERE k.state <> 'done' AND NOT (k.state = 'released' AND k.next_lookup_at IS NULL) \
         ORDER BY k.claimed_at LIMIT $1",
        now = D::NOW
    );
    let rows = D::fetch_all(conn, sqlx::query(&sql).arg(READ_LIMIT)).await?;
    rows.iter()
        .map(|row| {
            let fields = Fields::<D>::of(row);
            Ok(QueuedKey {
                user_id: fields.get("user_id")?,
                key: fields.get("key")?,
                operation: fields.get::<Label<Operation>>("operation")?.0,
                state: fields.get::<Label<KeyState>>("state")?.0,
                resource_id: fields.get("resource_id")?,
                bank_reference: fields.get("bank_reference")?,
                amount_paise: fields.get("amount_paise")?,
                claimed_at: fields.get::<Timestamp>("claimed_at")?.0,
                next_lookup_at: fields
                    .get::<Option<Timestamp>>("next_lookup_at")?
                    .map(|at| at.0),
                failed_lookups: fields.get("failed_lookups")?,
                read_at: fields.get::<Timestamp>("read_at")?.0,
            })
        })
        .collect()
}

/// The late debits found, oldest first.
pub async fn late_debits<D: Db>(conn: &mut D::Connection) -> Result<Vec<LateDebit>, StoreError> {
    let sql = "SELECT e.user_id, e.key, e.resource_id, e.at, e.event, e.detail, e.request_id, \
                e.operator, e.reason, e.repeats, \
                COALESCE(p.bank_reference, r.bank_reference) AS bank_reference, \
                COALESCE(p.amount_paise, r.amount_paise) AS amount_paise \
         FROM key_events e \
         LEFT JOIN payments p ON p.user_id = e.user_id AND p.payment_id = e.resource_id \
         LEFT JOIN refunds r ON r.user_id = e.user_id AND r.refund_id = e.resource_id \
         WHERE e.event = 'late_debit_found' ORDER BY e.at LIMIT $1";
    let rows = D::fetch_all(conn, sqlx::query(sql).arg(READ_LIMIT)).await?;
    rows.iter()
        .map(|row| {
            let fields = Fields::<D>::of(row);
            Ok(LateDebit {
                user_id: fields.get("user_id")?,
                event: events::event_from_row::<D>(row)?,
                bank_reference: fields.get("bank_reference")?,
                amount_paise: fields.get("amount_paise")?,
            })
        })
        .collect()
}
