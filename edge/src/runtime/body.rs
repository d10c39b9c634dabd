//! Reading a guarded request's body off the connection without ever holding more than the limit,
//! and reading to its end (discarding, up to a bound) a body the edge replies without using.
//!
//! A body past the limit is kept no further than the limit plus a chunk. But the edge must still
//! take in what the client is sending before it replies: a server that replies and closes while
//! the request is still arriving makes the client's TCP stack see a reset, so a client that sent
//! a whole 10 MB body without `Expect: 100-continue` got no reply at all, or, through
//! `wrangler dev`'s proxy, a bodyless 500 "Network connection lost" (docs/edge-toolchain.md,
//! "Large bodies"). So the rest of such a body is read and dropped, up to
//! [`DISCARD_LIMIT_BYTES`], before the 413 (or the 401, 404 or 429) is sent.

use futures_util::StreamExt;
use worker::{ByteStream, Request};

use crate::gate::BodyRead;

/// The most of a body the edge reads and drops before replying without it: a little over
/// 2,000 times the 16 KiB limit, enough for any honest mistake (a file sent to the wrong URL);
/// a client sending more sees its connection cut, as before.
pub const DISCARD_LIMIT_BYTES: usize = 32 * 1024 * 1024;

/// Reads the body, keeping at most `limit` bytes; a longer body is read to its end (up to
/// [`DISCARD_LIMIT_BYTES`]) and dropped.
pub async fn read_body_within(request: &Request, limit: usize) -> BodyRead {
    let Some(stream) = request.inner().body() else {
        return BodyRead::Complete(Vec::new());
    };
    let mut chunks = ByteStream::from(stream);
    let mut body = Vec::new();
    while let Some(chunk) = chunks.next().await {
        let Ok(chunk) = chunk else {
            return BodyRead::Unreadable;
        };
        if body.len() + chunk.len() > limit {
            discard_rest(&mut chunks, body.len() + chunk.len()).await;
            return BodyRead::TooLarge;
        }
        body.extend_from_slice(&chunk);
    }
    BodyRead::Complete(body)
}

/// Reads and drops the body of a request the edge replied to without it (an operator route, a
/// rate limit, a misconfiguration), up to [`DISCARD_LIMIT_BYTES`]. A body already read or
/// handed to a forward is left alone.
pub async fn discard_unread_body(request: &Request) {
    let Some(stream) = request.inner().body() else {
        return;
    };
    if request.inner().body_used() || stream.locked() {
        return;
    }
    discard_rest(&mut ByteStream::from(stream), 0).await;
}

/// Reads chunks until the body ends, fails, or `seen` passes [`DISCARD_LIMIT_BYTES`].
async fn discard_rest(chunks: &mut ByteStream, mut seen: usize) {
    while seen <= DISCARD_LIMIT_BYTES {
        match chunks.next().await {
            Some(Ok(chunk)) => seen += chunk.len(),
            Some(Err(_)) | None => return,
        }
    }
}

#[cfg(all(test, target_arch = "wasm32"))]
mod tests {
    use wasm_bindgen_test::wasm_bindgen_test;
    use worker::wasm_bindgen::JsValue;
    use worker::{Method, RequestInit};

    use super::*;

    fn post(body: &str) -> Request {
        let mut init = RequestInit::new();
        init.with_method(Method::Post)
            .with_body(Some(JsValue::from_str(body)));
        Request::new_with_init("http://edge.test/v1/bills/b/pay", &init).expect("request")
    }

    #[wasm_bindgen_test]
    async fn a_body_within_the_limit_is_read_whole() {
        let body = r#"{"amount_paise":1}"#;
        assert_eq!(
            read_body_within(&post(body), 64).await,
            BodyRead::Complete(body.as_bytes().to_vec())
        );
    }

    #[wasm_bindgen_test]
    async fn a_body_over_the_limit_is_too_large() {
        let body = "x".repeat(100);
        assert_eq!(read_body_within(&post(&body), 99).await, BodyRead::TooLarge);
        assert!(matches!(
            read_body_within(&post(&body), 100).await,
            BodyRead::Complete(_)
        ));
    }

    #[wasm_bindgen_test]
    async fn a_body_over_the_limit_is_read_to_its_end() {
        let request = post(&"x".repeat(100));
        assert_eq!(read_body_within(&request, 10).await, BodyRead::TooLarge);
        assert!(request.inner().body_used());
    }

    #[wasm_bindgen_test]
    async fn an_unread_body_is_discarded_and_a_read_one_left_alone() {
        let request = post(r#"{"amount_paise":1}"#);
        discard_unread_body(&request).await;
        assert!(request.inner().body_used());
        // Nothing left to read, and no panic on a second call.
        discard_unread_body(&request).await;
        let bodyless = Request::new("http://edge.test/healthz", Method::Get).expect("request");
        discard_unread_body(&bodyless).await;
    }

    #[wasm_bindgen_test]
    async fn no_body_is_an_empty_body() {
        let request =
            Request::new("http://edge.test/v1/bills/b/pay", Method::Post).expect("request");
        assert_eq!(
            read_body_within(&request, 10).await,
            BodyRead::Complete(Vec::new())
        );
    }
}
