//! Reading a guarded request's body off the connection without ever holding more than the limit:
//! reading stops at the first chunk past it, so a 10 MB body costs at most the limit plus a
//! chunk before it is refused.

use futures_util::StreamExt;
use worker::{ByteStream, Request};

use crate::gate::BodyRead;

/// Reads the body, stopping once it is longer than `limit` bytes.
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
            return BodyRead::TooLarge;
        }
        body.extend_from_slice(&chunk);
    }
    BodyRead::Complete(body)
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
    async fn no_body_is_an_empty_body() {
        let request =
            Request::new("http://edge.test/v1/bills/b/pay", Method::Post).expect("request");
        assert_eq!(
            read_body_within(&request, 10).await,
            BodyRead::Complete(Vec::new())
        );
    }
}
