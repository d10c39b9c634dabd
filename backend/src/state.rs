//! The application state every handler and worker shares: the store, the replay cache, the
//! bank client, the policy, the token verifiers and the edge's proof, the metrics and the audit trail's writer.

use std::sync::Arc;

use shared::Policy;
use shared::fingerprint::BodyLimits;
use tokio::sync::Semaphore;

use crate::bank::Bank;
use crate::config::{AllowedOrigins, Limits};
use crate::identity::{CustomerTokens, EdgeProofs, OperatorTokens};
use crate::ledger_check_bounds::LedgerCheckBounds;
use crate::metrics::Metrics;
use crate::readiness::Readiness;
use crate::replay_cache::ReplayCache;
use crate::store::{Claims, Expiry, Leases, OperatorReads, SharedStore, TrailWrites};
use crate::trail::Appender;

/// Shared state: one allocation, so the clone every middleware and task takes is one atomic
/// increment (it was a dozen, and a noticeable share of a replay's cost). Its parts are read
/// through [`Deref`](std::ops::Deref): `state.store`, `state.policy`, …
#[derive(Clone)]
pub struct AppState(Arc<Parts>);

impl AppState {
    /// The state made of `parts`.
    pub fn new(parts: Parts) -> AppState {
        AppState(Arc::new(parts))
    }
}

impl Parts {
    /// The store's slice the payment flows use.
    pub fn claims(&self) -> &dyn Claims {
        &*self.store
    }

    /// The store's slice reconciliation uses (and whoever asks the bank at once).
    pub fn leases(&self) -> &dyn Leases {
        &*self.store
    }

    /// The store's slice the janitor uses.
    pub fn expiry(&self) -> &dyn Expiry {
        &*self.store
    }

    /// The store's slice the operator API reads.
    pub fn operator_reads(&self) -> &dyn OperatorReads {
        &*self.store
    }

    /// The store's slice for the audit trail's own writes.
    pub fn trail_writes(&self) -> &dyn TrailWrites {
        &*self.store
    }
}

impl std::ops::Deref for AppState {
    type Target = Parts;

    fn deref(&self) -> &Parts {
        &self.0
    }
}

/// What the state holds.
pub struct Parts {
    /// The database, every slice of it; each part of the backend reads its own slice through
    /// the accessors below ([`Parts::claims`], [`Parts::leases`], …).
    pub store: SharedStore,
    /// Finished replies kept in memory, replayed without a database read.
    pub replay_cache: ReplayCache,
    /// The partner bank, within its bounds and behind its breaker.
    pub bank: Bank,
    /// The idempotency policy.
    pub policy: Arc<Policy>,
    /// Checks customers' bearer tokens: their keys (or secret) and rules.
    pub tokens: Arc<CustomerTokens>,
    /// Checks that `/v1` requests came through the edge; `None` where that is not required.
    pub edge_proofs: Option<Arc<EdgeProofs>>,
    /// The metrics.
    pub metrics: Arc<Metrics>,
    /// Size and depth limits for request bodies.
    pub body_limits: BodyLimits,
    /// Deadlines and bounds on requests and bank calls.
    pub limits: Limits,
    /// The origins whose pages may call the public API from a browser (`http::cors`).
    pub cors_allowed_origins: AllowedOrigins,
    /// Whether the database replies, as the background check last found.
    pub readiness: Arc<Readiness>,
    /// One permit per API request being served (`MAX_CONCURRENT_REQUESTS`).
    pub requests_in_flight: Arc<Semaphore>,
    /// One permit per request waiting for its key's first attempt (`MAX_WAITING_REQUESTS`).
    pub waiting_places: Arc<Semaphore>,
    /// Checks operator tokens (the console and its API).
    pub operator_tokens: Arc<OperatorTokens>,
    /// How much of the bank the operators' ledger checks may take.
    pub ledger_checks: Arc<LedgerCheckBounds>,
    /// How long a key's audit trail outlives the key.
    pub trail_kept_after_key: std::time::Duration,
    /// Writes the audit trail's observations (replays, refusals, waits).
    pub trail: Appender,
    /// The secrets the bank signs its callbacks with, the current first; empty: none accepted.
    pub bank_callback_secrets: Arc<Vec<secret_settings::SecretString>>,
    /// The zone of the rail's quiet hours and settlement day (`status_checks.quiet_hours_zone`),
    /// resolved at start-up.
    pub status_check_zone: jiff::tz::TimeZone,
}
