//! Turning the edge's own [`Reply`] values into runtime responses.

use worker::{Headers, Response, Result};

use crate::reply::Reply;

/// The response for a reply: its status, exactly its headers, and its body.
pub fn reply_response(reply: Reply) -> Result<Response> {
    let headers = Headers::new();
    for (name, value) in &reply.headers {
        headers.set(name, value)?;
    }
    Ok(Response::builder()
        .with_status(reply.status)
        .with_headers(headers)
        .fixed(reply.body))
}

#[cfg(all(test, target_arch = "wasm32"))]
mod tests {
    use shared::Problem;
    use wasm_bindgen_test::wasm_bindgen_test;

    use super::*;
    use crate::coordination::SavedReply;

    #[wasm_bindgen_test]
    async fn a_problem_reply_becomes_a_response_with_its_headers_and_body() {
        let problem = Problem::request_in_progress(std::time::Duration::from_secs(1));
        let mut response = reply_response(Reply::problem(&problem)).expect("response");
        assert_eq!(response.status_code(), 409);
        let headers = response.headers();
        assert_eq!(
            headers.get("content-type").expect("header"),
            Some("application/problem+json".to_owned())
        );
        assert_eq!(
            headers.get("retry-after").expect("header"),
            Some("1".to_owned())
        );
        let body = response.bytes().await.expect("body");
        assert_eq!(body, problem.to_json());
    }

    #[wasm_bindgen_test]
    async fn a_replay_becomes_a_response_marked_as_replayed() {
        let saved = SavedReply {
            status: 201,
            content_type: Some("application/json".to_owned()),
            location: Some("/v1/payments/p".to_owned()),
            retry_after: None,
            expires: None,
            body: r#"{"payment_id":"p"}"#.to_owned(),
        };
        let mut response = reply_response(Reply::replay(&saved)).expect("response");
        assert_eq!(response.status_code(), 201);
        let headers = response.headers();
        assert_eq!(
            headers.get("idempotent-replayed").expect("header"),
            Some("true".to_owned())
        );
        assert_eq!(
            headers.get("location").expect("header"),
            Some("/v1/payments/p".to_owned())
        );
        assert_eq!(
            response.text().await.expect("body"),
            r#"{"payment_id":"p"}"#
        );
    }
}
