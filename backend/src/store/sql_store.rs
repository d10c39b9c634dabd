//! [`SqlStore`]: the [`Store`] on either database, composing the statements of `store::sql`
//! into the transactions SPEC §5 requires, written once:
//! - the claim commits on its own before the bank is called (invariant 2): for a payment one
//!   statement on PostgreSQL, one short transaction on SQLite
//!   ([`Dialect`](super::dialect::Dialect)); for a refund one
//!   short transaction that also takes the payment, to check the remaining amount;
//! - the movement's outcome and the key's `done` state are written at once (invariant 4): one
//!   statement on PostgreSQL, one transaction on SQLite;
//! - reconciliation takes a key under a lease (`store::sql::keys`), so no transaction is open
//!   across a bank look-up, and writes the bank's answer only while it still holds the lease;
//! - every write that moves a key out of `started` is announced ([`super::key_changes`]): to
//!   other processes in its transaction, to this one's waiting requests once it commits.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use shared::{Fingerprint, KeyState, Operation};
use sqlx::Pool;
use time::OffsetDateTime;
use uuid::Uuid;

use super::db::Db;
use super::error::StoreError;
use super::interface::Store;
use super::key_changes::KeyChanges;
use super::sql::events::StoredEvent;
use super::sql::support_desk::{
    self, CustomerKey, CustomerMovement, LateDebit, MovementCursor, Page, Paged, QueueCursor,
    QueuedKey, TrailOf,
};
use super::sql::{events, keys, movements, outcome};
use super::types::{
    ClaimResult, Finished, KeyRef, Lease, LeasedKey, LookupHistory, MovementResult, NewPayment,
    NewRefund, PaymentRow, RefundClaimResult, RefundRow, SavedMovement, StoredKey, UnknownCall,
};
use crate::trail::{EventKind, NewEvent, Observed, OperatorAction, request_id};

/// How many times a claim is tried when its key disappears between the claim and the read of
/// the existing row (expired and deleted in that instant). Two suffice; more would mean a bug.
const CLAIM_ATTEMPTS: usize = 3;

/// The store on a pool of database `D`. Cheap to clone (a pool handle).
#[derive(Debug, Clone)]
pub struct SqlStore<D: Db> {
    pool: Pool<D>,
    /// Writes the claims and outcomes ([`super::dialect::Dialect::Writer`]).
    writer: D::Writer,
    changes: Arc<KeyChanges>,
    /// Names this process on the keys it claims (their lease owner), minted at start: a
    /// restarted process is another holder, so the dead one's claims lapse.
    holder: Uuid,
}

impl<D: Db> SqlStore<D> {
    /// The store on `pool`, announcing key changes to `changes`.
    pub fn new(pool: Pool<D>, changes: Arc<KeyChanges>) -> SqlStore<D> {
        SqlStore {
            writer: D::writer(&pool),
            pool,
            changes,
            holder: Uuid::new_v4(),
        }
    }

    /// The lease this process takes on a key it claims.
    fn claim(&self) -> Lease {
        Lease::for_claim(self.holder)
    }

    /// Commits `tx`, which moved `key` out of `started`, announcing the change: to the other
    /// processes on commit, to this one's waiting requests once committed.
    async fn commit_announced(
        &self,
        mut tx: sqlx::Transaction<'static, D>,
        key: KeyRef,
    ) -> Result<(), StoreError> {
        D::announce_change(&mut tx, key).await?;
        tx.commit().await?;
        self.changes.announce(key);
        Ok(())
    }

    /// A write transaction that has given back `owner`'s lease on `key` (and so writes the
    /// bank's answer only if the lease still held): [`StoreError::LeaseLost`] if it ran out and
    /// another reconciler took the key.
    async fn write_giving_back_lease(
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
    async fn with_movement(
        &self,
        conn: &mut D::Connection,
        (key, stored, history): (KeyRef, StoredKey, LookupHistory),
        lease: Lease,
    ) -> Result<LeasedKey, StoreError> {
        let movement = movements::select::<D>(
            conn,
            stored.operation,
            key.user.as_i64(),
            stored.resource_id,
        )
        .await?
        .ok_or_else(|| {
            StoreError::Corrupt(format!(
                "key {} has no {} row {}",
                key.key,
                stored.operation.name(),
                stored.resource_id
            ))
        })?;
        Ok(LeasedKey {
            key,
            stored,
            movement,
            history,
            owner: lease.owner,
        })
    }
}

#[async_trait]
impl<D: Db> Store for SqlStore<D> {
    async fn migrate(&self) -> Result<(), sqlx::migrate::MigrateError> {
        D::migrate(&self.pool).await
    }

