//! Readiness: whether the database answers, checked by one background task once a second and
//! never by the request that asks, so a probe (or an attacker polling `GET /readyz`) costs no
//! database connection and cannot starve the requests that need one. The public `/readyz`
//! answers from the last check; the admin listener's shows its details.

use std::future::Future;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use serde::Serialize;
use time::OffsetDateTime;

use crate::store::SharedStore;

/// How long one check waits for the database.
pub const CHECK_TIMEOUT: Duration = Duration::from_millis(800);

/// The last check's result.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// Whether the database answered.
    pub ready: bool,
    /// Why not, if not.
    pub problem: Option<String>,
    /// When the check ran.
    #[serde(with = "time::serde::rfc3339")]
    pub checked_at: OffsetDateTime,
    /// How long the database took to answer, in milliseconds.
    pub ping_ms: u128,
}

/// The readiness the listeners report, as the last check left it.
#[derive(Debug)]
pub struct Readiness {
    last: Mutex<Check>,
}

impl Readiness {
    /// Ready: the application was just built, so its database answered (the migrations ran).
    pub fn new() -> Readiness {
        Readiness {
            last: Mutex::new(Check {
                ready: true,
                problem: None,
                checked_at: OffsetDateTime::now_utc(),
                ping_ms: 0,
            }),
        }
    }

    /// The last check.
    pub fn current(&self) -> Check {
        self.last
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Pings the database (bounded by [`CHECK_TIMEOUT`]) and records the result.
    pub async fn check(&self, store: &SharedStore) {
        let started = std::time::Instant::now();
        let problem = match tokio::time::timeout(CHECK_TIMEOUT, store.ping()).await {
            Ok(Ok(())) => None,
            Ok(Err(error)) => Some(error.to_string()),
            Err(_) => Some(format!("no answer within {CHECK_TIMEOUT:?}")),
        };
        if let Some(problem) = &problem {
            tracing::warn!(problem, "not ready: the database does not answer");
        }
        let check = Check {
            ready: problem.is_none(),
            problem,
            checked_at: OffsetDateTime::now_utc(),
            ping_ms: started.elapsed().as_millis(),
        };
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = check;
    }
}

impl Default for Readiness {
    fn default() -> Self {
        Readiness::new()
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
