//! The store's interface, cut by caller: each trait is the few methods one part of the backend
//! uses, so a reader of that part sees only what it may do, and a change to one slice touches
//! only its callers. [`Store`] is all of them, as [`connect`] opens it; the application state
//! hands each part its slice (`AppState::claims()`, `leases()`, …).
//!
//! | slice | caller |
//! |---|---|
//! | [`Claims`] | the payment flows (`crate::flows`) and the key status |
//! | [`Leases`] | reconciliation, and whoever asks the bank at once (flows, operator) |
//! | [`Expiry`] | the janitor |
//! | [`TrailWrites`] | the audit trail's writer, operators' customer-level events |
//! | [`OperatorReads`] | the operator API |
//! | [`Health`] | start-up, readiness, metrics |
//!
//! Every write that records an audit-trail event takes the [`Cause`] it is recorded against.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use async_trait::async_trait;
use bank_api::settlement::SettlementRow;
use shared::{Fingerprint, Operation};
use time::OffsetDateTime;
use uuid::Uuid;

use super::error::StoreError;
use super::key_changes::{KeyChanges, listen_for_changes};
use super::sql::events::StoredEvent;
use super::sql::operator_reads::{
    CustomerKey, CustomerMovement, LateDebit, MovementCursor, Page, Paged, QueueCursor, QueuedKey,
    TrailOf,
};
use super::sql_store::SqlStore;
use super::types::{
    CheckSlot, ClaimResult, ClaimToken, FinalOutcome, Finished, KeyRef, LeasedKey, NewPayment,
    NewRefund, PaymentRow, RefundRow, ReplicationState, SavedMovement, Settlement, StoredKey,
    UnfinishedKeys,
};
use crate::domain::{Cause, NewEvent, Observed};
use shared::UserId;

/// The store behind the application: cheap to clone, shared by every request and worker.
pub type SharedStore = Arc<dyn Store>;

/// Every slice at once: what [`connect`] opens. Implemented once, by `SqlStore<D>` for
/// PostgreSQL and SQLite alike.
pub trait Store: Claims + Leases + Expiry + TrailWrites + OperatorReads + Health {}

impl<T: Claims + Leases + Expiry + TrailWrites + OperatorReads + Health> Store for T {}

/// What the payment flows use (`crate::flows`): claim a key with its pending payment or refund, read it, write the bank's word, mark it unknown, release it or claim it again, and hear when it changes.
#[async_trait]
pub trait Claims: Send + Sync {
    /// The announcements of keys leaving `started`, for requests that wait on one.
    fn key_changes(&self) -> &Arc<KeyChanges>;

    /// Marks `key` as one a request waits on: the other processes hear when it leaves
    /// `started` only if it is marked. Read the key again after marking, before waiting: a
    /// change committed before the mark was not announced.
    async fn mark_awaited(&self, key: KeyRef) -> Result<(), StoreError>;

    /// Claims a `pay_bill` key as the claim `claim` and writes its pending payment, committed
    /// before the bank is called; or returns the existing key.
    async fn claim_payment(
        &self,
        key: KeyRef,
        fingerprint: &Fingerprint,
        payment: &NewPayment,
        claim: ClaimToken,
        cause: &Cause,
    ) -> Result<ClaimResult, StoreError>;

    /// Claims a `refund_payment` key as the claim `claim` and writes its pending refund,
    /// checking the remaining amount one refund of the payment at a time; or says why not.
    async fn claim_refund(
        &self,
        key: KeyRef,
        fingerprint: &Fingerprint,
        refund: &NewRefund,
        claim: ClaimToken,
        cause: &Cause,
    ) -> Result<ClaimResult, StoreError>;

    /// Loads a key of a user (with its payment or refund, when finished).
    async fn load_key(&self, key: KeyRef) -> Result<Option<StoredKey>, StoreError>;

    /// The payment or refund a key created.
    async fn load_movement(
        &self,
        key: KeyRef,
        operation: Operation,
        movement_id: Uuid,
    ) -> Result<Option<SavedMovement>, StoreError>;