    fn key_changes(&self) -> &Arc<KeyChanges> {
        &self.changes
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

    #[tracing::instrument(skip_all, fields(user_id = %key.user, key = %key.key))]
    async fn claim_payment(
        &self,
        key: KeyRef,
        fingerprint: &Fingerprint,
        payment: &NewPayment,
    ) -> Result<ClaimResult<PaymentRow>, StoreError> {
        for _ in 0..CLAIM_ATTEMPTS {
            let claimed = D::claim_key_with_pending_payment(
                &self.writer,
                key,
                fingerprint,
                payment,
                self.claim(),
            )
            .await?;
            if let Some((movement, expires_at)) = claimed {
                return Ok(ClaimResult::Claimed {
                    movement,
                    expires_at,
                });
            }
            if let Some(existing) = self.load_key(key).await? {
                return Ok(ClaimResult::Existing(existing));
            }
        }
        Err(StoreError::KeyKeptVanishing)
    }

    /// One short write transaction that takes the payment first (a row lock on PostgreSQL,
    /// the write lock on SQLite), so two refunds with different keys can never together exceed
    /// it; a refused refund rolls the key back too, so a corrected retry with it can go through.
    #[tracing::instrument(skip_all, fields(user_id = %key.user, key = %key.key))]
    async fn claim_refund(
        &self,
        key: KeyRef,
        fingerprint: &Fingerprint,
        refund: &NewRefund,
    ) -> Result<RefundClaimResult, StoreError> {
        let user_id = key.user.as_i64();
        for _ in 0..CLAIM_ATTEMPTS {
            let mut tx = D::begin_write(&self.pool).await?;
            let Some((paid, debit_reference)) =
                movements::lock_succeeded_payment::<D>(&mut tx, user_id, refund.payment_id).await?
            else {
                // A retry of a finished refund still replays: look at the key first.
                return Ok(match keys::select_key::<D>(&mut tx, key).await? {
                    Some(existing) => RefundClaimResult::Existing(existing),
                    None => RefundClaimResult::PaymentNotFound,
                });
            };
            let inserted = keys::insert_started_key::<D>(
                &mut tx,
                key,
                (Operation::RefundPayment, refund.refund_id),
                fingerprint,
                refund.key_kept_for,
                self.claim(),
            )
            .await?;
            let Some(expires_at) = inserted else {
                drop(tx);
                match self.load_key(key).await? {
                    Some(existing) => return Ok(RefundClaimResult::Existing(existing)),
                    None => continue,
                }
            };
            let committed =
                movements::committed_refunds_total::<D>(&mut tx, user_id, refund.payment_id)
                    .await?;
            let remaining_paise = paid - committed;
            if refund.amount_paise > remaining_paise {
                return Ok(RefundClaimResult::ExceedsRemaining { remaining_paise });
            }
            let row = movements::insert_pending_refund::<D>(&mut tx, key, refund, debit_reference)
                .await?;
            let claimed =
                NewEvent::of_claim(user_id, key.key, refund.refund_id, EventKind::Claimed, None);
            events::append::<D>(&mut tx, &claimed).await?;
            tx.commit().await?;
            return Ok(RefundClaimResult::Claimed {
                refund: row,
                expires_at,
            });
        }
        Err(StoreError::KeyKeptVanishing)
    }

    async fn load_key(&self, key: KeyRef) -> Result<Option<StoredKey>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        keys::select_key::<D>(&mut conn, key).await
    }

