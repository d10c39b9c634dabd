//! Logging of server-side failures, in one place: [`crate::error::Error`]'s `IntoResponse` puts
//! what went wrong into the response's extensions ([`Failure`]) instead of logging it, and this
//! middleware logs it, as a warning for a passing outage (503) and an error for a bug (500).
//! The client's body never carries it.

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;

use crate::error::Failure;

/// Middleware: logs the failure behind a 5xx reply, if there is one.
pub async fn log_failures(request: Request, next: Next) -> Response {
    let (method, path) = (request.method().clone(), request.uri().path().to_owned());
    let response = next.run(request).await;
    if let Some(failure) = response.extensions().get::<Failure>() {
        let status = response.status().as_u16();
        if failure.transient {
            tracing::warn!(%method, path, status, error = failure.description, "request failed");
        } else {
            tracing::error!(%method, path, status, error = failure.description, "request failed");
        }
    }
    response
}
