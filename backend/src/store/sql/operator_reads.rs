//! The operator API's reads (SPEC §8): a customer's payments, refunds
//! and keys, and the queue of keys that need someone: unfinished, unknown and released keys,
//! and late debits. Read-only; the operator's actions go through the reconciler's own writes.
//!
//! Every list is read a page at a time with a cursor ([`Page`], [`Paged`]), keyset-paged on the
//! order it is shown in, so no list ever stops at a fixed count: an operator (or the ledger
//! check) can reach every row, and a row is never shown twice or skipped while others are
//! added.

use shared::api::MovementStatus;
use shared::{KeyState, Operation};
use time::OffsetDateTime;
use uuid::Uuid;

use super::events::{self, StoredEvent};
use crate::store::columns::Subject;
use crate::store::columns::{Label, Timestamp};
use crate::store::db::{Arg, Db, Fields};
use crate::store::error::StoreError;
use shared::UserId;

/// One payment or refund of a customer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomerMovement {
    /// `pay_bill` or `refund_payment`.
    pub operation: Operation,
    /// The payment's or refund's id (the movement the claim made).
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
    pub movement_id: Uuid,
    /// Its state.
    pub state: KeyState,
    /// When it was first claimed.
    pub created_at: OffsetDateTime,
    /// When it expires, as written on its row at the claim.
    pub expires_at: OffsetDateTime,
}

/// A key in the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedKey {
    /// The customer.
    pub user_id: UserId,
    /// The key's storage UUID.
    pub key: Uuid,
    /// What it claimed.
    pub operation: Operation,
    /// started, unknown or released.
    pub state: KeyState,
    /// The claim's payment or refund.
    pub movement_id: Uuid,
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
    /// Status checks sent for its movement so far (of the policy's `status_checks.at_most`).
    pub status_checks: i16,
    /// When the bank's settlement file is due, for a key whose checks ran out undecided.
    pub settlement_due_at: Option<OffsetDateTime>,
    /// The database's clock at the read.
    pub read_at: OffsetDateTime,
}

/// A late debit: money that moved at the bank after its claim had been released.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LateDebit {
    /// The customer.
    pub user_id: UserId,
    /// Its `late_debit_found` event.
    pub event: StoredEvent,
    /// The claim's bank reference and amount.
    pub bank_reference: Option<String>,
    /// The amount.
    pub amount_paise: Option<i64>,
}

/// A page to read: from after `from` (the last item of the page before; `None` for the first
/// page), at most `limit` items. Each read fetches one item more than it returns, so the caller
/// knows whether another page follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page<C> {
    /// Where the previous page ended.
    pub from: Option<C>,
    /// How many items at most.
    pub limit: usize,
}

impl<C> Page<C> {
    /// The `LIMIT` to fetch: one more than the page holds.
    pub(super) fn fetch(&self) -> i64 {
        i64::try_from(self.limit).unwrap_or(i64::MAX - 1) + 1
    }
}

/// Items of a page, and where the next page starts if there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paged<T, C> {
    /// The page's items.
    pub items: Vec<T>,
    /// The cursor of the next page, if more follow.
    pub next: Option<C>,
}

impl<T, C> Paged<T, C> {
    /// `fetched` (up to one more than `limit`) as a page, its cursor taken from the last item
    /// kept by `cursor_of`.
    pub(super) fn of(
        mut fetched: Vec<T>,
        limit: usize,
        cursor_of: impl Fn(&T) -> C,
    ) -> Paged<T, C> {
        let more = fetched.len() > limit;
        fetched.truncate(limit);
        let next = if more {
            fetched.last().map(cursor_of)
        } else {
            None
        };
        Paged {
            items: fetched,
            next,
        }
    }
}

/// Where a page of a customer's movements (newest first) ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MovementCursor {
    /// The last movement's claim time.
    pub created_at: OffsetDateTime,
    /// Its id (ties broken by it).
    pub id: Uuid,
}

/// Where a page of the queue (oldest claim first) ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueCursor {
    /// The last key's claim time.
    pub claimed_at: OffsetDateTime,
    /// Its customer.
    pub user_id: UserId,
    /// The key.
    pub key: Uuid,
}

/// Which of a customer's events a trail read returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrailOf {
    /// Every event.
    Everything,
    /// The customer's own events (operators' ledger checks and reads), no claim's.
    CustomerOnly,
}

