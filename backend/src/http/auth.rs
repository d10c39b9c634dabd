//! Bearer-token authentication for `/v1`, the last step of `http::gate`: a request without a
//! valid token gets 401 before its path, key or body is looked at (SPEC §4
//! "Identity"). And the [`Caller`] a handler behind it takes: the user, the request id, the
//! trace id and its `Prefer: wait`.

use axum::extract::{FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use shared::auth::AuthError;
use shared::{Problem, UserId};

use super::payments::requested_wait;
use crate::domain::{RequestId, TraceId};
use crate::error::Error;
use crate::flows::Caller;
use crate::state::AppState;

impl FromRequestParts<AppState> for Caller {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Caller, Error> {
        let user = parts
            .extensions
            .get::<UserId>()
            .cloned()
            .ok_or(Error::Misrouted("an authenticated user"))?;
        let request_id = parts
            .extensions
            .get::<RequestId>()
            .cloned()
            .ok_or(Error::Misrouted("a request id"))?;
        let trace_id = *parts
            .extensions
            .get::<TraceId>()
            .ok_or(Error::Misrouted("a trace id"))?;
        Ok(Caller {
            user,
            request_id,
            trace_id,
            wait: requested_wait(state, &parts.headers),
        })
    }
}

/// The `Authorization` header's bytes, if sent.
pub fn authorization(headers: &HeaderMap) -> Option<&[u8]> {
    headers
        .get(header::AUTHORIZATION)
        .map(HeaderValue::as_bytes)
}

/// Now, in unix seconds, as token checks count time.
pub fn unix_now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// The request with its verified [`shared::UserId`] in its extensions; else the 401 to reply.
pub async fn authenticated(state: &AppState, mut request: Request) -> Result<Request, Response> {
    let header_value = authorization(request.headers());
    match state.tokens.user_of(header_value, unix_now()).await {
        Ok(user) => {
            request.extensions_mut().insert(user);
            Ok(request)
        }
        Err(AuthError::ProviderKeysTooOld) => {
            tracing::warn!("request refused: the identity provider's keys are too old to use");
            state.metrics.provider_keys_too_old.inc();
            let problem = Problem::from(&AuthError::ProviderKeysTooOld);
            Err(Error::from(problem).into_response())
        }
        Err(error) => {
            tracing::info!(%error, "request refused: not authenticated");
            let mut response = Error::from(Problem::from(&error)).into_response();
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            Err(response)
        }
    }
}
