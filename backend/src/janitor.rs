//! The janitor: deletes idempotency keys past the expiry written on their rows at their claim
//! (SPEC §5, invariant 6),
//! and the audit trail of expired keys `AUDIT_TRAIL_KEEP_DAYS` after that (SPEC §8).
//!
//! Only finished keys expire (an unfinished one may hide a debit); payments and refunds are
//! kept for ever, only the key rows go. Each step deletes one bounded batch oldest-first (with
//! `SKIP LOCKED` on PostgreSQL, by rowid on SQLite), so a large backlog is worked off in many
//! short statements that never hold locks long enough to block claims.

use std::future::Future;
use std::time::Duration;

use crate::state::AppState;
use crate::store::StoreError;

/// How many keys one step deletes at most.
pub const EXPIRY_BATCH_SIZE: i64 = 5_000;

/// What one janitor step did.
#[derive(Debug, PartialEq, Eq)]
pub enum Sweep {
    /// This many keys were deleted; there may be more.
    Deleted(u64),
    /// Nothing was expired.
    NothingExpired,
}

/// One janitor step: deletes one batch of expired keys.
pub async fn try_expire_batch(state: &AppState, batch_size: i64) -> Result<Sweep, StoreError> {
    let deleted = state.expiry().expire_batch(batch_size).await?;
    state.metrics.keys_expired.inc_by(deleted);
    Ok(match deleted {
        0 => Sweep::NothingExpired,
        n => Sweep::Deleted(n),
    })
}

/// Deletes every expired key, batch after batch, then the trail events kept past their keys;
/// returns how many keys.
pub async fn expire_all(state: &AppState, batch_size: i64) -> Result<u64, StoreError> {
    let mut total = 0;
    while let Sweep::Deleted(n) = try_expire_batch(state, batch_size).await? {
        total += n;
    }
    let trail_kept_for = state.policy.keep_keys_for + state.trail_kept_after_key;
    let mut events = 0;
    loop {
        let deleted = state
            .expiry()
            .expire_events_batch(trail_kept_for, batch_size)
            .await?;
        events += deleted;
        if deleted == 0 {
            break;
        }
    }
    if events > 0 {
        tracing::info!(events, "audit trail events of long-expired keys deleted");
    }
    Ok(total)
}

/// Sweeps every `interval` until `shutdown` resolves.
pub async fn run_until_stopped(
    state: AppState,
    interval: Duration,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    loop {
        match expire_all(&state, EXPIRY_BATCH_SIZE).await {
            Ok(0) => {}
            Ok(deleted) => tracing::info!(deleted, "expired idempotency keys deleted"),
            Err(error) => tracing::warn!(%error, "janitor sweep failed"),
        }
        tokio::select! {
            () = &mut shutdown => return,
            () = tokio::time::sleep(interval) => {}
        }
    }
}
