//! The store's smaller slices on either database, each a few shared statements: [`Expiry`]
//! (the janitor's batches), [`TrailWrites`] (the audit trail's writer), [`OperatorReads`] (the
//! operator API's pages) and [`Health`] (migrations, readiness, the writer's restarts).

use std::time::Duration;

use async_trait::async_trait;
use uuid::Uuid;

use super::db::Db;
use super::error::StoreError;
use super::slices::{Expiry, Health, OperatorReads, PoolUse, TrailWrites};
use super::sql::events::{self, StoredEvent};
use super::sql::keys;
use super::sql::operator_reads::{
    self, CustomerKey, CustomerMovement, LateDebit, MovementCursor, Page, Paged, QueueCursor,
    QueuedKey, TrailOf,
};
use super::sql_store::SqlStore;
use super::types::ReplicationState;
use crate::domain::{NewEvent, Observed};
use shared::UserId;

#[async_trait]
impl<D: Db> Expiry for SqlStore<D> {
    async fn expire_batch(&self, batch_size: i64) -> Result<u64, StoreError> {
        let mut conn = self.pool.acquire().await?;
        keys::delete_expired_batch::<D>(&mut conn, batch_size).await
    }

    async fn expire_events_batch(
        &self,
        keep_for: Duration,
        batch_size: i64,
    ) -> Result<u64, StoreError> {
        let mut conn = self.pool.acquire().await?;
        events::delete_expired_batch::<D>(&mut conn, keep_for, batch_size).await
    }
}

#[async_trait]
impl<D: Db> TrailWrites for SqlStore<D> {
    async fn append_event(&self, event: &NewEvent) -> Result<(), StoreError> {
        let mut conn = self.pool.acquire().await?;
        events::append::<D>(&mut conn, event).await
    }

    async fn append_events(&self, observed: &[Observed]) -> Result<(), StoreError> {
        let mut tx = D::begin_write(&self.pool).await?;
        for one in observed {
            events::append_observed::<D>(&mut tx, one).await?;
        }
        tx.commit().await?;
        Ok(())
    }
}

#[async_trait]
impl<D: Db> OperatorReads for SqlStore<D> {
    async fn customer_movements(
        &self,
        user_id: UserId,
        page: Page<MovementCursor>,
    ) -> Result<Paged<CustomerMovement, MovementCursor>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        operator_reads::customer_movements::<D>(&mut conn, user_id, page).await
    }

    async fn customer_claims(
        &self,
        user_id: UserId,
        movement_ids: &[Uuid],
    ) -> Result<(Vec<CustomerKey>, Vec<StoredEvent>), StoreError> {
        let mut conn = self.pool.acquire().await?;
        operator_reads::customer_claims::<D>(&mut conn, user_id, movement_ids).await
    }

    async fn customer_trail(
        &self,
        user_id: UserId,
        of: TrailOf,
        page: Page<i64>,
    ) -> Result<Paged<StoredEvent, i64>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        events::select_trail::<D>(&mut conn, user_id, of, page).await
    }

    async fn queued_keys(
        &self,
        page: Page<QueueCursor>,
    ) -> Result<Paged<QueuedKey, QueueCursor>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        operator_reads::queued_keys::<D>(&mut conn, page).await
    }

    async fn late_debits(&self, page: Page<i64>) -> Result<Paged<LateDebit, i64>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        operator_reads::late_debits::<D>(&mut conn, page).await
    }
}

#[async_trait]
impl<D: Db> Health for SqlStore<D> {
    async fn migrate(&self) -> Result<(), sqlx::migrate::MigrateError> {
        D::migrate(&self.pool).await
    }

    async fn unapplied_migrations(&self) -> Result<Vec<i64>, sqlx::migrate::MigrateError> {
        D::unapplied_migrations(&self.pool).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        if !D::writer_health(&self.writer).0 {
            return Err(StoreError::Unavailable(sqlx::Error::Io(
                std::io::Error::other(
                    "the writer of claims and outcomes is not running (it is being started again)",
                ),
            )));
        }
        let mut conn = self.pool.acquire().await?;
        D::execute(&mut conn, sqlx::query("SELECT 1")).await?;
        Ok(())
    }

    fn writer_restarts(&self) -> u64 {
        D::writer_health(&self.writer).1
    }

    async fn replication(&self) -> Result<Option<ReplicationState>, StoreError> {
        D::replication(&self.pool).await
    }

    fn connections(&self) -> PoolUse {
        let open = self.pool.size();
        let idle = u32::try_from(self.pool.num_idle())
            .unwrap_or(u32::MAX)
            .saturating_add(D::writer_idle_connections(&self.writer));
        PoolUse {
            in_use: open.saturating_sub(idle),
            idle,
            max: self.pool.options().get_max_connections(),
        }
    }
}
