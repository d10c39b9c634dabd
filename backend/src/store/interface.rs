//! [`Store`]: the one store interface the flows, the reconciler, the janitor and the HTTP layer
//! use. Each method says what it does in domain terms and hands the work to the database behind
//! it; only [`Store::connect`] looks at which database that is.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use shared::{Fingerprint, Operation};
use time::OffsetDateTime;
use uuid::Uuid;

use super::error::StoreError;
use super::postgres::{PgLockedKey, PgStore};
use super::sqlite::{SqliteLockedKey, SqliteStore};
use super::types::{
    ClaimResult, KeyRef, MovementResult, NewPayment, NewRefund, PaymentRow, RefundClaimResult,
    RefundRow, SavedMovement, StoredKey, UnfinishedKey, UnknownCall,
};

/// The keys, payments and refunds, in whichever database `DATABASE_URL` names. Cheap to clone.
#[derive(Debug, Clone)]
pub enum Store {
    /// PostgreSQL: production, and any deployment with more than one replica.
    Postgres(PgStore),
    /// An embedded SQLite file: one process, nothing else to install.
    Sqlite(SqliteStore),
}

/// An unfinished key taken for reconciliation: nobody else reconciles it until it is finished,
/// released or postponed (or dropped, which frees it for another try).
pub enum LockedKey {
    /// Held by a row lock in an open PostgreSQL transaction.
    Postgres(PgLockedKey),
    /// Held by a lease written to the key row (SQLite has no `SKIP LOCKED`).
    Sqlite(SqliteLockedKey),
}

impl Store {
    /// Connects to the database `database_url` names: `postgres://…` (or `postgresql://…`), or
    /// `sqlite://PATH` for a SQLite file, created with its directory if missing.
    /// `acquire_timeout` bounds how long a request waits for a connection, so it gets a prompt
    /// 503 instead of hanging.
    pub async fn connect(
        database_url: &str,
        max_connections: u32,
        acquire_timeout: Duration,
    ) -> anyhow::Result<Store> {
        if let Some(path) = database_url.strip_prefix("sqlite://") {
            let store = SqliteStore::open(Path::new(path), max_connections, acquire_timeout)
                .await
                .with_context(|| format!("opening the SQLite database {path}"))?;
            return Ok(Store::Sqlite(store));
        }
        if !(database_url.starts_with("postgres://") || database_url.starts_with("postgresql://")) {
            bail!("DATABASE_URL must start with postgres:// or sqlite://");
        }
        let options = database_url
            .parse()
            .context("DATABASE_URL is not a PostgreSQL URL")?;
        let store = PgStore::connect(options, max_connections, acquire_timeout)
            .await
            .context("connecting to PostgreSQL")?;
        Ok(Store::Postgres(store))
    }

    /// Applies this database's migrations (embedded at build time).
    pub async fn migrate(&self) -> Result<(), sqlx::migrate::MigrateError> {
        match self {
            Store::Postgres(store) => store.migrate().await,
            Store::Sqlite(store) => store.migrate().await,
        }
    }

    /// Checks the database answers (readiness).
    pub async fn ping(&self) -> Result<(), StoreError> {
        match self {
            Store::Postgres(store) => store.ping().await,
            Store::Sqlite(store) => store.ping().await,
        }
    }

    /// Claims a `pay_bill` key and writes its pending payment, committed before the bank is
    /// called; or returns the existing key.
    pub async fn claim_payment(
        &self,
        key: KeyRef,
        fingerprint: &Fingerprint,
        payment: &NewPayment,
    ) -> Result<ClaimResult<PaymentRow>, StoreError> {
        match self {
            Store::Postgres(store) => store.claim_payment(key, fingerprint, payment).await,
            Store::Sqlite(store) => store.claim_payment(key, fingerprint, payment).await,
        }
    }

