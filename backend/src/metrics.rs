//! Prometheus metrics, owned by the application (not a process-wide global), so several apps in
//! one test process each count their own. Served as OpenMetrics text at `GET /metrics`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

/// Labels naming an operation.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OperationLabels {
    /// `pay_bill` or `refund_payment`.
    pub operation: &'static str,
}

/// Labels of an HTTP request.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// The route template (`/v1/bills/{bill_id}/pay`), or `unmatched`.
    pub route: String,
    /// The method.
    pub method: String,
    /// The status code.
    pub status: u16,
}

/// Labels of a bank call.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BankCallLabels {
    /// `debit`, `refund` or `look_up`.
    pub call: &'static str,
    /// `succeeded`, `declined`, `unknown`, `never_seen` or `failed`.
    pub outcome: &'static str,
}

/// Labels of a final outcome.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// `pay_bill` or `refund_payment`.
    pub operation: &'static str,
    /// `succeeded`, `declined`, `unknown`, `released` or `void`.
    pub outcome: &'static str,
}

/// Every metric the backend exports.
#[derive(Default)]
pub struct Metrics {
    registry: Registry,
    /// Requests served, by route, method and status.
    pub http_requests: Family<RequestLabels, Counter>,
    /// Keys claimed (new work started).
    pub claims: Family<OperationLabels, Counter>,
    /// Saved answers replayed.
    pub replays: Family<OperationLabels, Counter>,
    /// Of those, replayed from memory without a database read ([`crate::replay_cache`]).
    pub replays_from_memory: Family<OperationLabels, Counter>,
    /// 409 answers: the first attempt was still running.
    pub conflicts: Family<OperationLabels, Counter>,
    /// 422 answers: a key reused with a different request.
    pub mismatches: Family<OperationLabels, Counter>,
    /// Calls to the bank, by call and outcome.
    pub bank_calls: Family<BankCallLabels, Counter>,
    /// Final outcomes written, by operation and outcome.
    pub outcomes: Family<OutcomeLabels, Counter>,
    /// Unfinished keys taken up by reconciliation.
    pub stuck_keys_found: Counter,
    /// Unfinished keys resolved, by operation and outcome.
    pub keys_resolved: Family<OutcomeLabels, Counter>,
    /// Bank look-ups that got no usable answer.
    pub lookup_failures: Counter,
    /// Due keys whose rows could not be read (corrupt), skipped by reconciliation.
    pub corrupt_keys_skipped: Counter,
    /// Movements the bank executed after their claim was released (a first call that arrived
    /// late), found and recorded by a released key's later look-up.
    pub late_movements_found: Family<OperationLabels, Counter>,
    /// Expired keys deleted.
    pub keys_expired: Counter,
    /// API requests answered 503 at once because `MAX_CONCURRENT_REQUESTS` were in flight.
    pub requests_shed: Counter,
    /// Requests that began waiting for their key's first attempt (`Prefer: wait`).
    pub waits_started: Counter,
    /// Waits that ended with an answer other than 409: the replay, or the outcome as it stood.
    pub waits_answered: Counter,
    /// Waits whose time ran out: answered 409.
    pub waits_timed_out: Counter,
    /// Requests that asked to wait when `MAX_WAITING_REQUESTS` were waiting: answered 409.
    pub waits_refused: Counter,
    /// Requests waiting now.
    pub waiting_requests: Gauge,
    /// Finished answers kept in memory, read when metrics are scraped.
    pub replay_cache_entries: Gauge,
    /// What they weigh in bytes (the bound `REPLAY_CACHE_MAX_BYTES` is on this).
    pub replay_cache_bytes: Gauge,
    /// Times the writer of claims and outcomes (SQLite's group commit) stopped and was started
    /// again, read when metrics are scraped.
    pub store_writer_restarts: Counter,
    /// Standbys acknowledging commits at the last readiness check (0 for SQLite, and for a
    /// PostgreSQL without one), read when metrics are scraped.
    pub database_synchronous_standbys: Gauge,
    /// Age in seconds of the oldest `started` key.
    pub oldest_started_seconds: Gauge<f64, AtomicU64>,
    /// Age in seconds of the oldest `unknown` key.
    pub oldest_unknown_seconds: Gauge<f64, AtomicU64>,
}

