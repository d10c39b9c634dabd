//! [`Leases`] on either database: reconciliation takes a key under a lease written on its row
//! (`store::sql::keys`), so no transaction is open across a bank look-up and no two reconcilers
//! ever hold one key, and writes the bank's reply only while it still holds the lease. Beside
//! it, the bank's other final words: a status check counted against the rail's rules, and a
//! line of the settlement file. Every statement here is shared by both databases.

use std::time::Duration;

use async_trait::async_trait;
use bank_api::settlement::{Settled, SettlementRow};
use shared::api::MovementStatus;
use shared::{KeyState, Operation};
use time::OffsetDateTime;

use super::db::Db;
use super::error::StoreError;
use super::slices::Leases;
use super::sql::{events, keys, movements, outcome, pace};
use super::sql_store::{SqlStore, claim_event};
use super::types::{
    CheckSlot, FinalOutcome, KeyRef, Lease, LeasedKey, SavedMovement, Settlement, UnfinishedKeys,
};
use crate::domain::{Cause, EventKind};

#[async_trait]
impl<D: Db> Leases for SqlStore<D> {
    async fn lease_key(
        &self,
        key: KeyRef,
        asked_by: Option<&Cause>,
    ) -> Result<Option<LeasedKey>, StoreError> {
        let lease = Lease::for_reconciler();
        let Some(cause) = asked_by else {
            let mut conn = self.pool.acquire().await?;
            let Some(taken) = keys::lease_key::<D>(&mut conn, key, lease).await? else {
                return Ok(None);
            };
            return self.with_movement(&mut conn, taken, lease).await.map(Some);
        };
        let mut tx = D::begin_write(&self.pool).await?;
        let Some(taken) = keys::lease_key::<D>(&mut tx, key.clone(), lease).await? else {
            return Ok(None);
        };
        let detail = "asked the bank now, by the claim's reference";
        let asked = claim_event(
            key,
            taken.1.movement_id,
            (EventKind::OperatorLookup, detail),
            cause,
        );
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
        result: &FinalOutcome,
        cause: &Cause,
    ) -> Result<Option<SavedMovement>, StoreError> {
        let LeasedKey {
            key, stored, owner, ..
        } = leased;
        let event = if stored.record.state == KeyState::Released {
            EventKind::LateDebitFound
        } else {
            EventKind::Resolved
        };
        let mut tx = self.write_giving_back_lease(key.clone(), owner).await?;
        let finished = outcome::finish_in::<D>(
            &mut tx,
            key.clone(),
            (stored.operation, stored.movement_id),
            result,
            event,
            cause,
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
        cause: &Cause,
    ) -> Result<(), StoreError> {
        let LeasedKey {
            key, stored, owner, ..
        } = leased;
        let mut tx = D::begin_write(&self.pool).await?;
        let released =
            keys::set_released::<D>(&mut tx, key.clone(), stored.movement_id, owner, check_after)
                .await?;
        if !released {
            return Err(StoreError::LeaseLost);
        }
        let detail = "the bank never saw the reference; a retry claims the key again";
        let event = claim_event(
            key.clone(),
            stored.movement_id,
            (EventKind::Released, detail),
            cause,
        );
        events::append::<D>(&mut tx, &event).await?;
        self.commit_announced(tx, key).await
    }

    async fn void_leased(&self, leased: LeasedKey, cause: &Cause) -> Result<(), StoreError> {
        let LeasedKey {
            key, stored, owner, ..
        } = leased;
        let mut tx = self.write_giving_back_lease(key.clone(), owner).await?;
        let user_id = key.user.clone();
        movements::set_void::<D>(&mut tx, stored.operation, user_id, stored.movement_id).await?;
        keys::end_checks::<D>(&mut tx, key.clone(), stored.movement_id).await?;
        let detail = "the last check found nothing at the bank: no money moved";
        let event = claim_event(key, stored.movement_id, (EventKind::Voided, detail), cause);
        events::append::<D>(&mut tx, &event).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn look_again(
        &self,
        leased: LeasedKey,
        wait: Duration,
        failed: bool,
        cause: &Cause,
    ) -> Result<(), StoreError> {
        let detail = if failed {
            format!(
                "the bank could not be asked; next look-up in {}s",
                wait.as_secs()
            )
        } else {
            format!("no final reply yet; next look-up in {}s", wait.as_secs())
        };
        let mut tx = D::begin_write(&self.pool).await?;
        let (key, owner) = (leased.key, leased.owner);
        let scheduled =
            keys::schedule_lookup::<D>(&mut tx, key.clone(), owner, wait, i16::from(failed))
                .await?;
        if !scheduled {
            return Err(StoreError::LeaseLost);
        }
        let movement_id = leased.stored.movement_id;
        let event = claim_event(key, movement_id, (EventKind::LookedUp, detail), cause);
        events::append::<D>(&mut tx, &event).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn take_status_check(
        &self,
        leased: &LeasedKey,
        at_most: u16,
        (spacing, queue_at_most): (Duration, Duration),
    ) -> Result<Option<CheckSlot>, StoreError> {
        let mut tx = D::begin_write(&self.pool).await?;
        let Some(wait) = pace::take_slot::<D>(&mut tx, spacing, queue_at_most).await? else {
            return Ok(Some(CheckSlot::PaceFull(queue_at_most)));
        };
        if !keys::count_status_check::<D>(&mut tx, leased.key.clone(), leased.owner, at_most)
            .await?
        {
            return Ok(None);
        }
        tx.commit().await?;
        Ok(Some(CheckSlot::SendAfter(wait)))
    }

    async fn await_settlement(
        &self,
        leased: LeasedKey,
        due_in: Duration,
        cause: &Cause,
    ) -> Result<OffsetDateTime, StoreError> {
        let LeasedKey {
            key, stored, owner, ..
        } = leased;
        let mut tx = D::begin_write(&self.pool).await?;
        let this = (stored.movement_id, owner);
        let Some(due_at) = keys::await_settlement::<D>(&mut tx, key.clone(), this, due_in).await?
        else {
            return Err(StoreError::LeaseLost);
        };
        if stored.settlement_due_at.is_some() {
            tx.commit().await?;
            return Ok(due_at.0);
        }
        let detail = format!(
            "every status check the rail allows was made with no final reply; the bank's \
             settlement file is due in {} min",
            due_in.as_secs() / 60
        );
        let event = claim_event(
            key.clone(),
            stored.movement_id,
            (EventKind::LookedUp, &detail),
            cause,
        );
        events::append::<D>(&mut tx, &event).await?;
        self.commit_announced(tx, key).await?;
        Ok(due_at.0)
    }

    async fn settle(
        &self,
        batch: &[SettlementRow],
        cause: &Cause,
    ) -> Result<Vec<Settlement>, StoreError> {
        let mut tx = D::begin_write(&self.pool).await?;
        let mut settled = Vec::with_capacity(batch.len());
        for row in batch {
            settled.push(settle_in::<D>(&mut tx, row, cause).await?);
        }
        tx.commit().await?;
        Ok(settled)
    }

    async fn unfinished_keys(&self) -> Result<UnfinishedKeys, StoreError> {
        let mut conn = self.pool.acquire().await?;
        let (started, unknown, awaiting, now) = keys::oldest_unfinished::<D>(&mut conn).await?;
        let age = |claimed: Option<super::columns::Timestamp>| {
            claimed.map_or(Duration::ZERO, |claimed| {
                (now.0 - claimed.0).try_into().unwrap_or(Duration::ZERO)
            })
        };
        Ok(UnfinishedKeys {
            oldest_started: age(started),
            oldest_unknown: age(unknown),
            awaiting_settlement: u64::try_from(awaiting).unwrap_or(0),
        })
    }
}

/// Applies one line of the settlement file within the batch's transaction.
async fn settle_in<D: Db>(
    conn: &mut D::Connection,
    row: &SettlementRow,
    cause: &Cause,
) -> Result<Settlement, StoreError> {
    let Some(ours) = movements::select_by_reference::<D>(conn, &row.reference).await? else {
        return Ok(Settlement::UnknownReference);
    };
    let (user_id, movement_id) = (ours.user_id(), ours.id());
    let Some(key) = keys::key_of_movement::<D>(conn, user_id, movement_id).await? else {
        let gone = format!("{} has no key any more; not applied", row.reference);
        return Ok(Settlement::Mismatched(gone));
    };
    Ok(match settlement_against(&ours, row) {
        Ok(result) if ours.status() == MovementStatus::Pending => {
            let (operation, event) = (ours.operation(), EventKind::Resolved);
            let this = (operation, movement_id);
            outcome::finish_in::<D>(conn, key, this, &result, event, cause).await?;
            Settlement::Resolved
        }
        Ok(_) => Settlement::AlreadyFinal,
        Err(mismatch) => {
            let detail = format!("settlement file: {mismatch}; not applied");
            let event = claim_event(key, movement_id, (EventKind::LedgerChecked, detail), cause);
            events::append::<D>(conn, &event).await?;
            Settlement::Mismatched(mismatch)
        }
    })
}

/// What the bank's line says of `ours`, as the final outcome to save, or how it disagrees:
/// another amount, a word of the other operation, or a final word that contradicts ours.
fn settlement_against(ours: &SavedMovement, row: &SettlementRow) -> Result<FinalOutcome, String> {
    if ours.amount_paise() != i64::try_from(row.amount_paise).unwrap_or(i64::MAX) {
        return Err(format!(
            "{} settled {} paise, ours is {}",
            row.reference,
            row.amount_paise,
            ours.amount_paise()
        ));
    }
    let fits = match ours.operation() {
        Operation::PayBill => matches!(row.status, Settled::Debited | Settled::Declined),
        Operation::RefundPayment => matches!(row.status, Settled::Refunded | Settled::Rejected),
    };
    if !fits {
        return Err(format!(
            "{} settled as {}, which a {} cannot be",
            row.reference,
            row.status.as_str(),
            ours.operation().name()
        ));
    }
    let agrees = match ours.status() {
        MovementStatus::Pending => true,
        MovementStatus::Succeeded => row.status.moved(),
        MovementStatus::Declined | MovementStatus::Void => !row.status.moved(),
    };
    if !agrees {
        return Err(format!(
            "{} settled as {}, ours is {}",
            row.reference,
            row.status.as_str(),
            ours.status().name()
        ));
    }
    Ok(if row.status.moved() {
        FinalOutcome::Succeeded
    } else {
        FinalOutcome::Declined {
            reason: format!("{} in the bank's settlement file", row.status.as_str()),
        }
    })
}
