//! [`Claims`] on either database: the claim commits on its own before the bank is called (SPEC
//! §5 invariant 2), and the movement's outcome and the key's `done` state are written at once
//! (invariant 4).
//!
//! Two writes differ between the databases, and are written side by side here, one file each
//! ([`ClaimWrites`]): the `pay_bill` claim with its pending payment, and the bank's final word.
//! On PostgreSQL each is one statement (a data-modifying `WITH`, one round trip); on SQLite each
//! is one string of three statements (one trip to SQLite's thread) through the group commit.
//! Their parameters are bound once for both ([`claim_payment_query`], [`finish_query`]).
//! Everything else (the refund claim, the reads, the unknown, release and re-claim writes) is the
//! shared statements of `store::sql`, composed here once.

pub(super) mod postgres;
mod sqlite;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use shared::{Fingerprint, Operation};
use sqlx::query::Query;
use time::OffsetDateTime;
use uuid::Uuid;

use super::columns::{Label, TrailRequestId};
use super::db::{Arg, Db};
use super::error::StoreError;
use super::key_changes::KeyChanges;
use super::slices::Claims;
use super::sql::key_row::{StartedKey, bind_started};
use super::sql::{events, keys, movements};
use super::sql_store::{SqlStore, claim_event};
use super::types::{
    ClaimResult, ClaimToken, FinalOutcome, Finished, KeyRef, Lease, NewPayment, NewRefund,
    PaymentRow, RefundRow, SavedMovement, StoredKey,
};
use crate::domain::{Cause, EventKind, NewEvent, RequestId};
use crate::store::columns::Subject;
use shared::UserId;

/// The two writes that differ between PostgreSQL (`claims/postgres.rs`) and SQLite
/// (`claims/sqlite.rs`).
pub trait ClaimWrites: super::dialect::Dialect {
    /// The claim of a `pay_bill` key with its pending payment, held under `claim` and recorded
    /// against `cause`, committed before it returns (and so before the bank is called): the
    /// payment row and the key's expiry, or `None` if the (user, key) exists.
    fn claim_key_with_pending_payment(
        writer: &Self::Writer,
        key: KeyRef,
        request: (&Fingerprint, &NewPayment),
        claim: Lease,
        cause: &Cause,
    ) -> impl Future<Output = Result<Option<(PaymentRow, OffsetDateTime)>, StoreError>> + Send;

    /// Writes the bank's final word on a claim's movement and moves its key to `done`, at once
    /// (SPEC §5 invariant 4), announcing the change: the movement and the key as they now
    /// stand, or `None` if the movement does not exist.
    fn finish_movement_and_key(
        writer: &Self::Writer,
        key: KeyRef,
        movement: (Operation, Uuid),
        result: &FinalOutcome,
        cause: &Cause,
    ) -> impl Future<Output = Result<Option<Finished>, StoreError>> + Send;
}

#[async_trait]
impl<D: Db + ClaimWrites> Claims for SqlStore<D> {
    fn key_changes(&self) -> &Arc<KeyChanges> {
        &self.changes
    }

    async fn mark_awaited(&self, key: KeyRef) -> Result<(), StoreError> {
        D::mark_awaited(&self.pool, key).await
    }