    /// Claims a `refund_payment` key and writes its pending refund, checking the remaining
    /// amount one refund of the payment at a time; or says why not.
    pub async fn claim_refund(
        &self,
        key: KeyRef,
        fingerprint: &Fingerprint,
        refund: &NewRefund,
    ) -> Result<RefundClaimResult, StoreError> {
        match self {
            Store::Postgres(store) => store.claim_refund(key, fingerprint, refund).await,
            Store::Sqlite(store) => store.claim_refund(key, fingerprint, refund).await,
        }
    }

    /// Loads a key of a user.
    pub async fn load_key(&self, key: KeyRef) -> Result<Option<StoredKey>, StoreError> {
        match self {
            Store::Postgres(store) => store.load_key(key).await,
            Store::Sqlite(store) => store.load_key(key).await,
        }
    }

    /// The payment or refund behind a finished key, to render its saved answer: the one read
    /// with the key when there is one, else loaded. A finished key without it is corrupt.
    pub async fn saved_movement(
        &self,
        key: KeyRef,
        stored: &StoredKey,
    ) -> Result<SavedMovement, StoreError> {
        if let Some(saved) = &stored.saved {
            return Ok((**saved).clone());
        }
        let loaded = match self {
            Store::Postgres(store) => store.load_movement(key, stored).await?,
            Store::Sqlite(store) => store.load_movement(key, stored).await?,
        };
        loaded.ok_or_else(|| {
            StoreError::Corrupt(format!(
                "finished key's movement {} is gone",
                stored.resource_id
            ))
        })
    }

    /// Writes the bank's final word: the movement and the key's `done` state in one
    /// transaction. `None` if the movement no longer exists (its key was released meanwhile).
    pub async fn finish(
        &self,
        key: KeyRef,
        operation: Operation,
        resource_id: Uuid,
        result: &MovementResult,
    ) -> Result<Option<SavedMovement>, StoreError> {
        match self {
            Store::Postgres(store) => store.finish(key, operation, resource_id, result).await,
            Store::Sqlite(store) => store.finish(key, operation, resource_id, result).await,
        }
    }

    /// Moves a `started` key to `unknown` after a bank call without a readable outcome.
    pub async fn mark_unknown(
        &self,
        key: KeyRef,
        resource_id: Uuid,
        call: UnknownCall,
    ) -> Result<bool, StoreError> {
        match self {
            Store::Postgres(store) => store.mark_unknown(key, resource_id, call).await,
            Store::Sqlite(store) => store.mark_unknown(key, resource_id, call).await,
        }
    }

    /// Claims a released key again for the request with `fingerprint`, and returns its pending
    /// payment or refund to call the bank for under the claim's own reference; `None` if the key
    /// is not released (any more), was released for another request, or is being checked.
    pub async fn reclaim_released(
        &self,
        key: KeyRef,
        fingerprint: &Fingerprint,
    ) -> Result<Option<SavedMovement>, StoreError> {
        match self {
            Store::Postgres(store) => store.reclaim_released(key, fingerprint).await,
            Store::Sqlite(store) => store.reclaim_released(key, fingerprint).await,
        }
    }

    /// Deletes a key that the decision found expired, exactly as it was read; `false` if it
    /// changed meanwhile, or is released with its last check for a late debit still to come.
    pub async fn release_expired(
        &self,
        key: KeyRef,
        created_at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        match self {
            Store::Postgres(store) => store.release_expired(key, created_at).await,
            Store::Sqlite(store) => store.release_expired(key, created_at).await,
        }
    }

    /// A user's payment with its refunds; `None` if it is not this user's.
    pub async fn load_payment_with_refunds(
        &self,
        user_id: i64,
        payment_id: Uuid,
    ) -> Result<Option<(PaymentRow, Vec<RefundRow>)>, StoreError> {
        match self {
            Store::Postgres(store) => store.load_payment_with_refunds(user_id, payment_id).await,
            Store::Sqlite(store) => store.load_payment_with_refunds(user_id, payment_id).await,
        }
    }

