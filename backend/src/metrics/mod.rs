//! Prometheus metrics, owned by the application (not a process-wide global), so several apps in
//! one test process each count their own. Served as OpenMetrics text at `GET /metrics`; every
//! one, with its type and meaning, is listed in docs/metrics.md, generated from this registry
//! ([`metric_list`]; a test fails when the two differ).
//!
//! Names follow Prometheus' conventions: one application prefix ([`METRIC_PREFIX`], added by the
//! registry), base units (`_seconds`, `_bytes`), counters end in `_total` (added by the
//! encoder), histograms give `_bucket`, `_sum` and `_count`.

mod list;

pub use list::{MetricEntry, metric_list, metric_table, unknown_metrics};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::TypedMetric;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Metric, Registry};
use std::sync::atomic::AtomicU64;
use std::time::Duration;

/// The prefix of every metric's name: `payments_http_requests_total`, not `http_requests_total`,
/// so the backend's series never collide with another application's in a shared Prometheus.
pub const METRIC_PREFIX: &str = "payments";

/// The upper bounds of the latency histograms' buckets, in seconds: 1 ms to 30 s, so a bank
/// that slows from 100 ms to its 5 s timeout moves through several buckets.
const LATENCY_BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// The buckets of the time keys spend unresolved, in seconds: 1 s to a day.
const RESOLUTION_BUCKETS: [f64; 10] = [
    1.0,
    5.0,
    15.0,
    60.0,
    300.0,
    900.0,
    3_600.0,
    4.0 * 3_600.0,
    12.0 * 3_600.0,
    86_400.0,
];

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

/// Checks per movement: the rail allows three; more means a policy that allows more.
const CHECKS_PER_MOVEMENT_BUCKETS: [f64; 8] = [1.0, 2.0, 3.0, 4.0, 6.0, 10.0, 20.0, 50.0];

fn resolution_histogram() -> Histogram {
    Histogram::new(RESOLUTION_BUCKETS)
}

/// A family of latency histograms.
pub type Latencies<Labels> = Family<Labels, Histogram, fn() -> Histogram>;

/// Labels of a request's duration: the status by class, so a histogram per route and method
/// stays a handful of series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DurationLabels {
    /// The route template (`/v1/bills/{bill_id}/pay`), or `unmatched`.
    pub route: String,
    /// The method.
    pub method: String,
    /// `2xx`, `3xx`, `4xx` or `5xx`.
    pub status_class: &'static str,
}

/// Labels of a database write.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    /// `claim` (the key, its movement and the trail's event, before the bank call) or
    /// `finish` (the bank's outcome and the key's `done`).
    pub write: &'static str,
}

/// Labels of a key settled by reconciliation.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResolvedLabels {
    /// `pay_bill` or `refund_payment`.
    pub operation: &'static str,
    /// The state it was found in: `unknown`, `started` or `released`.
    pub was: &'static str,
}

/// Labels of the database pool's connections.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PoolLabels {
    /// `in_use` or `idle`.
    pub state: &'static str,
}

/// Labels of the build.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    /// The backend's version (its crate version).
    pub version: &'static str,
}

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

/// Labels of a change of the bank breaker's state.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BreakerLabels {
    /// The state it changed to: `closed`, `open` or `half_open`.
    pub to: &'static str,
}

