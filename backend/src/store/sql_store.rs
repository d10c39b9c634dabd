//! [`SqlStore`]: the store on either database, one pool and one writer, with what its slices
//! share (`claims`, `leases`, `upkeep` implement them): the lease a claim takes, committing a
//! change that others wait on, and writes that give a reconciler's lease back.
//!
//! Every write that moves a key out of `started` is announced ([`super::key_changes`]): to other
//! processes in its transaction, to this one's waiting requests once it commits.

use std::sync::Arc;

use sqlx::Pool;
use uuid::Uuid;

use super::db::Db;
use super::error::StoreError;
use super::key_changes::KeyChanges;
use super::sql::{keys, movements};
use super::types::{KeyRef, Lease, LeasedKey, StoredKey};
use crate::domain::{Cause, EventKind, NewEvent};

/// The store on a pool of database `D`. Cheap to clone (a pool handle).
#[derive(Debug, Clone)]
pub struct SqlStore<D: Db> {
    pub(super) pool: Pool<D>,
    /// Writes the claims and outcomes ([`super::dialect::Dialect::Writer`]).
    pub(super) writer: D::Writer,
    pub(super) changes: Arc<KeyChanges>,
}

impl<D: Db> SqlStore<D> {
    /// The store on `pool`, announcing key changes to `changes`.
    pub fn new(pool: Pool<D>, changes: Arc<KeyChanges>) -> SqlStore<D> {
        SqlStore {
            writer: D::writer(&pool),
            pool,
            changes,
        }
    }

    /// Commits `tx`, which moved `key` out of `started`, announcing the change: to the other
    /// processes on commit, to this one's waiting requests once committed.
    pub(super) async fn commit_announced(
        &self,
        mut tx: sqlx::Transaction<'static, D>,
        key: KeyRef,
    ) -> Result<(), StoreError> {
        D::announce_change(&mut tx, key.clone()).await?;
        tx.commit().await?;
        self.changes.announce(key);
        Ok(())
    }

    /// A write transaction that has given back `owner`'s lease on `key` (and so writes the
    /// bank's reply only if the lease still held): [`StoreError::LeaseLost`] if it ran out and
    /// another reconciler took the key.
    pub(super) async fn write_giving_back_lease(
        &self,
        key: KeyRef,
        owner: Uuid,
    ) -> Result<sqlx::Transaction<'static, D>, StoreError> {
        let mut tx = D::begin_write(&self.pool).await?;
        if !keys::end_lease::<D>(&mut tx, key, owner).await? {
            return Err(StoreError::LeaseLost);
        }
        Ok(tx)
    }

    /// The leased key, with its movement, or `Corrupt` if the movement is missing.
    pub(super) async fn with_movement(
        &self,
        conn: &mut D::Connection,
        (key, stored): (KeyRef, StoredKey),
        lease: Lease,
    ) -> Result<LeasedKey, StoreError> {
        let movement =
            movements::select::<D>(conn, stored.operation, key.user.clone(), stored.movement_id)
                .await?
                .ok_or_else(|| {
                    StoreError::Corrupt(format!(
                        "key {} has no {} row {}",
                        key.key,
                        stored.operation.name(),
                        stored.movement_id
                    ))
                })?;
        Ok(LeasedKey {
            key,
            stored,
            movement,
            owner: lease.owner,
        })
    }
}

/// An event of the claim (`key`, `movement_id`), recorded against `cause`.
pub(super) fn claim_event(
    key: KeyRef,
    movement_id: Uuid,
    (kind, detail): (EventKind, impl Into<String>),
    cause: &Cause,
) -> NewEvent {
    NewEvent::of_claim(
        (key.user.clone(), key.key, movement_id),
        kind,
        Some(detail.into()),
        cause,
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures_util::future::BoxFuture;
    use shared::{IdempotencyKey, UserId};
    use sqlx::Sqlite;

    use shared::{Fingerprint, Operation};

    use super::*;
    use crate::domain::Cause;
    use crate::durability::Replication;
    use crate::readiness::Readiness;
    use crate::store::dialect::Dialect;
    use crate::store::group_commit::Opening;
    use crate::store::types::{ClaimResult, ClaimToken, NewPayment};
    use crate::store::{Health, SharedStore};

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn readiness_is_not_ready_while_the_sqlite_writer_is_down_and_writes_resume_after() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("payments.sqlite");
        let pool = crate::store::sqlite::open(&path, 4, Duration::from_secs(3))
            .await
            .expect("open");
        let store = Arc::new(SqlStore::<Sqlite>::new(pool, Arc::default()));
        store.migrate().await.expect("migrations");
        let shared: SharedStore = store.clone();
        let readiness = Readiness::new(Replication::None);
        readiness.check(&shared).await;
        assert!(readiness.current().ready);

        let killed = store
            .writer
            .write(
                |_opening: Opening<'_>| -> BoxFuture<'_, Result<(), StoreError>> {
                    Box::pin(async { panic!("a bug in a write") })
                },
            )
            .await;
        assert!(killed.is_err());
        let mut polls = 0;
        while Sqlite::writer_health(&store.writer).0 && polls < 100 {
            tokio::time::sleep(Duration::from_millis(5)).await;
            polls += 1;
        }
        readiness.check(&shared).await;
        let check = readiness.current();
        assert!(!check.ready, "not ready while the writer is down");
        assert!(
            check.problem.as_deref().unwrap_or("").contains("writer"),
            "{check:?}"
        );

        // A claim sent now waits for the restart and is written.
        let payment_id = Uuid::new_v4();
        let payment = NewPayment {
            payment_id,
            bill_id: "elec-1".to_owned(),
            amount_paise: 100,
            payer_vpa: "asha@okbank".to_owned(),
            bank_reference: Operation::PayBill.bank_reference(payment_id),
            key_kept_for: Duration::from_secs(3600),
        };
        let key = KeyRef::new(UserId::numbered(1), &IdempotencyKey::mint());
        let fingerprint = Fingerprint::from_slice(&[7; 32]).expect("32 bytes");
        let claimed = shared
            .claim_payment(
                key,
                &fingerprint,
                &payment,
                ClaimToken::mint(),
                &Cause::background(),
            )
            .await;
        assert!(
            matches!(claimed, Ok(ClaimResult::Claimed { .. })),
            "{claimed:?}"
        );
        readiness.check(&shared).await;
        assert!(readiness.current().ready, "ready again");
        assert_eq!(shared.writer_restarts(), 1);
    }
}
