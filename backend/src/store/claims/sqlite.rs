//! SQLite's two writes of [`ClaimWrites`]: each a few statements through the group commit
//! (`store::group_commit`), which shares one transaction and one fsync among the writes that
//! arrive together. SQLite cannot `INSERT` inside a `WITH`, so the claim is two `INSERT`s.

use shared::{Fingerprint, Operation};
use sqlx::Sqlite;
use time::OffsetDateTime;
use uuid::Uuid;

use super::ClaimWrites;
use crate::domain::{Cause, EventKind, NewEvent};
use crate::store::error::StoreError;
use crate::store::group_commit::GroupCommit;
use crate::store::sql::{events, keys, movements, outcome};
use crate::store::types::{FinalOutcome, Finished, KeyRef, Lease, NewPayment, PaymentRow};

impl ClaimWrites for Sqlite {
    async fn claim_key_with_pending_payment(
        writer: &GroupCommit,
        key: KeyRef,
        (fingerprint, payment): (&Fingerprint, &NewPayment),
        claim: Lease,
        cause: &Cause,
    ) -> Result<Option<(PaymentRow, OffsetDateTime)>, StoreError> {
        let (fingerprint, payment) = (*fingerprint, payment.clone());
        let claimed = NewEvent::of_claim(
            (key.user.as_i64(), key.key, payment.payment_id),
            EventKind::Claimed,
            None,
            cause,
        );
        writer
            .write(move |conn| {
                Box::pin(async move {
                    let Some(expires_at) = keys::insert_started_key::<Sqlite>(
                        conn,
                        key,
                        (Operation::PayBill, payment.payment_id),
                        &fingerprint,
                        payment.key_kept_for,
                        claim,
                    )
                    .await?
                    else {
                        return Ok(None);
                    };
                    let row =
                        movements::insert_pending_payment::<Sqlite>(conn, key, &payment).await?;
                    events::append::<Sqlite>(conn, &claimed).await?;
                    Ok(Some((row, expires_at)))
                })
            })
            .await
    }

    async fn finish_movement_and_key(
        writer: &GroupCommit,
        key: KeyRef,
        (operation, resource_id): (Operation, Uuid),
        result: &FinalOutcome,
        cause: &Cause,
    ) -> Result<Option<Finished>, StoreError> {
        let (result, cause) = (result.clone(), cause.clone());
        writer
            .write(move |conn| {
                Box::pin(async move {
                    outcome::finish_in::<Sqlite>(
                        conn,
                        key,
                        (operation, resource_id),
                        &result,
                        EventKind::BankAnswered,
                        &cause,
                    )
                    .await
                })
            })
            .await
    }
}