    async fn load_movement(
        &self,
        key: KeyRef,
        operation: Operation,
        resource_id: Uuid,
    ) -> Result<Option<SavedMovement>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        movements::select::<D>(&mut conn, operation, key.user.as_i64(), resource_id).await
    }

    #[tracing::instrument(skip_all, fields(user_id = %key.user, key = %key.key))]
    async fn finish(
        &self,
        key: KeyRef,
        operation: Operation,
        resource_id: Uuid,
        result: &MovementResult,
    ) -> Result<Option<Finished>, StoreError> {
        let finished =
            D::finish_movement_and_key(&self.writer, key, operation, resource_id, result).await?;
        self.changes.announce(key);
        Ok(finished)
    }

    #[tracing::instrument(skip_all, fields(user_id = %key.user, key = %key.key))]
    async fn mark_unknown(
        &self,
        key: KeyRef,
        resource_id: Uuid,
        call: UnknownCall,
    ) -> Result<bool, StoreError> {
        let detail = call.describe();
        let mut tx = D::begin_write(&self.pool).await?;
        let moved = keys::set_unknown::<D>(&mut tx, key, resource_id, call, self.holder).await?;
        if !moved {
            return Ok(false);
        }
        let event = claim_event(key, resource_id, EventKind::BankAnswerUnknown, detail);
        events::append::<D>(&mut tx, &event).await?;
        self.commit_announced(tx, key).await?;
        Ok(true)
    }

    #[tracing::instrument(skip_all, fields(user_id = %key.user, key = %key.key))]
    async fn release_unsent(
        &self,
        key: KeyRef,
        resource_id: Uuid,
        check_after: Duration,
    ) -> Result<(), StoreError> {
        let mut tx = D::begin_write(&self.pool).await?;
        if keys::release_started_key::<D>(&mut tx, key, resource_id, check_after, self.holder)
            .await?
        {
            let detail = "no bank call could be sent; a retry claims the key again";
            let event = claim_event(key, resource_id, EventKind::Released, detail);
            events::append::<D>(&mut tx, &event).await?;
        }
        self.commit_announced(tx, key).await
    }

    #[tracing::instrument(skip_all, fields(user_id = %key.user, key = %key.key))]
    async fn reclaim_released(
        &self,
        key: KeyRef,
        fingerprint: &Fingerprint,
    ) -> Result<Option<SavedMovement>, StoreError> {
        let mut tx = D::begin_write(&self.pool).await?;
        let Some((operation, resource_id)) =
            keys::reclaim_released_key::<D>(&mut tx, key, fingerprint, self.claim()).await?
        else {
            return Ok(None);
        };
        let detail = "the retry calls the bank again under the claim's reference";
        let event = claim_event(key, resource_id, EventKind::ClaimedAgain, detail);
        events::append::<D>(&mut tx, &event).await?;
        let movement =
            movements::select::<D>(&mut tx, operation, key.user.as_i64(), resource_id).await?;
        tx.commit().await?;
        Ok(movement)
    }

    async fn renew_claim(&self, key: KeyRef) -> Result<bool, StoreError> {
        let mut conn = self.pool.acquire().await?;
        keys::renew_claim::<D>(&mut conn, key, self.claim()).await
    }

    async fn release_expired(
        &self,
        key: KeyRef,
        created_at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let mut conn = self.pool.acquire().await?;
        keys::delete_expired_key::<D>(&mut conn, key, created_at).await
    }

