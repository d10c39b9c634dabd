//! [`SqliteStore`]: the store's interface on an embedded SQLite file, composing the per-table
//! statements into the transactions SPEC §5 requires (see the module docs of `store::sqlite`
//! for where and why they differ from PostgreSQL's).

use std::path::Path;
use std::time::Duration;

use shared::{Fingerprint, Operation};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{Sqlite, SqliteConnection, Transaction};
use time::OffsetDateTime;
use uuid::Uuid;

use super::keys::{self, LeasedKey};
use super::timestamps::span_micros;
use super::{RECONCILE_LEASE, payments, refunds};
use crate::store::error::StoreError;
use crate::store::types::{
    ClaimResult, KeyRef, MovementResult, NewPayment, NewRefund, PaymentRow, RefundClaimResult,
    RefundRow, SavedMovement, StoredKey, UnfinishedKey, UnknownCall,
};

/// How long a writer waits for SQLite's write lock before the request gets a 503: far longer
/// than any one of this store's write transactions holds it.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The SQLite store. Cheap to clone (a pool handle).
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
}

/// An unfinished key leased for reconciliation: no other reconciler takes it until this one
/// finishes, releases or postpones it, or [`RECONCILE_LEASE`] runs out (dropping it does not
/// end the lease early, unlike PostgreSQL's row lock).
pub struct SqliteLockedKey {
    pool: SqlitePool,
    /// The lease this holder set; every write checks the key still carries it.
    lease_until: i64,
    /// The key and its pending movement.
    pub unfinished: UnfinishedKey,
}

