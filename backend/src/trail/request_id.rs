//! The request id: the `X-Request-Id` a request came with (the edge mints one per forwarded
//! request), or one minted here, echoed on the answer and stamped on the trail's events.
//!
//! [`scope`] runs a request's handling (and a bank call it spawns) with its id in a task-local;
//! [`current`] reads it wherever the store writes an event.

use std::future::Future;
use std::sync::Arc;

use axum::extract::Request;
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;

/// The request header (and answer header) that carries the id.
pub const HEADER: &str = "x-request-id";

/// The longest id kept as sent; a longer or unprintable one is replaced by a fresh id.
const MAX_LENGTH: usize = 64;

tokio::task_local! {
    static REQUEST_ID: Arc<str>;
}

/// The id of the request being handled on this task, if any.
pub fn current() -> Option<String> {
    REQUEST_ID.try_with(|id| id.to_string()).ok()
}

/// Runs `work` as part of the request `id` (also used to carry the id into a spawned task).
pub async fn scope<F: Future>(id: Option<String>, work: F) -> F::Output {
    match id {
        Some(id) => REQUEST_ID.scope(Arc::from(id), work).await,
        None => work.await,
    }
}

/// The id to use for a request that sent `sent`: kept if it is 1 to 64 visible ASCII
/// characters, else a fresh UUID (a client cannot put newlines or a megabyte in the trail).
pub fn accept_or_mint(sent: Option<&HeaderValue>) -> String {
    sent.and_then(|value| value.to_str().ok())
        .filter(|id| {
            !id.is_empty() && id.len() <= MAX_LENGTH && id.bytes().all(|b| b.is_ascii_graphic())
        })
        .map_or_else(|| uuid::Uuid::new_v4().to_string(), str::to_owned)
}

/// Middleware: takes or mints the id, handles the request inside its scope, and echoes it.
pub async fn propagate(mut request: Request, next: Next) -> Response {
    let id = accept_or_mint(request.headers().get(HEADER));
    let header = HeaderValue::from_str(&id).expect("checked visible ASCII");
    request.headers_mut().insert(HEADER, header.clone());
    let mut response = scope(Some(id), next.run(request)).await;
    response.headers_mut().insert(HEADER, header);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sensible_id_is_kept_and_anything_else_is_replaced() {
        let kept = HeaderValue::from_static("edge-7f3a");
        assert_eq!(accept_or_mint(Some(&kept)), "edge-7f3a");
        for refused in ["", "has space", &"x".repeat(65)] {
            let value = HeaderValue::from_str(refused).expect("a header value");
            let minted = accept_or_mint(Some(&value));
            assert_ne!(minted, refused);
            assert!(
                uuid::Uuid::parse_str(&minted).is_ok(),
                "{refused:?} got {minted}"
            );
        }
        assert!(uuid::Uuid::parse_str(&accept_or_mint(None)).is_ok());
    }

    #[tokio::test]
    async fn the_id_is_read_inside_its_scope_only() {
        assert_eq!(current(), None);
        let inside = scope(Some("r-1".into()), async { current() }).await;
        assert_eq!(inside.as_deref(), Some("r-1"));
    }
}