    /// The payment or refund behind a finished key, to render its saved reply: the one read
    /// with the key when there is one, else loaded. A finished key without it is corrupt.
    async fn saved_movement(
        &self,
        key: KeyRef,
        stored: &StoredKey,
    ) -> Result<SavedMovement, StoreError> {
        if let Some(saved) = &stored.saved {
            return Ok((**saved).clone());
        }
        self.load_movement(key, stored.operation, stored.movement_id)
            .await?
            .ok_or_else(|| {
                StoreError::Corrupt(format!(
                    "finished key's movement {} is gone",
                    stored.movement_id
                ))
            })
    }

    /// Writes the bank's final word: the movement and the key's `done` state at once. `None`
    /// if the movement does not exist.
    async fn finish(
        &self,
        key: KeyRef,
        operation: Operation,
        movement_id: Uuid,
        result: &FinalOutcome,
        cause: &Cause,
    ) -> Result<Option<Finished>, StoreError>;

    /// Moves a `started` key to `unknown` after the bank call of `claim` got no final reply,
    /// due for its first status check `first_check_in` from now; `false` if the key is no longer
    /// that claim's (a reconciler took it, or it was released and claimed again).
    async fn mark_unknown(
        &self,
        key: KeyRef,
        (movement_id, claim): (Uuid, ClaimToken),
        first_check_in: Duration,
        cause: &Cause,
    ) -> Result<bool, StoreError>;

    /// Releases a `started` key whose bank call `claim` never sent (no call could be had, or
    /// the claim's reply was lost): the retry claims it again; its first check for a late
    /// debit comes `stuck_after` from now, as for any release. Only while the key is still that
    /// claim's, and younger than `stuck_after` by its row's `claimed_at` on the database's clock
    /// (after that, reconciliation decides): never by this process's clock.
    async fn release_unsent(
        &self,
        key: KeyRef,
        (movement_id, claim): (Uuid, ClaimToken),
        stuck_after: Duration,
        cause: &Cause,
    ) -> Result<(), StoreError>;

    /// Claims a released key again for the request with `fingerprint`, and returns its pending
    /// payment or refund to call the bank for under the claim's own reference; `None` if the key
    /// is not released (any more), was released for another request, or is being checked.
    async fn reclaim_released(
        &self,
        key: KeyRef,
        fingerprint: &Fingerprint,
        claim: ClaimToken,
        cause: &Cause,
    ) -> Result<Option<SavedMovement>, StoreError>;

    /// Renews the lease of `claim` on its key, while the claim's bank call runs; `false` if the
    /// key moved on (or a reconciler took it after the lease lapsed).
    async fn renew_claim(&self, key: KeyRef, claim: ClaimToken) -> Result<bool, StoreError>;

    /// Deletes a key that the decision found expired, exactly as it was read; `false` if it
    /// changed meanwhile, or is released with its last check for a late debit still to come.
    async fn delete_expired(
        &self,
        key: KeyRef,
        created_at: OffsetDateTime,
    ) -> Result<bool, StoreError>;

    /// A user's payment with its refunds; `None` if it is not this user's.
    async fn load_payment_with_refunds(
        &self,
        user_id: UserId,
        payment_id: Uuid,
    ) -> Result<Option<(PaymentRow, Vec<RefundRow>)>, StoreError>;
}

/// What reconciliation uses (`crate::reconcile`, and the flows and the operator API when they ask the bank at once): take a key under a lease, write the bank's true result or release, void or postpone it, each only while the lease holds.
#[async_trait]
pub trait Leases: Send + Sync {
    /// Takes this unfinished (or released) key for a bank look-up, if nobody holds it. When an
    /// operator asks (`asked_by`, a [`Cause`] naming them), their `operator_lookup` event is
    /// written in the lease's own transaction: no lease without its record, no record without
    /// the lease.
    async fn lease_key(
        &self,
        key: KeyRef,
        asked_by: Option<&Cause>,
    ) -> Result<Option<LeasedKey>, StoreError>;

