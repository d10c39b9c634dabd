//! Bearer-token authentication for `/v1`: a middleware, so a request without a valid token is
//! answered 401 before its path, key or body is looked at (SPEC §4 "Identity").

use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use shared::Problem;

use crate::error::Error;
use crate::state::AppState;

/// Verifies the token and puts the [`shared::UserId`] into the request's extensions.
pub async fn require_user(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let header_value = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(HeaderValue::as_bytes);
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    match state.tokens.verify_authorization(header_value, now) {
        Ok(user) => {
            request.extensions_mut().insert(user);
            next.run(request).await
        }
        Err(error) => {
            tracing::info!(%error, "request refused: not authenticated");
            let mut response = Error::from(Problem::from(&error)).into_response();
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            response
        }
    }
}
