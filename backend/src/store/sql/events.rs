//! Statements on `key_events`, the audit trail (`crate::trail`): appending an event in the
//! caller's transaction (so a state change and its event commit together), appending a batch
//! of observations, reading a customer's trail, and expiring old events.
//!
//! Reads go through the view `key_trail`: `key_events` and, on PostgreSQL, a payment's routine
//! events (`claimed`, and the claimant's `bank_answered`) that the claim and the outcome
//! statements keep on the payment's own row (`store::claims`), with ids from the same sequence,
//! so a trail reads and pages by event id wherever its events are kept.

use time::OffsetDateTime;
use uuid::Uuid;

use super::operator_reads::{Page, Paged, TrailOf};
use crate::domain::{EventKind, NewEvent, Observed, TraceId};
use crate::store::columns::Subject;
use crate::store::columns::{Label, Span, Timestamp, TrailRequestId};
use crate::store::db::{Arg, Db, Fields};
use crate::store::error::StoreError;
use shared::UserId;

const COLUMNS: &str = "user_id, key, resource_id, at, event, detail, request_id, operator, reason, \
                       repeats, trace_id, request_id_text";

/// [`COLUMNS`] and the event's id, as a read returns them.
const READ_COLUMNS: &str = "event_id, user_id, key, resource_id, at, event, detail, request_id, \
                            operator, reason, repeats, trace_id, request_id_text";

/// Appends `event`, stamped with the database's clock, in the caller's transaction.
pub async fn append<D: Db>(conn: &mut D::Connection, event: &NewEvent) -> Result<(), StoreError> {
    let sql = format!(
        "INSERT INTO key_events ({COLUMNS}) VALUES ($1, $2, $3, {now}, $4, $5, $6, $7, $8, 1, $9, $10)",
        now = D::NOW
    );
    D::execute(conn, bind_event::<D>(sqlx::query(&sql), event)).await?;
    Ok(())
}

/// Appends an observation with its own time and repeat count; one without a claim is put
/// under the key's claim as it stands.
pub async fn append_observed<D: Db>(
    conn: &mut D::Connection,
    observed: &Observed,
) -> Result<(), StoreError> {
    let sql = format!(
        "INSERT INTO key_events ({COLUMNS}) VALUES ($1, $2, \
             COALESCE($3, (SELECT resource_id FROM idempotency_keys WHERE user_id = $1 AND key = $2)), \
             $11, $4, $5, $6, $7, $8, $12, $9, $10)"
    );
    let query = bind_event::<D>(sqlx::query(&sql), &observed.event)
        .arg(Timestamp(observed.at))
        .arg(i64::from(observed.repeats));
    D::execute(conn, query).await?;
    Ok(())
}

fn bind_event<'q, D: Db>(
    query: sqlx::query::Query<'q, D, <D as sqlx::Database>::Arguments<'q>>,
    event: &NewEvent,
) -> sqlx::query::Query<'q, D, <D as sqlx::Database>::Arguments<'q>> {
    let (operator, reason) = match &event.operator {
        Some(action) => (Some(action.operator.clone()), action.reason.clone()),
        None => (None, None),
    };
    let request_id = TrailRequestId::of(event.request_id.as_deref());
    query
        .arg(Subject::of(&event.user_id))
        .arg(event.key)
        .arg(event.movement_id)
        .arg(Label(event.kind))
        .arg(event.detail.clone())
        .arg(request_id.uuid)
        .arg(operator)
        .arg(reason)
        .arg(event.trace_id.map(|id| id.to_bytes().to_vec()))
        .arg(request_id.text)
}

/// An event as read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEvent {
    /// Its id: the order events were written in (a trail page's cursor).
    pub event_id: i64,
    /// The key's storage UUID, if the event is a key's and kept in `key_events` (a routine
    /// event kept on its movement's row names only its claim).
    pub key: Option<Uuid>,
    /// The claim's payment or refund.
    pub movement_id: Option<Uuid>,
    /// When.
    pub at: OffsetDateTime,
    /// The event's name ([`crate::trail::EventKind::name`]).
    pub event: String,
    /// The few words more.
    pub detail: Option<String>,
    /// The causing request's id.
    pub request_id: Option<String>,
    /// The causing request's trace id (32 hex digits).
    pub trace_id: Option<String>,
    /// Who, for an operator's action.
    pub operator: Option<String>,
    /// Why, for an operator's action.
    pub reason: Option<String>,
    /// How many identical observations the row stands for.
    pub repeats: i64,
}