/// The most events of one page of claims a customer view shows; past it the page says its
/// trail is not complete (the customer's trail pages through every event).
pub const CLAIM_EVENTS_LIMIT: i64 = 5_000;

/// A page of `user_id`'s payments and refunds, newest first.
pub async fn customer_movements<D: Db>(
    conn: &mut D::Connection,
    user_id: UserId,
    page: Page<MovementCursor>,
) -> Result<Paged<CustomerMovement, MovementCursor>, StoreError> {
    let after = match page.from {
        Some(_) => "WHERE m.created_at < $3 OR (m.created_at = $3 AND m.id < $4)",
        None => "",
    };
    let sql = format!(
        "SELECT * FROM ( \
             SELECT 'pay_bill' AS operation, payment_id AS id, bill_id, payment_id, \
                    amount_paise, status, bank_reference, created_at \
             FROM payments WHERE user_id = $1 \
             UNION ALL \
             SELECT 'refund_payment' AS operation, r.refund_id AS id, p.bill_id, r.payment_id, \
                    r.amount_paise, r.status, r.bank_reference, r.created_at \
             FROM refunds r JOIN payments p \
               ON p.user_id = r.user_id AND p.payment_id = r.payment_id \
             WHERE r.user_id = $1) m \
         {after} ORDER BY m.created_at DESC, m.id DESC LIMIT $2"
    );
    let mut query = sqlx::query(&sql)
        .arg(Subject::of(&user_id))
        .arg(page.fetch());
    if let Some(from) = page.from {
        query = query.arg(Timestamp(from.created_at)).arg(from.id);
    }
    let rows = D::fetch_all(conn, query).await?;
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
    Ok(Paged::of(movements, page.limit, |movement| {
        MovementCursor {
            created_at: movement.created_at,
            id: movement.id,
        }
    }))
}

