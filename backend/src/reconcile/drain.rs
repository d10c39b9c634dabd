//! The reconciler's loop: drains the keys due for a bank look-up, oldest first, with up to
//! [`ReconcileBounds::concurrency`] look-ups at once and no more than
//! [`ReconcileBounds::lookups_per_second`] started per second.
//!
//! Each round trip to the database takes as many due keys as there are free places (one
//! `UPDATE … LIMIT n`, `SKIP LOCKED` on PostgreSQL), each under a lease, so reconcilers on
//! every replica drain one backlog together without ever holding the same key. Look-ups also
//! count against `MAX_BANK_CALLS`, so a backlog never crowds out customers' payments beyond
//! that bound. After an hour-long bank incident the backlog is thousands of `unknown` keys,
//! each a customer waiting on 503 outcome-pending: one look-up at a time would keep them
//! waiting for most of another hour.

use std::future::Future;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::{Instant, MissedTickBehavior};

use super::{readable, refresh_age_gauges, resolve_leased};
use crate::domain::Cause;
use crate::state::AppState;
use crate::store::LeasedKey;

/// Reconciles until `shutdown` resolves, pausing `idle_pause` whenever nothing is due or the
/// database is away; then lets the look-ups in flight finish and save. Also refreshes the
/// oldest-key-age gauges.
pub async fn run_until_stopped(
    state: AppState,
    idle_pause: Duration,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let bounds = state.limits.reconcile;
    let mut pace = tokio::time::interval(Duration::from_secs(1) / bounds.lookups_per_second);
    pace.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut running = JoinSet::new();
    let mut gauges_refreshed: Option<Instant> = None;
    loop {
        let free = bounds.concurrency - running.len();
        let took = match state
            .leases()
            .lease_due(state.policy.stuck_after, free)
            .await
        {
            Ok(due) => {
                let took = due.len();
                for leased in due.into_iter().filter_map(|due| readable(&state, due)) {
                    pace.tick().await;
                    running.spawn(resolve_one(state.clone(), leased));
                }
                took
            }
            Err(error) => {
                tracing::warn!(%error, "could not take due keys");
                0
            }
        };
        // The age gauges matter most during a backlog, so they are refreshed then too, at most
        // once per idle pause, not only when the reconciler runs out of work.
        if took < free || gauges_refreshed.is_none_or(|at| at.elapsed() >= idle_pause) {
            refresh_age_gauges(&state).await;
            gauges_refreshed = Some(Instant::now());
        }
        // Every place taken: wait for one to free up. Fewer due than places: nothing more is
        // due now; look again when a look-up ends (it may have been the last) or after a pause.
        let wait_at_most = (took < free).then_some(idle_pause);
        tokio::select! {
            () = &mut shutdown => break,
            () = place_freed(&mut running, wait_at_most) => {}
        }
    }
    while running.join_next().await.is_some() {}
}

/// Resolves once a running look-up ends (and collects any others that ended), or once
/// `wait_at_most` has passed; at once if one is given and nothing runs.
async fn place_freed(running: &mut JoinSet<()>, wait_at_most: Option<Duration>) {
    let one_ends = async {
        if running.join_next().await.is_none() {
            std::future::pending::<()>().await;
        }
        while running.try_join_next().is_some() {}
    };
    match wait_at_most {
        None => one_ends.await,
        Some(pause) => {
            let _ = tokio::time::timeout(pause, one_ends).await;
        }
    }
}

async fn resolve_one(state: AppState, leased: LeasedKey) {
    if let Err(error) = resolve_leased(&state, leased, &Cause::background()).await {
        tracing::warn!(%error, "reconciling a key failed; it is taken again later");
    }
}