    /// Takes the oldest keys due for a bank look-up, at most `limit`, oldest first: each leased
    /// key, or why it could not be read (a corrupt row, its key named where it can be), which
    /// the caller logs and skips. A corrupt key stays leased until its lease runs out, so it
    /// never blocks the others and comes back no more than once a lease.
    async fn lease_due(
        &self,
        stuck_after: Duration,
        limit: usize,
    ) -> Result<Vec<Result<LeasedKey, StoreError>>, StoreError>;

    /// Writes the bank's true result for a leased key (movement and key, in one transaction)
    /// and gives the lease back; [`StoreError::LeaseLost`] if the lease ran out and another
    /// reconciler took the key meanwhile.
    async fn finish_leased(
        &self,
        leased: LeasedKey,
        result: &FinalOutcome,
        cause: &Cause,
    ) -> Result<Option<SavedMovement>, StoreError>;

    /// The bank never saw the leased key's movement: releases the key, keeping it and its
    /// pending movement, so the client's retry claims it again under the same reference; the
    /// first check for a late debit comes `check_after` from now.
    async fn release_leased(
        &self,
        leased: LeasedKey,
        check_after: Duration,
        cause: &Cause,
    ) -> Result<(), StoreError>;

    /// A released key's last check found nothing at the bank: its movement becomes `void` (no
    /// money moved; it no longer counts against a payment's refundable rest) and the key may
    /// expire.
    async fn void_leased(&self, leased: LeasedKey, cause: &Cause) -> Result<(), StoreError>;

    /// Gives the lease back with the next look-up `wait` from now; `failed` counts this
    /// look-up towards the back-off (a failed look-up, as opposed to a scheduled check).
    async fn look_again(
        &self,
        leased: LeasedKey,
        wait: Duration,
        failed: bool,
        cause: &Cause,
    ) -> Result<(), StoreError>;

    /// Counts a status check of the leased key and takes its slot of the deployment's pace
    /// (`spacing` apart, queued at most `queue_at_most` ahead), in one transaction, before the
    /// check is sent; `None` if the key has had `at_most` checks or the lease was lost.
    async fn take_status_check(
        &self,
        leased: &LeasedKey,
        at_most: u16,
        (spacing, queue_at_most): (Duration, Duration),
    ) -> Result<Option<CheckSlot>, StoreError>;

    /// The leased key's checks ran out with no final reply: it waits for the bank's settlement
    /// file, due `due_in` from now (a key that waits already keeps its time), and no reconciler
    /// takes it again. When the file is due.
    async fn await_settlement(
        &self,
        leased: LeasedKey,
        due_in: Duration,
        cause: &Cause,
    ) -> Result<OffsetDateTime, StoreError>;

    /// Applies a batch of the bank's settlement file's lines in one transaction, saying what
    /// each did: an undecided movement of ours with a line's reference and amount gets the
    /// bank's word (and its key `done`); a line that disagrees with ours is recorded on the
    /// key's trail and never applied. Applying the same lines twice changes nothing.
    async fn settle(
        &self,
        batch: &[SettlementRow],
        cause: &Cause,
    ) -> Result<Vec<Settlement>, StoreError>;

    /// The ages of the oldest `started` and `unknown` keys (those awaiting settlement aside)
    /// and how many await settlement, for the metrics.
    async fn unfinished_keys(&self) -> Result<UnfinishedKeys, StoreError>;
}

/// What the janitor uses (`crate::janitor`): delete expired keys and the trail kept past them, one bounded batch at a time.
#[async_trait]
pub trait Expiry: Send + Sync {
    /// Deletes one bounded batch of keys past the expiry on their rows; returns how many.
    async fn expire_batch(&self, batch_size: i64) -> Result<u64, StoreError>;

    /// Deletes one bounded batch of trail events older than `keep_for` whose key is gone;
    /// returns how many.
    async fn expire_events_batch(
        &self,
        keep_for: Duration,
        batch_size: i64,
    ) -> Result<u64, StoreError>;
}

/// What the audit trail's writer uses (`crate::trail`), and an operator's customer-level event.
#[async_trait]
pub trait TrailWrites: Send + Sync {
    /// Appends one event (an operator's action) on its own.
    async fn append_event(&self, event: &NewEvent) -> Result<(), StoreError>;