impl SqliteStore {
    /// Opens (creating it and its directory if missing) the database file at `path`, in WAL
    /// mode with full fsync on commit, and a pool of `max_connections`.
    pub async fn open(
        path: &Path,
        max_connections: u32,
        acquire_timeout: Duration,
    ) -> Result<SqliteStore, StoreError> {
        if let Some(directory) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
            std::fs::create_dir_all(directory).map_err(sqlx::Error::Io)?;
        }
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(BUSY_TIMEOUT)
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(acquire_timeout)
            .connect_with(options)
            .await?;
        Ok(SqliteStore { pool })
    }

    /// The pool, for tests and diagnostics that read the tables directly.
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// Applies the migrations in `migrations/sqlite/` (embedded at build time).
    pub async fn migrate(&self) -> Result<(), sqlx::migrate::MigrateError> {
        sqlx::migrate!("../migrations/sqlite").run(&self.pool).await
    }

    /// Checks the database answers (readiness).
    pub async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    /// Claims a `pay_bill` key and writes its pending payment in one `BEGIN IMMEDIATE`
    /// transaction, committed before the bank is called; or returns the existing key, read
    /// under the same write lock (so, unlike on PostgreSQL, it cannot vanish in between).
    #[tracing::instrument(skip_all, fields(user_id = %key.user, key = %key.key))]
    pub async fn claim_payment(
        &self,
        key: KeyRef,
        fingerprint: &Fingerprint,
        payment: &NewPayment,
    ) -> Result<ClaimResult<PaymentRow>, StoreError> {
        let mut tx = begin_write(&self.pool).await?;
        let inserted = keys::insert_started_key(
            &mut tx,
            key,
            Operation::PayBill,
            fingerprint,
            payment.payment_id,
        )
        .await?;
        if !inserted {
            return Ok(ClaimResult::Existing(existing_key(&mut tx, key).await?));
        }
        let row = payments::insert_pending(&mut tx, key, payment).await?;
        tx.commit().await?;
        Ok(ClaimResult::Claimed(row))
    }

    /// Claims a `refund_payment` key and writes its pending refund in one `BEGIN IMMEDIATE`
    /// transaction: SQLite's write lock serialises it with every other refund, so two refunds
    /// with different keys can never together exceed the payment.
    #[tracing::instrument(skip_all, fields(user_id = %key.user, key = %key.key))]
    pub async fn claim_refund(
        &self,
        key: KeyRef,
        fingerprint: &Fingerprint,
        refund: &NewRefund,
    ) -> Result<RefundClaimResult, StoreError> {
        let mut tx = begin_write(&self.pool).await?;
        let Some((paid, debit_reference)) =
            payments::select_succeeded_for_refund(&mut tx, key.user.as_i64(), refund.payment_id)
                .await?
        else {
            // A retry of a finished refund still replays: look at the key first.
            return Ok(match keys::select_key(&mut tx, key).await? {
                Some(existing) => RefundClaimResult::Existing(existing),
                None => RefundClaimResult::PaymentNotFound,
            });
        };
        let inserted = keys::insert_started_key(
            &mut tx,
            key,
            Operation::RefundPayment,
            fingerprint,
            refund.refund_id,
        )
        .await?;
        if !inserted {
            return Ok(RefundClaimResult::Existing(
                existing_key(&mut tx, key).await?,
            ));
        }
        let remaining_paise =
            paid - refunds::committed_total(&mut tx, key.user.as_i64(), refund.payment_id).await?;
        if refund.amount_paise > remaining_paise {
            // Rolls back the key too: a refused refund saves nothing, so a corrected retry
            // with the same key can go through.
            return Ok(RefundClaimResult::ExceedsRemaining { remaining_paise });
        }
        let row = refunds::insert_pending(&mut tx, key, refund, &debit_reference).await?;
        tx.commit().await?;
        Ok(RefundClaimResult::Claimed(row))
    }

    /// Loads a key of a user.
    pub async fn load_key(&self, key: KeyRef) -> Result<Option<StoredKey>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        keys::select_key(&mut conn, key).await
    }

    /// Loads the payment or refund a key created, to render its saved answer.
    pub async fn load_movement(
        &self,
        key: KeyRef,
        stored: &StoredKey,
    ) -> Result<Option<SavedMovement>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        load_movement(&mut conn, key, stored.operation, stored.resource_id).await
    }

    /// Writes the bank's final word: the movement and the key's `done` state in one
    /// transaction. Returns the movement as stored, or `None` if it no longer exists.
    #[tracing::instrument(skip_all, fields(user_id = %key.user, key = %key.key))]
    pub async fn finish(
        &self,
        key: KeyRef,
        operation: Operation,
        resource_id: Uuid,
        result: &MovementResult,
    ) -> Result<Option<SavedMovement>, StoreError> {
        let mut tx = begin_write(&self.pool).await?;
        let finished = finish_in(&mut tx, key, operation, resource_id, result).await?;
        tx.commit().await?;
        Ok(finished)
    }

    /// Moves a `started` key to `unknown` after a bank call without a readable outcome.
    #[tracing::instrument(skip_all, fields(user_id = %key.user, key = %key.key))]
    pub async fn mark_unknown(
        &self,
        key: KeyRef,
        resource_id: Uuid,
        call: UnknownCall,
    ) -> Result<bool, StoreError> {
        let mut conn = self.pool.acquire().await?;
        let (call_ended, due_in) = (call.ended(), call.look_up_after());
        keys::set_unknown(&mut conn, key, resource_id, call_ended, span_micros(due_in)).await
    }

    /// Claims a released key again for the same request; its pending movement, to call the
    /// bank for under the claim's own reference.
    #[tracing::instrument(skip_all, fields(user_id = %key.user, key = %key.key))]
    pub async fn reclaim_released(
        &self,
        key: KeyRef,
        fingerprint: &Fingerprint,
    ) -> Result<Option<SavedMovement>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        let Some((operation, resource_id)) =
            keys::reclaim_released_key(&mut conn, key, fingerprint).await?
        else {
            return Ok(None);
        };
        load_movement(&mut conn, key, operation, resource_id).await
    }

    /// Deletes a key that the decision found expired, exactly as it was read; `false` if it
    /// changed meanwhile or is a released key with its last check still to come.
    pub async fn release_expired(
        &self,
        key: KeyRef,
        created_at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let mut conn = self.pool.acquire().await?;
        keys::delete_expired_key(&mut conn, key, created_at).await
    }

    /// A user's payment with its refunds; `None` if it is not this user's.
    pub async fn load_payment_with_refunds(
        &self,
        user_id: i64,
        payment_id: Uuid,
    ) -> Result<Option<(PaymentRow, Vec<RefundRow>)>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        let Some(payment) = payments::select(&mut conn, user_id, payment_id).await? else {
            return Ok(None);
        };
        let refunds = refunds::select_for_payment(&mut conn, user_id, payment_id).await?;
        Ok(Some((payment, refunds)))
    }

    /// Leases this unfinished key for reconciliation, if no one else holds it.
    pub async fn lock_unfinished(
        &self,
        key: KeyRef,
    ) -> Result<Option<SqliteLockedKey>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        let Some(leased) =
            keys::lease_unfinished_key(&mut conn, key, span_micros(RECONCILE_LEASE)).await?
        else {
            return Ok(None);
        };
        self.with_movement(&mut conn, leased).await.map(Some)
    }

    /// Leases the oldest key due for a bank look-up, if any.
    pub async fn lock_next_due(
        &self,
        stuck_after: Duration,
    ) -> Result<Option<SqliteLockedKey>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        let Some(leased) = keys::lease_next_due_key(
            &mut conn,
            span_micros(stuck_after),
            span_micros(RECONCILE_LEASE),
        )
        .await?
        else {
            return Ok(None);
        };
        self.with_movement(&mut conn, leased).await.map(Some)
    }

    /// Deletes one batch of finished keys older than `keep_for`; returns how many.
    pub async fn expire_batch(
        &self,
        keep_for: Duration,
        batch_size: i64,
    ) -> Result<u64, StoreError> {
        let mut conn = self.pool.acquire().await?;
        keys::delete_expired_batch(&mut conn, span_micros(keep_for), batch_size).await
    }

    /// The ages of the oldest `started` and `unknown` keys, for the metrics.
    pub async fn oldest_unfinished_ages(&self) -> Result<(Duration, Duration), StoreError> {
        let mut conn = self.pool.acquire().await?;
        let (started, unknown) = keys::oldest_unfinished_ages(&mut conn).await?;
        let age = |micros: i64| Duration::from_micros(u64::try_from(micros).unwrap_or(0));
        Ok((age(started), age(unknown)))
    }

    async fn with_movement(
        &self,
        conn: &mut SqliteConnection,
        leased: LeasedKey,
    ) -> Result<SqliteLockedKey, StoreError> {
        let LeasedKey {
            key,
            stored,
            history,
            lease_until,
        } = leased;
        let Some(movement) = load_movement(conn, key, stored.operation, stored.resource_id).await?
        else {
            return Err(StoreError::Corrupt(format!(
                "key {} has no {} row {}",
                key.key,
                stored.operation.name(),
                stored.resource_id
            )));
        };
        Ok(SqliteLockedKey {
            pool: self.pool.clone(),
            lease_until,
            unfinished: UnfinishedKey {
                key,
                stored,
                movement,
                history,
            },
        })
    }
}