    async fn load_payment_with_refunds(
        &self,
        user_id: i64,
        payment_id: Uuid,
    ) -> Result<Option<(PaymentRow, Vec<RefundRow>)>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        let payment =
            movements::select::<D>(&mut conn, Operation::PayBill, user_id, payment_id).await?;
        let Some(SavedMovement::Payment(payment)) = payment else {
            return Ok(None);
        };
        let refunds = movements::select_refunds_of::<D>(&mut conn, user_id, payment_id).await?;
        Ok(Some((payment, refunds)))
    }

    async fn lease_key(
        &self,
        key: KeyRef,
        asked_by: Option<&OperatorAction>,
    ) -> Result<Option<LeasedKey>, StoreError> {
        let lease = Lease::for_reconciler();
        let Some(operator) = asked_by else {
            let mut conn = self.pool.acquire().await?;
            let Some(taken) = keys::lease_key::<D>(&mut conn, key, lease).await? else {
                return Ok(None);
            };
            return self.with_movement(&mut conn, taken, lease).await.map(Some);
        };
        let mut tx = D::begin_write(&self.pool).await?;
        let Some(taken) = keys::lease_key::<D>(&mut tx, key, lease).await? else {
            return Ok(None);
        };
        let detail = "asked the bank now, by the claim's reference";
        let asked = NewEvent {
            operator: Some(operator.clone()),
            ..claim_event(key, taken.1.resource_id, EventKind::OperatorLookup, detail)
        };
        events::append::<D>(&mut tx, &asked).await?;
        let leased = self.with_movement(&mut tx, taken, lease).await?;
        tx.commit().await?;
        Ok(Some(leased))
    }

    async fn lease_due(
        &self,
        stuck_after: Duration,
        limit: usize,
    ) -> Result<Vec<Result<LeasedKey, StoreError>>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        let lease = Lease::for_reconciler();
        let taken = keys::lease_due_keys::<D>(&mut conn, stuck_after, lease, limit).await?;
        let mut leased = Vec::with_capacity(taken.len());
        for taken in taken {
            leased.push(match taken {
                Ok(taken) => self.with_movement(&mut conn, taken, lease).await,
                Err(unreadable) => Err(unreadable),
            });
        }
        Ok(leased)
    }

    async fn finish_leased(
        &self,
        leased: LeasedKey,
        result: &MovementResult,
    ) -> Result<Option<SavedMovement>, StoreError> {
        let LeasedKey {
            key, stored, owner, ..
        } = leased;
        let event = if stored.record.state == KeyState::Released {
            EventKind::LateDebitFound
        } else {
            EventKind::Resolved
        };
        let mut tx = self.write_giving_back_lease(key, owner).await?;
        let finished = outcome::finish_in::<D>(
            &mut tx,
            key,
            (stored.operation, stored.resource_id),
            result,
            event,
            request_id::current(),
        )
        .await?;
        tx.commit().await?;
        self.changes.announce(key);
        Ok(finished.map(|finished| finished.movement))
    }

    async fn release_leased(
        &self,
        leased: LeasedKey,
        check_after: Duration,
    ) -> Result<(), StoreError> {
        let LeasedKey {
            key, stored, owner, ..
        } = leased;
        let mut tx = D::begin_write(&self.pool).await?;
        let released =
            keys::set_released::<D>(&mut tx, key, stored.resource_id, owner, check_after).await?;
        if !released {
            return Err(StoreError::LeaseLost);
        }
        let detail = "the bank never saw the reference; a retry claims the key again";
        let event = claim_event(key, stored.resource_id, EventKind::Released, detail);
        events::append::<D>(&mut tx, &event).await?;
        self.commit_announced(tx, key).await
    }

    async fn void_leased(&self, leased: LeasedKey) -> Result<(), StoreError> {
        let LeasedKey {
            key, stored, owner, ..
        } = leased;
        let mut tx = self.write_giving_back_lease(key, owner).await?;
        let user_id = key.user.as_i64();
        movements::set_void::<D>(&mut tx, stored.operation, user_id, stored.resource_id).await?;
        keys::end_checks::<D>(&mut tx, key, stored.resource_id).await?;
        let detail = "the last check found nothing at the bank: no money moved";
        let event = claim_event(key, stored.resource_id, EventKind::Voided, detail);
        events::append::<D>(&mut tx, &event).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn look_again(
        &self,
        leased: LeasedKey,
        wait: Duration,
        failed: bool,
    ) -> Result<(), StoreError> {
        let detail = if failed {
            format!(
                "the bank could not be asked; next look-up in {}s",
                wait.as_secs()
            )
        } else {
            format!("no final answer yet; next look-up in {}s", wait.as_secs())
        };
        let mut tx = D::begin_write(&self.pool).await?;
        let (key, owner) = (leased.key, leased.owner);
        let scheduled =
            keys::schedule_lookup::<D>(&mut tx, key, owner, wait, i16::from(failed)).await?;
        if !scheduled {
            return Err(StoreError::LeaseLost);
        }
        let event = claim_event(key, leased.stored.resource_id, EventKind::LookedUp, detail);
        events::append::<D>(&mut tx, &event).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn append_event(&self, event: &NewEvent) -> Result<(), StoreError> {
        let mut conn = self.pool.acquire().await?;
        events::append::<D>(&mut conn, event).await
    }

    async fn customer_movements(
        &self,
        user_id: i64,
        page: Page<MovementCursor>,
    ) -> Result<Paged<CustomerMovement, MovementCursor>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        support_desk::customer_movements::<D>(&mut conn, user_id, page).await
    }

    async fn customer_claims(
        &self,
        user_id: i64,
        resource_ids: &[Uuid],
    ) -> Result<(Vec<CustomerKey>, Vec<StoredEvent>), StoreError> {
        let mut conn = self.pool.acquire().await?;
        support_desk::customer_claims::<D>(&mut conn, user_id, resource_ids).await
    }

    async fn customer_trail(
        &self,
        user_id: i64,
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
        support_desk::queued_keys::<D>(&mut conn, page).await
    }

    async fn late_debits(&self, page: Page<i64>) -> Result<Paged<LateDebit, i64>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        support_desk::late_debits::<D>(&mut conn, page).await
    }

    async fn expire_events_batch(
        &self,
        keep_for: Duration,
        batch_size: i64,
    ) -> Result<u64, StoreError> {
        let mut conn = self.pool.acquire().await?;
        events::delete_expired_batch::<D>(&mut conn, keep_for, batch_size).await
    }

    async fn append_events(&self, observed: &[Observed]) -> Result<(), StoreError> {
        let mut tx = D::begin_write(&self.pool).await?;
        for one in observed {
            events::append_observed::<D>(&mut tx, one).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn expire_batch(&self, batch_size: i64) -> Result<u64, StoreError> {
        let mut conn = self.pool.acquire().await?;
        keys::delete_expired_batch::<D>(&mut conn, batch_size).await
    }

    async fn oldest_unfinished_ages(&self) -> Result<(Duration, Duration), StoreError> {
        let mut conn = self.pool.acquire().await?;
        let (started, unknown, now) = keys::oldest_unfinished::<D>(&mut conn).await?;
        let age = |claimed: Option<super::columns::Timestamp>| {
            claimed.map_or(Duration::ZERO, |claimed| {
                (now.0 - claimed.0).try_into().unwrap_or(Duration::ZERO)
            })
        };
        Ok((age(started), age(unknown)))
    }
}

/// An event of the claim (`key`, `resource_id`), stamped with the current request's id.
fn claim_event(
    key: KeyRef,
    resource_id: Uuid,
    kind: EventKind,
    detail: impl Into<String>,
) -> NewEvent {
    NewEvent::of_claim(
        key.user.as_i64(),
        key.key,
        resource_id,
        kind,
        Some(detail.into()),
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures_util::future::BoxFuture;
    use shared::{IdempotencyKey, UserId};
    use sqlx::{Sqlite, SqliteConnection};

    use super::*;
    use crate::readiness::Readiness;
    use crate::store::SharedStore;
    use crate::store::dialect::Dialect;

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
        let readiness = Readiness::new();
        readiness.check(&shared).await;
        assert!(readiness.current().ready);

        let killed = store
            .writer
            .write(
                |_conn: &mut SqliteConnection| -> BoxFuture<'_, Result<(), StoreError>> {
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
        let key = KeyRef::new(UserId::new(1).expect("positive"), &IdempotencyKey::mint());
        let fingerprint = Fingerprint::from_slice(&[7; 32]).expect("32 bytes");
        let claimed = shared.claim_payment(key, &fingerprint, &payment).await;
        assert!(
            matches!(claimed, Ok(ClaimResult::Claimed { .. })),
            "{claimed:?}"
        );
        readiness.check(&shared).await;
        assert!(readiness.current().ready, "ready again");
        assert_eq!(shared.writer_restarts(), 1);
    }
}