/// `$2, $3, …` for `count` values bound after `$1`.
fn placeholders_after_the_first(count: usize) -> String {
    (2..count + 2)
        .map(|n| format!("${n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The keys of `user_id`'s claims `movement_ids` (those still stored), and those claims' trail,
/// oldest first, at most [`CLAIM_EVENTS_LIMIT`] events.
pub async fn customer_claims<D: Db>(
    conn: &mut D::Connection,
    user_id: UserId,
    movement_ids: &[Uuid],
) -> Result<(Vec<CustomerKey>, Vec<StoredEvent>), StoreError> {
    if movement_ids.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let ids = placeholders_after_the_first(movement_ids.len());
    let keys_sql = format!(
        "SELECT key, resource_id, state, created_at, expires_at FROM idempotency_keys \
         WHERE user_id = $1 AND resource_id IN ({ids})"
    );
    let mut query = sqlx::query(&keys_sql).arg(Subject::of(&user_id));
    for id in movement_ids {
        query = query.arg(*id);
    }
    let rows = D::fetch_all(conn, query).await?;
    let keys = rows
        .iter()
        .map(|row| {
            let fields = Fields::<D>::of(row);
            Ok(CustomerKey {
                key: fields.get("key")?,
                movement_id: fields.get("resource_id")?,
                state: fields.get::<Label<KeyState>>("state")?.0,
                created_at: fields.get::<Timestamp>("created_at")?.0,
                expires_at: fields.get::<Timestamp>("expires_at")?.0,
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    let events =
        events::select_of_claims::<D>(conn, user_id, movement_ids, CLAIM_EVENTS_LIMIT).await?;
    Ok((keys, events))
}

fn operation_named(name: &str) -> Result<Operation, StoreError> {
    Operation::from_name(name)
        .ok_or_else(|| StoreError::Corrupt(format!("unknown operation {name:?}")))
}

/// A page of the unfinished, unknown and released keys still to be checked, oldest claim first.
pub async fn queued_keys<D: Db>(
    conn: &mut D::Connection,
    page: Page<QueueCursor>,
) -> Result<Paged<QueuedKey, QueueCursor>, StoreError> {
    let after = match page.from {
        Some(_) => {
            "AND (k.claimed_at > $2 OR (k.claimed_at = $2 AND (k.user_id > $3 \
                  OR (k.user_id = $3 AND k.key > $4))))"
        }
        None => "",
    };
    let sql = format!(
        "SELECT k.user_id, k.key, k.operation, k.state, k.resource_id, k.claimed_at, \
                k.next_lookup_at, k.failed_lookups, k.status_checks, k.settlement_due_at, \
                {now} AS read_at, \
                COALESCE(p.bank_reference, r.bank_reference) AS bank_reference, \
                COALESCE(p.amount_paise, r.amount_paise) AS amount_paise \
         FROM idempotency_keys k \
         LEFT JOIN payments p ON k.operation = 'pay_bill' \
              AND p.user_id = k.user_id AND p.payment_id = k.resource_id \
         LEFT JOIN refunds r ON k.operation = 'refund_payment' \
              AND r.user_id = k.user_id AND r.refund_id = k.resource_id \
         WHERE k.state <> 'done' AND NOT (k.state = 'released' AND k.next_lookup_at IS NULL) \
           {after} \
         ORDER BY k.claimed_at, k.user_id, k.key LIMIT $1",
        now = D::NOW
    );
    let mut query = sqlx::query(&sql).arg(page.fetch());
    if let Some(from) = page.from {
        query = query
            .arg(Timestamp(from.claimed_at))
            .arg(Subject(from.user_id))
            .arg(from.key);
    }
    let rows = D::fetch_all(conn, query).await?;
    let keys = rows
        .iter()
        .map(|row| {
            let fields = Fields::<D>::of(row);
            Ok(QueuedKey {
                user_id: fields.get::<Subject>("user_id")?.0,
                key: fields.get("key")?,
                operation: fields.get::<Label<Operation>>("operation")?.0,
                state: fields.get::<Label<KeyState>>("state")?.0,
                movement_id: fields.get("resource_id")?,
                bank_reference: fields.get("bank_reference")?,
                amount_paise: fields.get("amount_paise")?,
                claimed_at: fields.get::<Timestamp>("claimed_at")?.0,
                next_lookup_at: fields
                    .get::<Option<Timestamp>>("next_lookup_at")?
                    .map(|at| at.0),
                failed_lookups: fields.get("failed_lookups")?,
                status_checks: fields.get("status_checks")?,
                settlement_due_at: fields
                    .get::<Option<Timestamp>>("settlement_due_at")?
                    .map(|at| at.0),
                read_at: fields.get::<Timestamp>("read_at")?.0,
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    Ok(Paged::of(keys, page.limit, |queued| QueueCursor {
        claimed_at: queued.claimed_at,
        user_id: queued.user_id.clone(),
        key: queued.key,
    }))
}

/// A page of the late debits found, newest first (a new one is always on the first page).
pub async fn late_debits<D: Db>(
    conn: &mut D::Connection,
    page: Page<i64>,
) -> Result<Paged<LateDebit, i64>, StoreError> {
    let before = match page.from {
        Some(_) => "AND e.event_id < $2",
        None => "",
    };
    let sql = format!(
        "SELECT e.event_id, e.user_id, e.key, e.resource_id, e.at, e.event, e.detail, \
                e.request_id, e.operator, e.reason, e.repeats, e.trace_id, e.request_id_text, \
                COALESCE(p.bank_reference, r.bank_reference) AS bank_reference, \
                COALESCE(p.amount_paise, r.amount_paise) AS amount_paise \
         FROM key_events e \
         LEFT JOIN payments p ON p.user_id = e.user_id AND p.payment_id = e.resource_id \
         LEFT JOIN refunds r ON r.user_id = e.user_id AND r.refund_id = e.resource_id \
         WHERE e.event = 'late_debit_found' {before} \
         ORDER BY e.event_id DESC LIMIT $1"
    );
    let mut query = sqlx::query(&sql).arg(page.fetch());
    if let Some(before) = page.from {
        query = query.arg(before);
    }
    let rows = D::fetch_all(conn, query).await?;
    let late = rows
        .iter()
        .map(|row| {
            let fields = Fields::<D>::of(row);
            Ok(LateDebit {
                user_id: fields.get::<Subject>("user_id")?.0,
                event: events::event_from_row::<D>(row)?,
                bank_reference: fields.get("bank_reference")?,
                amount_paise: fields.get("amount_paise")?,
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    Ok(Paged::of(late, page.limit, |late| late.event.event_id))
}