    #[tracing::instrument(skip_all, fields(user_id = %key.user, key = %key.key))]
    async fn claim_payment(
        &self,
        key: KeyRef,
        fingerprint: &Fingerprint,
        payment: &NewPayment,
        claim: ClaimToken,
        cause: &Cause,
    ) -> Result<ClaimResult, StoreError> {
        let claimed = D::claim_key_with_pending_payment(
            &self.writer,
            key.clone(),
            (fingerprint, payment),
            claim.lease(),
            cause,
        )
        .await
        .map_err(StoreError::of_claim)?;
        if let Some((movement, expires_at)) = claimed {
            return Ok(ClaimResult::Claimed {
                movement: SavedMovement::Payment(movement),
                claim,
                expires_at,
            });
        }
        Ok(self
            .load_key(key)
            .await?
            .map_or(ClaimResult::Vanished, ClaimResult::Existing))
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
        claim: ClaimToken,
        cause: &Cause,
    ) -> Result<ClaimResult, StoreError> {
        let user_id = key.user.clone();
        let mut tx = D::begin_write(&self.pool).await?;
        let Some((paid, debit_reference)) =
            movements::lock_succeeded_payment::<D>(&mut tx, user_id.clone(), refund.payment_id)
                .await?
        else {
            // A retry of a finished refund still replays: look at the key first.
            return Ok(match keys::select_key::<D>(&mut tx, key).await? {
                Some(existing) => ClaimResult::Existing(existing),
                None => ClaimResult::PaymentNotFound,
            });
        };
        let started = StartedKey {
            key: key.clone(),
            movement: (Operation::RefundPayment, refund.refund_id),
            fingerprint,
            claim: claim.lease(),
            kept_for: refund.key_kept_for,
        };
        let inserted = keys::insert_started_key::<D>(&mut tx, &started).await?;
        let Some(expires_at) = inserted else {
            drop(tx);
            let existing = self.load_key(key).await?;
            return Ok(existing.map_or(ClaimResult::Vanished, ClaimResult::Existing));
        };
        let committed =
            movements::committed_refunds_total::<D>(&mut tx, user_id.clone(), refund.payment_id)
                .await?;
        let remaining_paise = paid - committed;
        if refund.amount_paise > remaining_paise {
            return Ok(ClaimResult::ExceedsRemaining { remaining_paise });
        }
        let row =
            movements::insert_pending_refund::<D>(&mut tx, key.clone(), refund, debit_reference)
                .await
                .map_err(StoreError::of_claim)?;
        let claimed = NewEvent::of_claim(
            (user_id, key.key, refund.refund_id),
            EventKind::Claimed,
            None,
            cause,
        );
        events::append::<D>(&mut tx, &claimed).await?;
        tx.commit().await?;
        Ok(ClaimResult::Claimed {
            movement: SavedMovement::Refund(row),
            claim,
            expires_at,
        })
    }

    async fn load_key(&self, key: KeyRef) -> Result<Option<StoredKey>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        keys::select_key::<D>(&mut conn, key).await
    }

    async fn load_movement(
        &self,
        key: KeyRef,
        operation: Operation,
        movement_id: Uuid,
    ) -> Result<Option<SavedMovement>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        movements::select::<D>(&mut conn, operation, key.user.clone(), movement_id).await
    }

    #[tracing::instrument(skip_all, fields(user_id = %key.user, key = %key.key))]
    async fn finish(
        &self,
        key: KeyRef,
        operation: Operation,
        movement_id: Uuid,
        result: &FinalOutcome,
        cause: &Cause,
    ) -> Result<Option<Finished>, StoreError> {
        let movement = (operation, movement_id);
        let finished =
            D::finish_movement_and_key(&self.writer, key.clone(), movement, result, cause).await?;
        self.changes.announce(key);
        Ok(finished)
    }

    #[tracing::instrument(skip_all, fields(user_id = %key.user, key = %key.key))]
    async fn mark_unknown(
        &self,
        key: KeyRef,
        (movement_id, claim): (Uuid, ClaimToken),
        first_check_in: Duration,
        cause: &Cause,
    ) -> Result<bool, StoreError> {
        let detail = "no final reply (timeout, lost connection, a gateway's error): the call \
                      may still reach the bank";
        let mut tx = D::begin_write(&self.pool).await?;
        let claim = (movement_id, claim);
        let moved = keys::set_unknown::<D>(&mut tx, key.clone(), claim, first_check_in).await?;
        if !moved {
            return Ok(false);
        }
        let event = claim_event(
            key.clone(),
            movement_id,
            (EventKind::BankReplyUnknown, detail),
            cause,
        );
        events::append::<D>(&mut tx, &event).await?;
        self.commit_announced(tx, key).await?;
        Ok(true)
    }

    #[tracing::instrument(skip_all, fields(user_id = %key.user, key = %key.key))]
    async fn release_unsent(
        &self,
        key: KeyRef,
        (movement_id, claim): (Uuid, ClaimToken),
        stuck_after: Duration,
        cause: &Cause,
    ) -> Result<(), StoreError> {
        let mut tx = D::begin_write(&self.pool).await?;
        let claim = (movement_id, claim);
        if keys::release_unsent_claim::<D>(&mut tx, key.clone(), claim, stuck_after).await? {
            let detail = "no bank call was sent, or the bank did not execute it; a retry claims \
                          the key again";
            let event = claim_event(
                key.clone(),
                movement_id,
                (EventKind::Released, detail),
                cause,
            );
            events::append::<D>(&mut tx, &event).await?;
        }
        self.commit_announced(tx, key).await
    }

    #[tracing::instrument(skip_all, fields(user_id = %key.user, key = %key.key))]
    async fn reclaim_released(
        &self,
        key: KeyRef,
        fingerprint: &Fingerprint,
        claim: ClaimToken,
        cause: &Cause,
    ) -> Result<Option<SavedMovement>, StoreError> {
        let mut tx = D::begin_write(&self.pool).await?;
        let Some((operation, movement_id)) =
            keys::reclaim_released_key::<D>(&mut tx, key.clone(), fingerprint, claim.lease())
                .await?
        else {
            return Ok(None);
        };
        let detail = "the retry calls the bank again under the claim's reference";
        let event = claim_event(
            key.clone(),
            movement_id,
            (EventKind::ClaimedAgain, detail),
            cause,
        );
        events::append::<D>(&mut tx, &event).await?;
        let movement =
            movements::select::<D>(&mut tx, operation, key.user.clone(), movement_id).await?;
        tx.commit().await?;
        Ok(movement)
    }

    async fn renew_claim(&self, key: KeyRef, claim: ClaimToken) -> Result<bool, StoreError> {
        let mut conn = self.pool.acquire().await?;
        keys::renew_claim::<D>(&mut conn, key, claim.lease()).await
    }

    async fn delete_expired(
        &self,
        key: KeyRef,
        created_at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let mut conn = self.pool.acquire().await?;
        keys::delete_expired_key::<D>(&mut conn, key, created_at).await
    }

    async fn load_payment_with_refunds(
        &self,
        user_id: UserId,
        payment_id: Uuid,
    ) -> Result<Option<(PaymentRow, Vec<RefundRow>)>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        let payment =
            movements::select::<D>(&mut conn, Operation::PayBill, user_id.clone(), payment_id)
                .await?;
        let Some(SavedMovement::Payment(payment)) = payment else {
            return Ok(None);
        };
        let refunds = movements::select_refunds_of::<D>(&mut conn, user_id, payment_id).await?;
        Ok(Some((payment, refunds)))
    }
}