/// Labels of a bank callback's reply.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CallbackLabels {
    /// `applied`, `already_final`, `mismatch`, `unknown_reference`, `refused` (signature or
    /// body) or `closed` (no secret set).
    pub result: &'static str,
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
pub struct Metrics {
    registry: Registry,
    /// What the registry holds, filled by the same calls ([`Described::register`]).
    list: Vec<MetricEntry>,
    /// How long requests took, by route template, method and status class.
    pub http_request_duration: Latencies<DurationLabels>,
    /// How long bank calls took, by call and outcome.
    pub bank_call_duration: Latencies<BankCallLabels>,
    /// How long the claim's and the outcome's writes took.
    pub database_write_duration: Latencies<WriteLabels>,
    /// For keys settled by reconciliation: the time from their claim to the taking of the key
    /// whose look-up settled them (both on the database's clock; the look-up itself not counted).
    pub reconcile_claim_to_final: Family<ResolvedLabels, Histogram, fn() -> Histogram>,
    /// Money-moving calls to the bank in flight now (of `MAX_BANK_CALLS`), read when metrics are
    /// scraped.
    pub bank_calls_in_flight: Gauge,
    /// Look-ups at the bank in flight now (of `MAX_BANK_LOOKUPS`), read when metrics are scraped.
    pub bank_look_ups_in_flight: Gauge,
    /// The bank breaker's state: 0 closed, 1 open, 2 half-open (probing).
    pub bank_breaker_state: Gauge,
    /// The bank breaker's changes of state, by the state it changed to.
    pub bank_breaker_transitions: Family<BreakerLabels, Counter>,
    /// New payments and refunds refused by the open breaker, before their claim.
    pub bank_breaker_refusals: Counter,
    /// The database pool's connections, by state, read when metrics are scraped.
    pub database_pool_connections: Family<PoolLabels, Gauge>,
    /// The pool's bound.
    pub database_pool_max_connections: Gauge,
    /// 1, labelled with the version.
    pub build_info: Family<BuildLabels, Gauge>,
    /// 1 when `DATABASE_REPLICATION` requires a synchronous standby, 0 when not (one server).
    pub database_replication_required: Gauge,
    /// Requests served, by route, method and status.
    pub http_requests: Family<RequestLabels, Counter>,
    /// Keys claimed (new work started).
    pub claims: Family<OperationLabels, Counter>,
    /// Saved replies replayed.
    pub replays: Family<OperationLabels, Counter>,
    /// Of those, replayed from memory without a database read ([`crate::replay_cache`]).
    pub replays_from_memory: Family<OperationLabels, Counter>,
    /// 409 replies: the first attempt was still running.
    pub conflicts: Family<OperationLabels, Counter>,
    /// 422 replies: a key reused with a different request.
    pub mismatches: Family<OperationLabels, Counter>,
    /// Calls to the bank, by call and outcome.
    pub bank_calls: Family<BankCallLabels, Counter>,
    /// Final outcomes written, by operation and outcome.
    pub outcomes: Family<OutcomeLabels, Counter>,
    /// Unfinished keys taken up by reconciliation.
    pub stuck_keys_found: Counter,
    /// Unfinished keys resolved, by operation and outcome.
    pub keys_resolved: Family<OutcomeLabels, Counter>,
    /// Bank look-ups that got no usable reply.
    pub lookup_failures: Counter,
    /// Status checks the bank refused as breaking the rail's rules (a defect in our pacing).
    pub status_checks_refused: Counter,
    /// Status checks put off because the deployment's pace was spoken for.
    pub status_checks_paced: Counter,
    /// How many status checks each movement settled by a check (or sent to settlement) took.
    pub status_checks_per_movement: Histogram,
    /// Movements whose checks ran out with no final reply, left to the settlement file.
    pub awaiting_settlement: Counter,
    /// Bank callbacks received, by what came of them.
    pub bank_callbacks: Family<CallbackLabels, Counter>,
    /// Keys awaiting the bank's settlement file now, read when the reconciler refreshes its
    /// gauges.
    pub keys_awaiting_settlement: Gauge,
    /// Due keys whose rows could not be read (corrupt), skipped by reconciliation.
    pub corrupt_keys_skipped: Counter,
    /// Movements the bank executed after their claim was released (a first call that arrived
    /// late), found and recorded by a released key's later look-up.
    pub late_movements_found: Family<OperationLabels, Counter>,
    /// Expired keys deleted.
    pub keys_expired: Counter,
    /// API requests replied 503 at once because `MAX_CONCURRENT_REQUESTS` were in flight.
    pub requests_shed: Counter,
    /// Requests refused 503 because the identity provider's keys were past
    /// `AUTH_JWKS_MAX_STALE_SECONDS` (the provider unreachable that long).
    pub provider_keys_too_old: Counter,
    /// Requests that began waiting for their key's first attempt (`Prefer: wait`).
    pub waits_started: Counter,
    /// Waits that ended with a reply other than 409: the replay, or the outcome as it stood.
    pub waits_replied: Counter,
    /// Waits whose time ran out: replied 409.
    pub waits_timed_out: Counter,
    /// Requests that asked to wait when `MAX_WAITING_REQUESTS` were waiting: replied 409.
    pub waits_refused: Counter,
    /// Requests waiting now.
    pub waiting_requests: Gauge,
    /// Finished replies kept in memory, read when metrics are scraped.
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

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Creates the metrics and registers them.
    pub fn new() -> Metrics {
        let mut metrics = Metrics {
            registry: Registry::with_prefix(METRIC_PREFIX),
            list: Vec::new(),
            http_request_duration: Family::new_with_constructor(latency_histogram),
            bank_call_duration: Family::new_with_constructor(latency_histogram),
            database_write_duration: Family::new_with_constructor(latency_histogram),
            reconcile_claim_to_final: Family::new_with_constructor(resolution_histogram),
            bank_calls_in_flight: Gauge::default(),
            bank_look_ups_in_flight: Gauge::default(),
            bank_breaker_state: Gauge::default(),
            bank_breaker_transitions: Family::default(),
            bank_breaker_refusals: Counter::default(),
            database_pool_connections: Family::default(),
            database_pool_max_connections: Gauge::default(),
            build_info: Family::default(),
            database_replication_required: Gauge::default(),
            http_requests: Family::default(),
            claims: Family::default(),
            replays: Family::default(),
            replays_from_memory: Family::default(),
            conflicts: Family::default(),
            mismatches: Family::default(),
            bank_calls: Family::default(),
            outcomes: Family::default(),
            stuck_keys_found: Counter::default(),
            keys_resolved: Family::default(),
            lookup_failures: Counter::default(),
            status_checks_refused: Counter::default(),
            status_checks_paced: Counter::default(),
            status_checks_per_movement: Histogram::new(CHECKS_PER_MOVEMENT_BUCKETS),
            awaiting_settlement: Counter::default(),
            bank_callbacks: Family::default(),
            keys_awaiting_settlement: Gauge::default(),
            corrupt_keys_skipped: Counter::default(),
            late_movements_found: Family::default(),
            keys_expired: Counter::default(),
            requests_shed: Counter::default(),
            provider_keys_too_old: Counter::default(),
            waits_started: Counter::default(),
            waits_replied: Counter::default(),
            waits_timed_out: Counter::default(),
            waits_refused: Counter::default(),
            waiting_requests: Gauge::default(),
            replay_cache_entries: Gauge::default(),
            replay_cache_bytes: Gauge::default(),
            store_writer_restarts: Counter::default(),
            database_synchronous_standbys: Gauge::default(),
            oldest_started_seconds: Gauge::default(),
            oldest_unknown_seconds: Gauge::default(),
        };
        metrics
            .build_info
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
            })
            .set(1);
        metrics.register_latencies();
        let mut registry = Described {
            registry: &mut metrics.registry,
            list: &mut metrics.list,
        };
        registry.register(
            "http_requests",
            "HTTP requests served",
            metrics.http_requests.clone(),
        );
        registry.register("idempotency_claims", "Keys claimed", metrics.claims.clone());
        registry.register(
            "idempotency_replays",
            "Saved replies replayed",
            metrics.replays.clone(),
        );
        registry.register(
            "idempotency_replays_from_memory",
            "Saved replies replayed from memory, without a database read",
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
            "bank_breaker_transitions",
            "The bank breaker's changes of state, by the state it changed to",
            metrics.bank_breaker_transitions.clone(),
        );
        registry.register(
            "bank_breaker_refusals",
            "New payments and refunds refused by the open bank breaker, before their claim",
            metrics.bank_breaker_refusals.clone(),
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
            "Bank look-ups without a usable reply",
            metrics.lookup_failures.clone(),
        );
        registry.register(
            "bank_status_checks_refused",
            "Status checks the bank refused as breaking the rail's rules (too soon, too many)",
            metrics.status_checks_refused.clone(),
        );
        registry.register(
            "reconcile_status_checks_paced",
            "Status checks put off because the deployment's pace (status_checks.per_second) was spoken for",
            metrics.status_checks_paced.clone(),
        );
        registry.register(
            "reconcile_status_checks_per_movement",
            "Status checks each movement took, observed when a check settled it or its checks ran out",
            metrics.status_checks_per_movement.clone(),
        );
        registry.register(
            "reconcile_sent_to_settlement",
            "Movements whose status checks ran out with no final reply, left to the bank's settlement file",
            metrics.awaiting_settlement.clone(),
        );
        registry.register(
            "keys_awaiting_settlement",
            "Keys whose status checks ran out undecided, awaiting the bank's settlement file",
            metrics.keys_awaiting_settlement.clone(),
        );
        registry.register(
            "bank_callbacks",
            "Bank callbacks received, by result (applied, already_final, mismatch, unknown_reference, refused, closed)",
            metrics.bank_callbacks.clone(),
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
            "identity_provider_keys_too_old_refusals",
            "Requests refused 503: the identity provider unreachable too long",
            metrics.provider_keys_too_old.clone(),
        );
        registry.register(
            "idempotency_waits_started",
            "Requests that began waiting for their key's first attempt (Prefer: wait)",
            metrics.waits_started.clone(),
        );
        registry.register(
            "idempotency_waits_replied",
            "Waits that ended with the first attempt's reply or outcome",
            metrics.waits_replied.clone(),
        );
        registry.register(
            "idempotency_waits_timed_out",
            "Waits whose time ran out (replied 409)",
            metrics.waits_timed_out.clone(),
        );
        registry.register(
            "idempotency_waits_refused",
            "Requests that could not wait: MAX_WAITING_REQUESTS were waiting (replied 409)",
            metrics.waits_refused.clone(),
        );
        registry.register(
            "idempotency_waiting_requests",
            "Requests waiting now for their key's first attempt",
            metrics.waiting_requests.clone(),
        );
        registry.register(
            "idempotency_replay_cache_entries",
            "Finished replies kept in memory",
            metrics.replay_cache_entries.clone(),
        );
        registry.register(
            "idempotency_replay_cache_bytes",
            "What the finished replies kept in memory weigh, in bytes",
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

    /// Registers the histograms and the gauges of saturation.
    fn register_latencies(&mut self) {
        let mut registry = Described {
            registry: &mut self.registry,
            list: &mut self.list,
        };
        registry.register(
            "http_request_duration_seconds",
            "How long HTTP requests took, by route template, method and status class",
            self.http_request_duration.clone(),
        );
        registry.register(
            "bank_call_duration_seconds",
            "How long calls to the bank took, by call and outcome",
            self.bank_call_duration.clone(),
        );
        registry.register(
            "database_write_duration_seconds",
            "How long the claim's and the outcome's database writes took",
            self.database_write_duration.clone(),
        );
        registry.register(
            "reconcile_claim_to_final_seconds",
            "For keys settled by reconciliation, the time from their claim to the look-up that settled them",
            self.reconcile_claim_to_final.clone(),
        );
        registry.register(
            "bank_calls_in_flight",
            "Money-moving calls to the bank in flight now (bounded by MAX_BANK_CALLS)",
            self.bank_calls_in_flight.clone(),
        );
        registry.register(
            "bank_look_ups_in_flight",
            "Look-ups at the bank in flight now (bounded by MAX_BANK_LOOKUPS)",
            self.bank_look_ups_in_flight.clone(),
        );
        registry.register(
            "bank_breaker_state",
            "The bank breaker's state: 0 closed, 1 open (new payments refused), 2 half-open (probing)",
            self.bank_breaker_state.clone(),
        );
        registry.register(
            "database_pool_connections",
            "The database pool's open connections, in use or idle",
            self.database_pool_connections.clone(),
        );
        registry.register(
            "database_pool_max_connections",
            "The most connections the database pool opens",
            self.database_pool_max_connections.clone(),
        );
        registry.register(
            "database_replication_required",
            "1 when DATABASE_REPLICATION requires a synchronous standby, 0 on one server by choice",
            self.database_replication_required.clone(),
        );
        registry.register(
            "build_info",
            "1, labelled with the backend's version",
            self.build_info.clone(),
        );
    }

    /// Records a bank call's outcome and how long it took.
    pub fn bank_call_took(&self, call: &'static str, outcome: &'static str, took: Duration) {
        let labels = BankCallLabels { call, outcome };
        self.bank_call_duration
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
        self.bank_calls.get_or_create(&labels).inc();
    }

    /// Records how long a database write took.
    pub fn write_took(&self, write: &'static str, took: Duration) {
        self.database_write_duration
            .get_or_create(&WriteLabels { write })
            .observe(took.as_secs_f64());
    }

    /// Every metric registered, in order.
    pub fn list(&self) -> &[MetricEntry] {
        &self.list
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

    /// Counts a bank callback's reply.
    pub fn bank_callback(&self, result: &'static str) {
        self.bank_callbacks
            .get_or_create(&CallbackLabels { result })
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

/// The registry and the list of what it holds, filled by the same calls, so the list
/// (docs/metrics.md, the rules' check) is the registry's.
struct Described<'a> {
    registry: &'a mut Registry,
    list: &'a mut Vec<MetricEntry>,
}

impl Described<'_> {
    /// Registers `metric` as `name`, meaning `help`, and lists it.
    fn register<M: Metric + TypedMetric>(&mut self, name: &str, help: &str, metric: M) {
        self.list.push(MetricEntry {
            name: format!("{METRIC_PREFIX}_{name}"),
            kind: M::TYPE.as_str().to_owned(),
            help: help.to_owned(),
        });
        self.registry.register(name, help, metric);
    }
}