/// The events of `user_id`'s claims `movement_ids`, oldest first (in the order they were
/// written), at most `limit`.
pub async fn select_of_claims<D: Db>(
    conn: &mut D::Connection,
    user_id: UserId,
    movement_ids: &[Uuid],
    limit: i64,
) -> Result<Vec<StoredEvent>, StoreError> {
    let ids = (3..movement_ids.len() + 3)
        .map(|n| format!("${n}"))
        .collect::<Vec<_>>()
        .join(", ");
    let sql = format!(
        "SELECT {READ_COLUMNS} FROM key_trail WHERE user_id = $1 AND resource_id IN ({ids}) \
         ORDER BY event_id LIMIT $2"
    );
    let mut query = sqlx::query(&sql).arg(Subject::of(&user_id)).arg(limit);
    for id in movement_ids {
        query = query.arg(*id);
    }
    let rows = D::fetch_all(conn, query).await?;
    rows.iter().map(event_from_row::<D>).collect()
}

/// A page of `user_id`'s trail, newest first: every event, or only the customer's own.
pub async fn select_trail<D: Db>(
    conn: &mut D::Connection,
    user_id: UserId,
    of: TrailOf,
    page: Page<i64>,
) -> Result<Paged<StoredEvent, i64>, StoreError> {
    let only_own = match of {
        TrailOf::Everything => "",
        TrailOf::CustomerOnly => "AND resource_id IS NULL",
    };
    let before = match page.from {
        Some(_) => "AND event_id < $3",
        None => "",
    };
    let sql = format!(
        "SELECT {READ_COLUMNS} FROM key_trail WHERE user_id = $1 {only_own} {before} \
         ORDER BY event_id DESC LIMIT $2"
    );
    let mut query = sqlx::query(&sql)
        .arg(Subject::of(&user_id))
        .arg(page.fetch());
    if let Some(before) = page.from {
        query = query.arg(before);
    }
    let rows = D::fetch_all(conn, query).await?;
    let events = rows
        .iter()
        .map(event_from_row::<D>)
        .collect::<Result<Vec<_>, StoreError>>()?;
    Ok(Paged::of(events, page.limit, |event| event.event_id))
}

/// An event read with [`READ_COLUMNS`].
pub fn event_from_row<D: Db>(row: &D::Row) -> Result<StoredEvent, StoreError> {
    let fields = Fields::<D>::of(row);
    Ok(StoredEvent {
        event_id: fields.get("event_id")?,
        key: fields.get("key")?,
        movement_id: fields.get("resource_id")?,
        at: fields.get::<Timestamp>("at")?.0,
        event: fields.get::<Label<EventKind>>("event")?.0.name().to_owned(),
        detail: fields.get("detail")?,
        request_id: TrailRequestId::read(fields.get("request_id")?, fields.get("request_id_text")?),
        trace_id: fields
            .get::<Option<Vec<u8>>>("trace_id")?
            .and_then(|bytes| <[u8; 16]>::try_from(bytes).ok())
            .map(|bytes| TraceId::from_bytes(bytes).to_string()),
        operator: fields.get("operator")?,
        reason: fields.get("reason")?,
        repeats: fields.get("repeats")?,
    })
}

/// Deletes one batch of events older than `keep_for` whose claim's key is gone (expired), at
/// most `batch_size`; returns how many. Customer-level events (no key) age out the same way.
pub async fn delete_expired_batch<D: Db>(
    conn: &mut D::Connection,
    keep_for: std::time::Duration,
    batch_size: i64,
) -> Result<u64, StoreError> {
    let sql = format!(
        "DELETE FROM key_events WHERE (user_id, event_id) IN ( \
             SELECT e.user_id, e.event_id FROM key_events e \
             WHERE e.at < {now} - $1 \
               AND NOT EXISTS (SELECT 1 FROM idempotency_keys k \
                               WHERE k.user_id = e.user_id AND k.key = e.key \
                                 AND k.resource_id = e.resource_id) \
             ORDER BY e.at LIMIT $2)",
        now = D::NOW
    );
    let query = sqlx::query(&sql).arg(Span(keep_for)).arg(batch_size);
    Ok(D::execute(conn, query).await?)
}
