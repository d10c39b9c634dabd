//! The application state every handler and worker shares: the store, the replay cache, the
//! bank client, the policy, the token verifier and the metrics.

use std::sync::Arc;

use shared::Policy;
use shared::auth::TokenVerifier;
use shared::fingerprint::BodyLimits;
use tokio::sync::Semaphore;

use crate::bank_client::BankClient;
use crate::config::Limits;
use crate::metrics::Metrics;
use crate::readiness::Readiness;
use crate::replay_cache::ReplayCache;
use crate::store::SharedStore;

/// Shared state; cheap to clone.
#[derive(Clone)]
pub struct AppState {
    /// The database.
    pub store: SharedStore,
    /// Finished answers kept in memory, replayed without a database read.
    pub replay_cache: ReplayCache,
    /// The partner bank.
    pub bank: BankClient,
    /// The idempotency policy.
    pub policy: Arc<Policy>,
    /// Checks bearer tokens: the HS256 secret and the token rules.
    pub tokens: Arc<TokenVerifier>,
    /// The metrics.
    pub metrics: Arc<Metrics>,
    /// Size and depth limits for request bodies.
    pub body_limits: BodyLimits,
    /// Deadlines and bounds on requests and bank calls.
    pub limits: Limits,
    /// Whether the database answers, as the background check last found.
    pub readiness: Arc<Readiness>,
    /// One permit per API request being served (`MAX_CONCURRENT_REQUESTS`).
    pub requests_in_flight: Arc<Semaphore>,
    /// One permit per request waiting for its key's first attempt (`MAX_WAITING_REQUESTS`).
    pub waiting_places: Arc<Semaphore>,
}