    /// Takes this unfinished key for reconciliation, if no one else holds it.
    pub async fn lock_unfinished(&self, key: KeyRef) -> Result<Option<LockedKey>, StoreError> {
        Ok(match self {
            Store::Postgres(store) => store.lock_unfinished(key).await?.map(LockedKey::Postgres),
            Store::Sqlite(store) => store.lock_unfinished(key).await?.map(LockedKey::Sqlite),
        })
    }

    /// Takes the oldest key due for a bank look-up, if any.
    pub async fn lock_next_due(
        &self,
        stuck_after: Duration,
    ) -> Result<Option<LockedKey>, StoreError> {
        Ok(match self {
            Store::Postgres(store) => store
                .lock_next_due(stuck_after)
                .await?
                .map(LockedKey::Postgres),
            Store::Sqlite(store) => store
                .lock_next_due(stuck_after)
                .await?
                .map(LockedKey::Sqlite),
        })
    }

    /// Deletes one bounded batch of finished keys older than `keep_for`; returns how many.
    pub async fn expire_batch(
        &self,
        keep_for: Duration,
        batch_size: i64,
    ) -> Result<u64, StoreError> {
        match self {
            Store::Postgres(store) => store.expire_batch(keep_for, batch_size).await,
            Store::Sqlite(store) => store.expire_batch(keep_for, batch_size).await,
        }
    }

    /// The ages of the oldest `started` and `unknown` keys, for the metrics.
    pub async fn oldest_unfinished_ages(&self) -> Result<(Duration, Duration), StoreError> {
        match self {
            Store::Postgres(store) => store.oldest_unfinished_ages().await,
            Store::Sqlite(store) => store.oldest_unfinished_ages().await,
        }
    }
}

impl LockedKey {
    /// The key and its pending movement.
    pub fn unfinished(&self) -> &UnfinishedKey {
        match self {
            LockedKey::Postgres(locked) => &locked.unfinished,
            LockedKey::Sqlite(locked) => &locked.unfinished,
        }
    }

    /// Writes the bank's true result (movement and key, in one transaction) and lets go.
    pub async fn finish(
        self,
        result: &MovementResult,
    ) -> Result<Option<SavedMovement>, StoreError> {
        match self {
            LockedKey::Postgres(locked) => locked.finish(result).await,
            LockedKey::Sqlite(locked) => locked.finish(result).await,
        }
    }

    /// The bank never saw the movement: releases the key, keeping it and its pending movement,
    /// so the client's retry claims it again under the same reference; the first check for a
    /// late debit comes `check_after` from now.
    pub async fn release(self, check_after: Duration) -> Result<(), StoreError> {
        match self {
            LockedKey::Postgres(locked) => locked.release(check_after).await,
            LockedKey::Sqlite(locked) => locked.release(check_after).await,
        }
    }

    /// A released key's last check found nothing at the bank: its movement becomes `void` (no
    /// money moved; it no longer counts against a payment's refundable rest) and the key may
    /// expire.
    pub async fn void(self) -> Result<(), StoreError> {
        match self {
            LockedKey::Postgres(locked) => locked.void().await,
            LockedKey::Sqlite(locked) => locked.void().await,
        }
    }

    /// The look-up failed: records it, asks again after `wait`, and lets go.
    pub async fn postpone_after_failure(self, wait: Duration) -> Result<(), StoreError> {
        self.look_again_in(wait, true).await
    }

    /// The look-up answered, but the key is to be asked about again after `wait` (a young
    /// claim the bank has not seen yet, or a released key's next check); lets go.
    pub async fn check_again_in(self, wait: Duration) -> Result<(), StoreError> {
        self.look_again_in(wait, false).await
    }

    async fn look_again_in(self, wait: Duration, failed: bool) -> Result<(), StoreError> {
        match self {
            LockedKey::Postgres(locked) => locked.look_again_in(wait, failed).await,
            LockedKey::Sqlite(locked) => locked.look_again_in(wait, failed).await,
        }
    }
}