impl Metrics {
    /// Creates the metrics and registers them.
    pub fn new() -> Metrics {
        let mut metrics = Metrics::default();
        let registry = &mut metrics.registry;
        registry.register(
            "http_requests",
            "HTTP requests served",
            metrics.http_requests.clone(),
        );
        registry.register("idempotency_claims", "Keys claimed", metrics.claims.clone());
        registry.register(
            "idempotency_replays",
            "Saved answers replayed",
            metrics.replays.clone(),
        );
        registry.register(
            "idempotency_replays_from_memory",
            "Saved answers replayed from memory, without a database read",
            metrics.replays_from_memory.clone(),
        );
        registry.register(
            "idempotency_conflicts",
            "Requests refused with 409 while the first attempt ran",
            metrics.conflicts.clone(),
        );
        registry.register(
            "idempotency_mismatches",
            "Keys reused with a different request (422)",
            metrics.mismatches.clone(),
        );
        registry.register(
            "bank_calls",
            "Calls to the bank",
            metrics.bank_calls.clone(),
        );
        registry.register(
            "payment_outcomes",
            "Final outcomes written",
            metrics.outcomes.clone(),
        );
        registry.register(
            "reconcile_stuck_keys_found",
            "Unfinished keys taken up by reconciliation",
            metrics.stuck_keys_found.clone(),
        );
        registry.register(
            "reconcile_keys_resolved",
            "Unfinished keys resolved by reconciliation",
            metrics.keys_resolved.clone(),
        );
        registry.register(
            "reconcile_lookup_failures",
            "Bank look-ups without a usable answer",
            metrics.lookup_failures.clone(),
        );
        registry.register(
            "reconcile_corrupt_keys_skipped",
            "Due keys whose rows could not be read (corrupt), skipped so the others go on",
            metrics.corrupt_keys_skipped.clone(),
        );
        registry.register(
            "reconcile_late_movements_found",
            "Movements the bank executed after their claim was released",
            metrics.late_movements_found.clone(),
        );
        registry.register(
            "http_requests_shed",
            "API requests shed with 503 at capacity",
            metrics.requests_shed.clone(),
        );
        registry.register(
            "idempotency_waits_started",
            "Requests that began waiting for their key's first attempt (Prefer: wait)",
            metrics.waits_started.clone(),
        );
        registry.register(
            "idempotency_waits_answered",
            "Waits that ended with the first attempt's answer or outcome",
            metrics.waits_answered.clone(),
        );
        registry.register(
            "idempotency_waits_timed_out",
            "Waits whose time ran out (answered 409)",
            metrics.waits_timed_out.clone(),
        );
        registry.register(
            "idempotency_waits_refused",
            "Requests that could not wait: MAX_WAITING_REQUESTS were waiting (answered 409)",
            metrics.waits_refused.clone(),
        );
        registry.register(
            "idempotency_waiting_requests",
            "Requests waiting now for their key's first attempt",
            metrics.waiting_requests.clone(),
        );
        registry.register(
            "idempotency_replay_cache_entries",
            "Finished answers kept in memory",
            metrics.replay_cache_entries.clone(),
        );
        registry.register(
            "idempotency_replay_cache_bytes",
            "What the finished answers kept in memory weigh, in bytes",
            metrics.replay_cache_bytes.clone(),
        );
        registry.register(
            "store_writer_restarts",
            "Times the writer of claims and outcomes (SQLite's group commit) stopped and was started again",
            metrics.store_writer_restarts.clone(),
        );
        registry.register(
            "janitor_keys_expired",
            "Expired keys deleted",
            metrics.keys_expired.clone(),
        );
        registry.register(
            "oldest_started_key_age_seconds",
            "Age of the oldest started key",
            metrics.oldest_started_seconds.clone(),
        );
        registry.register(
            "oldest_unknown_key_age_seconds",
            "Age of the oldest unknown key",
            metrics.oldest_unknown_seconds.clone(),
        );
        registry.register(
            "database_synchronous_standbys",
            "Standbys acknowledging commits synchronously at the last readiness check",
            metrics.database_synchronous_standbys.clone(),
        );
        metrics
    }

    /// The OpenMetrics text of every metric.
    pub fn render(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)
            .expect("writing to a String cannot fail");
        text
    }

    /// Counts a bank call.
    pub fn bank_call(&self, call: &'static str, outcome: &'static str) {
        self.bank_calls
            .get_or_create(&BankCallLabels { call, outcome })
            .inc();
    }

    /// Counts a final outcome.
    pub fn outcome(&self, operation: &'static str, outcome: &'static str) {
        self.outcomes
            .get_or_create(&OutcomeLabels { operation, outcome })
            .inc();
    }

    /// Counts an event of an operation in one of the per-operation families.
    pub fn count(family: &Family<OperationLabels, Counter>, operation: &'static str) {
        family.get_or_create(&OperationLabels { operation }).inc();
    }
}