impl SqliteLockedKey {
    /// Writes the bank's true result and ends the lease, in one transaction; nothing if the
    /// lease was lost.
    pub async fn finish(
        self,
        result: &MovementResult,
    ) -> Result<Option<SavedMovement>, StoreError> {
        let UnfinishedKey { key, stored, .. } = &self.unfinished;
        let mut tx = begin_write(&self.pool).await?;
        if !keys::end_lease(&mut tx, *key, self.lease_until).await? {
            return Err(StoreError::LeaseLost);
        }
        let finished =
            finish_in(&mut tx, *key, stored.operation, stored.resource_id, result).await?;
        tx.commit().await?;
        Ok(finished)
    }

    /// The bank never saw the movement: releases the key (kept, with its pending movement) for
    /// the client's retry, with a check for a late debit `check_after` from now, and ends the
    /// lease; nothing if the lease was lost.
    pub async fn release(self, check_after: Duration) -> Result<(), StoreError> {
        let UnfinishedKey { key, stored, .. } = &self.unfinished;
        let mut conn = self.pool.acquire().await?;
        let released = keys::set_released(
            &mut conn,
            *key,
            stored.resource_id,
            self.lease_until,
            span_micros(check_after),
        )
        .await?;
        if !released {
            return Err(StoreError::LeaseLost);
        }
        Ok(())
    }