/// The `pay_bill` claim's statement (`claims/postgres.rs`, `claims/sqlite.rs`) with its
/// parameters, numbered alike on both databases: `$1` to `$8` the started key's
/// ([`bind_started`]; `$5` is the payment id), then `$9` bill, `$10` amount, `$11`
/// payer, `$12` bank reference, `$13` request id (a UUID), `$14` trace id, `$15` request id
/// (any other text; `store::columns::TrailRequestId`).
fn claim_payment_query<'q, D: Db>(
    sql: &'q str,
    key: KeyRef,
    (fingerprint, payment): (&Fingerprint, &NewPayment),
    claim: Lease,
    cause: &Cause,
) -> Query<'q, D, D::Arguments<'q>> {
    let request_id = request_id_of(cause);
    let started = StartedKey {
        key,
        movement: (Operation::PayBill, payment.payment_id),
        fingerprint,
        claim,
        kept_for: payment.key_kept_for,
    };
    bind_started(sqlx::query(sql), &started)
        .arg(payment.bill_id.clone())
        .arg(payment.amount_paise)
        .arg(payment.payer_vpa.clone())
        .arg(payment.bank_reference.clone())
        .arg(request_id.uuid)
        .arg(trace_id_of(cause))
        .arg(request_id.text)
}

/// The bank's final word's statement with its parameters, numbered alike on both databases:
/// `$1` movement id, `$2` user, `$3` status, `$4` decline reason, `$5` key, `$6` request id (a
/// UUID), `$7` trace id, `$8` request id (any other text), `$9` the event's words
/// ([`FinalOutcome::describe`]). PostgreSQL's adds the announcement's `$10`, `$11`.
fn finish_query<'q, D: Db>(
    sql: &'q str,
    key: KeyRef,
    movement_id: Uuid,
    result: &FinalOutcome,
    cause: &Cause,
) -> Query<'q, D, D::Arguments<'q>> {
    let (status, reason) = result.status_and_reason();
    let request_id = request_id_of(cause);
    sqlx::query(sql)
        .arg(movement_id)
        .arg(Subject::of(&key.user))
        .arg(Label(status))
        .arg(reason.map(str::to_owned))
        .arg(key.key)
        .arg(request_id.uuid)
        .arg(trace_id_of(cause))
        .arg(request_id.text)
        .arg(result.describe())
}

/// The request id an event of `cause` is recorded with, as the trail's two columns.
fn request_id_of(cause: &Cause) -> TrailRequestId {
    TrailRequestId::of(cause.request_id.as_ref().map(RequestId::as_str))
}

/// The trace id an event of `cause` is recorded with, as the column's 16 bytes.
fn trace_id_of(cause: &Cause) -> Option<Vec<u8>> {
    cause.trace_id.map(|id| id.to_bytes().to_vec())
}
