//! [`PgStore`]: the store's public interface on PostgreSQL, composing the per-table statements
//! into the transactions SPEC §5 requires.
//!
//! - The claim commits on its own before the bank is called (invariant 2): for a payment it is
//!   one statement; for a refund one short transaction that also locks the payment to check
//!   the remaining amount. No transaction is ever open across a debit or refund call.
//! - The movement's outcome and the key's `done` state are written in one transaction
//!   (invariant 4).
//! - Reconciliation takes a key with `FOR UPDATE SKIP LOCKED` and holds that lock only across a
//!   status look-up, so replicas never reconcile the same key twice.

use std::time::Duration;

use shared::{Fingerprint, Operation};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgConnection, PgPool, Postgres, Transaction};
use time::OffsetDateTime;
use uuid::Uuid;

use super::{keys, payments, refunds};
use crate::store::error::StoreError;
use crate::store::types::{
    ClaimResult, KeyRef, LookupHistory, MovementResult, NewPayment, NewRefund, PaymentRow,
    RefundClaimResult, RefundRow, SavedMovement, StoredKey, UnfinishedKey, UnknownCall,
};

/// How many times a claim is retried when its key disappears between the insert and the read
/// (expired and deleted in that instant). Two suffice; more would mean a bug.
const CLAIM_ATTEMPTS: usize = 3;

/// The PostgreSQL store. Cheap to clone (a pool handle).
#[derive(Debug, Clone)]
pub struct PgStore {
    pool: PgPool,
}

/// An unfinished key locked for reconciliation. The lock is a row lock in an open transaction:
/// finish, release or postpone it; dropping it rolls back and frees the key for another try.
pub struct PgLockedKey {
    tx: Transaction<'static, Postgres>,
    /// The key and its pending movement.
    pub unfinished: UnfinishedKey,
}

impl PgStore {
    /// Connects a pool. `acquire_timeout` bounds how long a request waits for a connection when
    /// the database is away, so it gets a prompt 503 instead of hanging.
    pub async fn connect(
        options: PgConnectOptions,
        max_connections: u32,
        acquire_timeout: Duration,
    ) -> Result<PgStore, StoreError> {
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(acquire_timeout)
            .connect_with(options)
            .await?;
        Ok(PgStore { pool })
    }

    /// Wraps an existing pool (tests).
    pub fn from_pool(pool: PgPool) -> PgStore {
        PgStore { pool }
    }

    /// The pool, for tests and diagnostics that read the tables directly.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Applies the migrations in `migrations/` (embedded at build time).
    pub async fn migrate(&self) -> Result<(), sqlx::migrate::MigrateError> {
        sqlx::migrate!("../migrations").run(&self.pool).await
    }

    /// Checks the database answers (readiness).
    pub async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    /// Claims a `pay_bill` key and writes its pending payment, or returns the existing key.
    #[tracing::instrument(skip_all, fields(user_id = %key.user, key = %key.key))]
    pub async fn claim_payment(
        &self,
        key: KeyRef,
        fingerprint: &Fingerprint,
        payment: &NewPayment,
    ) -> Result<ClaimResult<PaymentRow>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        for _ in 0..CLAIM_ATTEMPTS {
            let claimed =
                payments::claim_key_with_pending_payment(&mut conn, key, fingerprint, payment)
                    .await?;
            if let Some(row) = claimed {
                return Ok(ClaimResult::Claimed(row));
            }
            if let Some(existing) = keys::select_key(&mut conn, key).await? {
                return Ok(ClaimResult::Existing(existing));
            }
        }
        Err(StoreError::Corrupt(
            "the key vanished during every claim".to_owned(),
        ))
    }

    /// Claims a `refund_payment` key and writes its pending refund, in one short transaction
    /// that locks the payment: the remaining amount is checked under that lock, so two refunds
    /// with different keys can never together exceed the payment.
    #[tracing::instrument(skip_all, fields(user_id = %key.user, key = %key.key))]
    pub async fn claim_refund(
        &self,
        key: KeyRef,
        fingerprint: &Fingerprint,
        refund: &NewRefund,
    ) -> Result<RefundClaimResult, StoreError> {
        for _ in 0..CLAIM_ATTEMPTS {
            let mut tx = self.pool.begin().await?;
            let Some((paid, debit_reference)) =
                payments::lock_succeeded_for_refund(&mut tx, key.user.as_i64(), refund.payment_id)
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
                drop(tx);
                match self.load_key(key).await? {
                    Some(existing) => return Ok(RefundClaimResult::Existing(existing)),
                    None => continue,
                }
            }
            let remaining_paise = paid
                - refunds::committed_total(&mut tx, key.user.as_i64(), refund.payment_id).await?;
            if refund.amount_paise > remaining_paise {
                // Rolls back the key too: a refused refund saves nothing, so a corrected
                // retry with the same key can go through.
                return Ok(RefundClaimResult::ExceedsRemaining { remaining_paise });
            }
            let row = refunds::insert_pending(&mut tx, key, refund, &debit_reference).await?;
            tx.commit().await?;
            return Ok(RefundClaimResult::Claimed(row));
        }
        Err(StoreError::Corrupt(
            "the key vanished during every claim".to_owned(),
        ))
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
    /// transaction. Returns the movement as stored, or `None` if it no longer exists (its key
    /// was released by reconciliation meanwhile).
    #[tracing::instrument(skip_all, fields(user_id = %key.user, key = %key.key))]
    pub async fn finish(
        &self,
        key: KeyRef,
        operation: Operation,
        resource_id: Uuid,
        result: &MovementResult,
    ) -> Result<Option<SavedMovement>, StoreError> {
        let mut tx = self.pool.begin().await?;
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
        keys::set_unknown(
            &mut conn,
            key,
            resource_id,
            call_ended,
            due_in.as_secs_f64(),
        )
        .await
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

    /// Locks this unfinished key for reconciliation, if no one else holds it.
    pub async fn lock_unfinished(&self, key: KeyRef) -> Result<Option<PgLockedKey>, StoreError> {
        let mut tx = self.pool.begin().await?;
        let Some((stored, history)) = keys::lock_unfinished_key(&mut tx, key).await? else {
            return Ok(None);
        };
        PgLockedKey::load(tx, key, stored, history).await
    }

    /// Locks the oldest key due for a bank look-up, if any.
    pub async fn lock_next_due(
        &self,
        stuck_after: Duration,
    ) -> Result<Option<PgLockedKey>, StoreError> {
        let mut tx = self.pool.begin().await?;
        let Some((key, stored, history)) =
            keys::lock_next_due_key(&mut tx, stuck_after.as_secs_f64()).await?
        else {
            return Ok(None);
        };
        PgLockedKey::load(tx, key, stored, history).await
    }

    /// Deletes one batch of finished keys older than `keep_for`; returns how many.
    pub async fn expire_batch(
        &self,
        keep_for: Duration,
        batch_size: i64,
    ) -> Result<u64, StoreError> {
        let mut conn = self.pool.acquire().await?;
        keys::delete_expired_batch(&mut conn, keep_for.as_secs_f64(), batch_size).await
    }

    /// The ages of the oldest `started` and `unknown` keys, for the metrics.
    pub async fn oldest_unfinished_ages(&self) -> Result<(Duration, Duration), StoreError> {
        let mut conn = self.pool.acquire().await?;
        let (started, unknown) = keys::oldest_unfinished_ages(&mut conn).await?;
        Ok((
            Duration::from_secs_f64(started.max(0.0)),
            Duration::from_secs_f64(unknown.max(0.0)),
        ))
    }
}

