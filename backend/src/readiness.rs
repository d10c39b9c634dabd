//! Readiness: whether the database replies, is the primary, and replicates commits as
//! `DATABASE_REPLICATION` requires ([`crate::durability`]), checked by one background task once
//! a second and never by the request that asks, so a probe (or an attacker polling `GET
//! /readyz`) costs no database connection and cannot starve the requests that need one. The
//! public `/readyz` replies from the last check; the admin listener's shows its details.
//!
//! From SIGTERM on ([`Readiness::start_draining`]) it replies not ready whatever the database
//! says, so balancers stop sending requests while the backend still serves them
//! (`config::drain`).

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use serde::Serialize;
use time::OffsetDateTime;

use crate::durability::{self, Replication, Verdict};
use crate::store::SharedStore;

/// How long one check waits for the database.
pub const CHECK_TIMEOUT: Duration = Duration::from_millis(800);

/// The last check's result.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// Whether the database replied.
    pub ready: bool,
    /// Why not, if not.
    pub problem: Option<String>,
    /// Ready, but commits are not replicated now (`DATABASE_REPLICATION=synchronous` with no
    /// synchronous standby): why.
    pub degraded: Option<String>,
    /// How many standbys acknowledge commits, where the database says (PostgreSQL).
    pub synchronous_standbys: Option<u32>,
    /// When the check ran.
    #[serde(with = "time::serde::rfc3339")]
    pub checked_at: OffsetDateTime,
    /// How long the database took to reply, in milliseconds.
    pub ping_ms: u128,
}

/// The readiness the listeners report, as the last check left it.
#[derive(Debug)]
pub struct Readiness {
    last: Mutex<Check>,
    required: Replication,
    draining: AtomicBool,
}

/// Why a draining backend is not ready.
pub const DRAINING: &str = "shutting down: serving the requests already sent, taking no more";

impl Readiness {
    /// Ready: the application was just built, so its database replied (the migrations ran)
    /// and was as durable as `required` says (start-up checked).
    pub fn new(required: Replication) -> Readiness {
        Readiness {
            last: Mutex::new(Check {
                ready: true,
                problem: None,
                degraded: None,
                synchronous_standbys: None,
                checked_at: OffsetDateTime::now_utc(),
                ping_ms: 0,
            }),
            required,
            draining: AtomicBool::new(false),
        }
    }

    /// The last check; not ready once draining.
    pub fn current(&self) -> Check {
        let mut check = self
            .last
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if self.draining.load(Ordering::Relaxed) {
            check.ready = false;
            check.problem = Some(DRAINING.to_owned());
        }
        check
    }

    /// From now on, not ready: the backend is stopping.
    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::Relaxed);
    }

    /// Pings the database and reads its replication (together bounded by [`CHECK_TIMEOUT`]),
    /// and records the result; logs when the problem, or the degradation, changes.
    pub async fn check(&self, store: &SharedStore) {
        let started = std::time::Instant::now();
        let looked = tokio::time::timeout(CHECK_TIMEOUT, async {
            store.ping().await?;
            store.replication().await
        })
        .await;
        let (verdict, synchronous_standbys) = match looked {
            Ok(Ok(state)) => (
                durability::judge(self.required, state.as_ref()),
                state.map(|state| state.synchronous_standbys),
            ),
            Ok(Err(error)) => (Verdict::Unfit(error.to_string()), None),
            Err(_) => (
                Verdict::Unfit(format!("no reply within {CHECK_TIMEOUT:?}")),
                None,
            ),
        };
        let (problem, degraded) = match verdict {
            Verdict::Durable => (None, None),
            Verdict::Degraded(reason) => (None, Some(reason)),
            Verdict::Unfit(reason) => (Some(reason), None),
        };
        let check = Check {
            ready: problem.is_none(),
            problem,
            degraded,
            synchronous_standbys,
            checked_at: OffsetDateTime::now_utc(),
            ping_ms: started.elapsed().as_millis(),
        };
        let previous = std::mem::replace(
            &mut *self.last.lock().unwrap_or_else(PoisonError::into_inner),
            check.clone(),
        );
        if check.problem != previous.problem
            && let Some(problem) = &check.problem
        {
            tracing::warn!(problem, "not ready");
        }
        if check.degraded != previous.degraded
            && let Some(degraded) = &check.degraded
        {
            tracing::warn!(degraded, "commits are not replicated now");
        }
        if check.ready && !previous.ready {
            tracing::info!("ready again");
        }
    }
}

/// Checks every `interval` until `shutdown` resolves.
pub async fn run_until_stopped(
    readiness: std::sync::Arc<Readiness>,
    store: SharedStore,
    interval: Duration,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    loop {
        readiness.check(&store).await;
        tokio::select! {
            () = &mut shutdown => return,
            () = tokio::time::sleep(interval) => {}
        }
    }
}
