//! The admin listener's routes (`ADMIN_ADDR`, SPEC §8 "Two listeners"): `GET /metrics`
//! (OpenMetrics text, with the replay cache's size and the store writer's restarts read at each
//! scrape), `GET /readyz` (the
//! last readiness check in detail, with the ages of the oldest unfinished keys), and the
//! operator console with its API under `/admin` (`http::operator`), and the bank's signed
//! callbacks (`POST /bank/callbacks`, `http::bank_callbacks`). Bound to an address only
//! operators reach; the edge never forwards to it, and nothing here is on the public API.
//! Requests carry a request id, as on the public listener, so an operator's actions are traced
//! in the audit trail to the request that made them.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;

use super::request_id;
use super::router::{method_not_allowed, no_such_route};
use super::{bank_callbacks, failures, operator};
use crate::metrics::PoolLabels;
use crate::state::AppState;

/// Every route of the admin listener.
pub fn admin_router(state: AppState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/readyz", get(detailed_readiness))
        .merge(operator::router(state.clone()))
        .route("/bank/callbacks", post(bank_callbacks::receive))
        .fallback(no_such_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn(failures::log_failures))
        .layer(axum::middleware::from_fn(request_id::propagate))
        .with_state(state)
}

async fn metrics(State(state): State<AppState>) -> Response {
    let (entries, bytes) = state.replay_cache.usage();
    let metrics = &state.metrics;
    metrics
        .replay_cache_entries
        .set(i64::try_from(entries).unwrap_or(i64::MAX));
    metrics
        .replay_cache_bytes
        .set(i64::try_from(bytes).unwrap_or(i64::MAX));
    let standbys = state.readiness.current().synchronous_standbys.unwrap_or(0);
    metrics
        .database_synchronous_standbys
        .set(i64::from(standbys));
    metrics
        .bank_calls_in_flight
        .set(i64::try_from(state.bank.calls_in_flight()).unwrap_or(i64::MAX));
    if let Some(breaker) = state.bank.breaker_state() {
        metrics.bank_breaker_state.set(breaker.gauge_value());
    }
    metrics
        .bank_look_ups_in_flight
        .set(i64::try_from(state.bank.look_ups_in_flight()).unwrap_or(i64::MAX));
    let pool = state.store.connections();
    for (label, count) in [("in_use", pool.in_use), ("idle", pool.idle)] {
        metrics
            .database_pool_connections
            .get_or_create(&PoolLabels { state: label })
            .set(i64::from(count));
    }
    metrics
        .database_pool_max_connections
        .set(i64::from(pool.max));
    let restarts = state.store.writer_restarts();
    metrics
        .store_writer_restarts
        .inc_by(restarts.saturating_sub(metrics.store_writer_restarts.get()));
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.render(),
    )
        .into_response()
}

/// 200 or 503 with the last check's details and the reconciler's backlog gauges.
async fn detailed_readiness(State(state): State<AppState>) -> Response {
    let check = state.readiness.current();
    let status = if check.ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = json!({
        "database": check,
        "oldest_started_key_age_seconds": state.metrics.oldest_started_seconds.get(),
        "oldest_unknown_key_age_seconds": state.metrics.oldest_unknown_seconds.get(),
    });
    (status, Json(body)).into_response()
}