impl PgLockedKey {
    async fn load(
        mut tx: Transaction<'static, Postgres>,
        key: KeyRef,
        stored: StoredKey,
        history: LookupHistory,
    ) -> Result<Option<PgLockedKey>, StoreError> {
        let Some(movement) =
            load_movement(&mut tx, key, stored.operation, stored.resource_id).await?
        else {
            return Err(StoreError::Corrupt(format!(
                "key {} has no {} row {}",
                key.key,
                stored.operation.name(),
                stored.resource_id
            )));
        };
        Ok(Some(PgLockedKey {
            tx,
            unfinished: UnfinishedKey {
                key,
                stored,
                movement,
                history,
            },
        }))
    }

    /// Writes the bank's true result and commits.
    pub async fn finish(
        mut self,
        result: &MovementResult,
    ) -> Result<Option<SavedMovement>, StoreError> {
        let UnfinishedKey { key, stored, .. } = &self.unfinished;
        let finished = finish_in(
            &mut self.tx,
            *key,
            stored.operation,
            stored.resource_id,
            result,
        )
        .await?;
        self.tx.commit().await?;
        Ok(finished)
    }

    /// The bank never saw the movement: releases the key (kept, with its pending movement) for
    /// the client's retry, with a check for a late debit `check_after` from now, and commits.
    pub async fn release(mut self, check_after: Duration) -> Result<(), StoreError> {
        let UnfinishedKey { key, stored, .. } = &self.unfinished;
        keys::set_released(
            &mut self.tx,
            *key,
            stored.resource_id,
            check_after.as_secs_f64(),
        )
        .await?;
        self.tx.commit().await?;
        Ok(())
    }

    /// A released key's last check found nothing at the bank: its movement becomes `void` and
    /// its checks end (so it may expire), in one transaction.
    pub async fn void(mut self) -> Result<(), StoreError> {
        let UnfinishedKey { key, stored, .. } = &self.unfinished;
        let user_id = key.user.as_i64();
        match stored.operation {
            Operation::PayBill => {
                payments::set_void(&mut self.tx, user_id, stored.resource_id).await?
            }
            Operation::RefundPayment => {
                refunds::set_void(&mut self.tx, user_id, stored.resource_id).await?
            }
        }
        keys::end_checks(&mut self.tx, *key, stored.resource_id).await?;
        self.tx.commit().await?;
        Ok(())
    }

    /// Sets the next look-up `wait` from now and commits; `failed` counts this look-up
    /// towards the back-off.
    pub async fn look_again_in(mut self, wait: Duration, failed: bool) -> Result<(), StoreError> {
        let key = self.unfinished.key;
        keys::schedule_lookup(&mut self.tx, key, wait.as_secs_f64(), i16::from(failed)).await?;
        self.tx.commit().await?;
        Ok(())
    }
}

async fn load_movement(
    conn: &mut PgConnection,
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
    conn: &mut PgConnection,
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