    /// Appends the trail's observations (`crate::trail::Appender`'s batch), in one transaction.
    async fn append_events(&self, observed: &[Observed]) -> Result<(), StoreError>;
}

/// What the operator API reads (`crate::http::operator`), a page at a time.
#[async_trait]
pub trait OperatorReads: Send + Sync {
    /// A page of a customer's payments and refunds, newest first.
    async fn customer_movements(
        &self,
        user_id: UserId,
        page: Page<MovementCursor>,
    ) -> Result<Paged<CustomerMovement, MovementCursor>, StoreError>;

    /// The keys (those still stored) and the trail of a customer's claims `movement_ids`.
    async fn customer_claims(
        &self,
        user_id: UserId,
        movement_ids: &[Uuid],
    ) -> Result<(Vec<CustomerKey>, Vec<StoredEvent>), StoreError>;

    /// A page of a customer's trail, newest first.
    async fn customer_trail(
        &self,
        user_id: UserId,
        of: TrailOf,
        page: Page<i64>,
    ) -> Result<Paged<StoredEvent, i64>, StoreError>;

    /// A page of the keys that need someone (unfinished, unknown, released), oldest claim first.
    async fn queued_keys(
        &self,
        page: Page<QueueCursor>,
    ) -> Result<Paged<QueuedKey, QueueCursor>, StoreError>;

    /// A page of the late debits found, newest first.
    async fn late_debits(&self, page: Page<i64>) -> Result<Paged<LateDebit, i64>, StoreError>;
}

/// What start-up, readiness and the metrics use.
#[async_trait]
pub trait Health: Send + Sync {
    /// Applies this database's migrations.
    async fn migrate(&self) -> Result<(), sqlx::migrate::MigrateError>;

    /// The versions of this database's migrations not applied yet.
    async fn unapplied_migrations(&self) -> Result<Vec<i64>, sqlx::migrate::MigrateError>;

    /// Checks the database replies and this process can write claims and outcomes to it
    /// (readiness).
    async fn ping(&self) -> Result<(), StoreError>;

    /// How many times the writer of claims and outcomes had to be started again (SQLite's
    /// group commit; always 0 on PostgreSQL).
    fn writer_restarts(&self) -> u64;

    /// What the database says of its replication (`None`: it has none, as SQLite).
    async fn replication(&self) -> Result<Option<ReplicationState>, StoreError>;

    /// The connection pool's use now.
    fn connections(&self) -> PoolUse;
}

/// The connection pool's use at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolUse {
    /// Connections lent out.
    pub in_use: u32,
    /// Connections open and waiting.
    pub idle: u32,
    /// The most the pool opens.
    pub max: u32,
}

/// Connects to the database `database_url` names: `postgres://…` (or `postgresql://…`), or
/// `sqlite://PATH` for a SQLite file, created with its directory if missing.
/// `acquire_timeout` bounds how long a request waits for a connection, so it gets a prompt 503
/// instead of hanging. On PostgreSQL a task listens for other replicas' key changes from now on.
pub async fn connect(
    database_url: &str,
    max_connections: u32,
    acquire_timeout: Duration,
) -> anyhow::Result<SharedStore> {
    if let Some(path) = database_url.strip_prefix("sqlite://") {
        let pool = super::sqlite::open(Path::new(path), max_connections, acquire_timeout)
            .await
            .with_context(|| format!("opening the SQLite database {path}"))?;
        return Ok(Arc::new(SqlStore::new(pool, Arc::default())));
    }
    if !(database_url.starts_with("postgres://") || database_url.starts_with("postgresql://")) {
        bail!("DATABASE_URL must start with postgres:// or sqlite://");
    }
    let options = database_url
        .parse()
        .context("DATABASE_URL is not a PostgreSQL URL")?;
    let pool = super::postgres::connect(options, max_connections, acquire_timeout)
        .await
        .context("connecting to PostgreSQL")?;
    let changes = Arc::<KeyChanges>::default();
    tokio::spawn(listen_for_changes(pool.clone(), Arc::clone(&changes)));
    Ok(Arc::new(SqlStore::new(pool, changes)))
}
