//! The application as a function: [`router`] builds every public route over a given state, so
//! tests can drive it without a socket and the server binds it to one. (The admin listener's
//! routes are `http::admin`.)
//!
//! Every request runs with its request id (`X-Request-Id`, taken or minted, echoed, stamped on
//! the audit trail: `trail::request_id`) and trace id, in a span every log line carries. The
//! `/v1` API runs behind its gate (`http::gate`): the reply deadline, load shedding, the edge's
//! proof, then authentication. Pages on the origins `CORS_ALLOWED_ORIGINS` lists get CORS
//! (`http::cors`), their preflights replied to before the gate.

use axum::Router;
use axum::middleware::from_fn_with_state;
use shared::{Problem, ProblemKind};

use super::cors::{self, CrossOrigin};
use super::request_id;
use super::{docs, failures, gate, health, key_status, openapi, payments, request_metrics};
use crate::error::Error;
use crate::state::AppState;

/// Every public route of the backend.
pub fn router(state: AppState) -> Router {
    let authenticated = payments::router()
        .merge(key_status::router())
        .route_layer(from_fn_with_state(state.clone(), gate::guard_api));
    let mut routes = Router::new()
        .merge(authenticated)
        .merge(health::router())
        .merge(docs::router())
        .merge(openapi::router())
        .fallback(no_such_route)
        .method_not_allowed_fallback(method_not_allowed);
    if let Some(cross_origin) =
        CrossOrigin::for_origins(&state.cors_allowed_origins, &state.policy.header)
    {
        routes = routes.layer(from_fn_with_state(cross_origin, cors::allow_listed_origins));
    }
    routes
        .layer(axum::middleware::from_fn(failures::log_failures))
        .layer(from_fn_with_state(
            state.clone(),
            request_metrics::count_requests,
        ))
        // Outside the access log, so its line is in the request's span (ids, trace).
        .layer(axum::middleware::from_fn(request_id::propagate))
        .with_state(state)
}

/// The reply to a route that does not exist (on either listener).
pub async fn no_such_route() -> Error {
    Error::from(Problem::new(ProblemKind::NotFound, "No such route."))
}

/// The reply to a route that exists, but not with this method (on either listener).
pub async fn method_not_allowed() -> Error {
    Error::from(Problem::method_not_allowed())
}