    /// A released key's last check found nothing at the bank: its movement becomes `void` and
    /// its checks end (so it may expire), in one transaction; nothing if the lease was lost.
    pub async fn void(self) -> Result<(), StoreError> {
        let UnfinishedKey { key, stored, .. } = &self.unfinished;
        let mut tx = begin_write(&self.pool).await?;
        if !keys::end_lease(&mut tx, *key, self.lease_until).await? {
            return Err(StoreError::LeaseLost);
        }
        let user_id = key.user.as_i64();
        match stored.operation {
            Operation::PayBill => payments::set_void(&mut tx, user_id, stored.resource_id).await?,
            Operation::RefundPayment => {
                refunds::set_void(&mut tx, user_id, stored.resource_id).await?
            }
        }
        keys::end_checks(&mut tx, *key, stored.resource_id).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Sets the next look-up `wait` from now and ends the lease; `failed` counts this look-up
    /// towards the back-off. Nothing if the lease was lost.
    pub async fn look_again_in(self, wait: Duration, failed: bool) -> Result<(), StoreError> {
        let mut conn = self.pool.acquire().await?;
        let key = self.unfinished.key;
        let scheduled = keys::schedule_lookup(
            &mut conn,
            key,
            self.lease_until,
            span_micros(wait),
            i16::from(failed),
        )
        .await?;
        if !scheduled {
            return Err(StoreError::LeaseLost);
        }
        Ok(())
    }
}

/// A write transaction that holds SQLite's write lock from its first statement, so it never
/// fails half-way because another writer got in between its read and its write.
async fn begin_write(pool: &SqlitePool) -> Result<Transaction<'static, Sqlite>, StoreError> {
    Ok(pool.begin_with("BEGIN IMMEDIATE").await?)
}

/// The row of a key whose claim conflicted, read under the claim's write lock.
async fn existing_key(conn: &mut SqliteConnection, key: KeyRef) -> Result<StoredKey, StoreError> {
    keys::select_key(conn, key).await?.ok_or_else(|| {
        StoreError::Corrupt("a key that conflicted with the claim is not there".to_owned())
    })
}

async fn load_movement(
    conn: &mut SqliteConnection,
    key: KeyRef,
    operation: Operation,
    resource_id: Uuid,
) -> Result<Option<SavedMovement>, StoreError> {
    let user_id = key.user.as_i64();
    Ok(match operation {
        Operation::PayBill => payments::select(conn, user_id, resource_id)
            .await?
            .map(SavedMovement::Payment),
        Operation::RefundPayment => refunds::select(conn, user_id, resource_id)
            .await?
            .map(SavedMovement::Refund),
    })
}

async fn finish_in(
    conn: &mut SqliteConnection,
    key: KeyRef,
    operation: Operation,
    resource_id: Uuid,
    result: &MovementResult,
) -> Result<Option<SavedMovement>, StoreError> {
    let finished = match operation {
        Operation::PayBill => payments::finish(conn, key.user.as_i64(), resource_id, result)
            .await?
            .map(SavedMovement::Payment),
        Operation::RefundPayment => refunds::finish(conn, key.user.as_i64(), resource_id, result)
            .await?
            .map(SavedMovement::Refund),
    };
    if finished.is_some() {
        keys::set_done(conn, key, resource_id).await?;
    }
    Ok(finished)
}
