//! Turning a [`Reply`] (a saved or fresh reply, or a problem) into an HTTP response, with the
//! headers that matter: `Content-Type`, `Location`, `Retry-After`, `Idempotent-Replayed`, the
//! key's `Idempotency-Expires` and, after a wait for the key's first attempt,
//! `Preference-Applied`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use std::time::Duration;

use axum::http::HeaderMap;
use shared::expiry::{EXPIRES_HEADER, format_http_date};
use shared::prefer::{PREFERENCE_APPLIED_HEADER, wait_value};
use time::OffsetDateTime;

use crate::domain::Reply;

/// The header that marks a replayed reply.
pub const IDEMPOTENT_REPLAYED: &str = "idempotent-replayed";

impl IntoResponse for Reply {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (status, self.body).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(self.content_type),
        );
        if let Some(location) = self.location.and_then(|l| HeaderValue::try_from(l).ok()) {
            headers.insert(header::LOCATION, location);
        }
        if let Some(wait) = self.retry_after {
            let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if self.replayed {
            headers.insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
        }
        if let Some(wait) = self.waited {
            mark_wait_applied(headers, wait);
        }
        if let Some(expires_at) = self.expires_at {
            mark_expiry(headers, expires_at);
        }
        response
    }
}

/// Adds `Idempotency-Expires`: the key of the request expires at `expires_at` (its row's).
pub fn mark_expiry(headers: &mut HeaderMap, expires_at: OffsetDateTime) {
    let value = HeaderValue::try_from(format_http_date(expires_at)).expect("an HTTP date");
    headers.insert(EXPIRES_HEADER, value);
}

/// Adds `Preference-Applied: wait=N` to a reply given after waiting up to `wait`.
pub fn mark_wait_applied(headers: &mut HeaderMap, wait: Duration) {
    let value = HeaderValue::try_from(wait_value(wait)).expect("`wait=` and digits");
    headers.insert(PREFERENCE_APPLIED_HEADER, value);
}
