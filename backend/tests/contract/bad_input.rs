//! Bad input never reaches the bank, never writes a row, never panics and never gets a 500: each
//! case below gets the right 4xx `application/problem+json`. What we tried is in each test name.

use std::time::Duration;

use crate::support::{TestApp, new_key, payment_body};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Sends `body` as the pay request with the given raw key header value (reqwest cannot send
/// every byte a hostile client can, so malformed headers go over a raw socket).
async fn raw_pay(app: &TestApp, key_header: &[u8], body: &[u8]) -> (u16, String) {
    let addr = app.url.trim_start_matches("http://");
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let mut request = Vec::new();
    request.extend_from_slice(b"POST /v1/bills/elec-1/pay HTTP/1.1\r\nHost: test\r\n");
    request
        .extend_from_slice(format!("Authorization: Bearer {}\r\n", TestApp::token(1)).as_bytes());
    request.extend_from_slice(b"Content-Type: application/json\r\nIdempotency-Key: ");
    request.extend_from_slice(key_header);
    request.extend_from_slice(
        format!(
            "\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    );
    request.extend_from_slice(body);
    stream.write_all(&request).await.expect("send");
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut response))
        .await
        .expect("reply in time")
        .expect("read");
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    (status, text)
}

async fn post_raw_body(app: &TestApp, body: Vec<u8>) -> crate::support::Received {
    let response = app
        .http
        .post(format!("{}/v1/bills/elec-1/pay", app.url))
        .bearer_auth(TestApp::token(1))
        .header("Idempotency-Key", new_key())
        .header("Content-Type", "application/json")
        .body(body)
        .send()
        .await
        .expect("replies");
    crate::support::Received::from(response).await
}

#[tokio::test]
async fn malformed_keys_are_400_and_write_nothing() {
    let app = TestApp::spawn().await;
    let body = payment_body(100);
    let ten_kb = "k".repeat(10 * 1024);
    let v1 = "c232ab00-9414-11ec-b3c8-9f6bdeced846";
    for (what, key) in [
        ("empty key", ""),
        ("10 KB key", ten_kb.as_str()),
        ("non-UUID key", "order-1234"),
        ("version-1 UUID", v1),
        (
            "tab inside the key",
            "8e03978e-40d5\t-43e8-bc93-6894a57f9324",
        ),
        ("broken quoting", "\"8e03978e-40d5-43e8-bc93-6894a57f9324"),
    ] {
        let reply = app.pay(1, Some(key), "elec-1", &body).await;
        let problem = reply.assert_problem(400, "idempotency-key-malformed");
        assert!(problem["detail"].is_string(), "{what}: names the problem");
    }
    app.assert_nothing_written("malformed keys").await;
}

#[tokio::test]
async fn key_with_invalid_utf8_or_line_breaks_is_refused_with_a_4xx() {
    let app = TestApp::spawn().await;
    let body = payment_body(100).to_string();
    let (status, text) = raw_pay(&app, b"\xff\xfe-not-utf8", body.as_bytes()).await;
    assert_eq!(status, 400, "{text}");
    assert!(
        text.contains("/problems/idempotency-key-malformed"),
        "{text}"
    );

    // A bare CR or LF inside a header value breaks HTTP framing itself: the HTTP parser refuses
    // the request with a 400 before any handler runs.
    for key in [&b"abc\rdef"[..], b"abc\ndef"] {
        let (status, text) = raw_pay(&app, key, body.as_bytes()).await;
        assert_eq!(status, 400, "{text}");
    }
    app.assert_nothing_written("raw keys").await;
}

#[tokio::test]
async fn bodies_that_are_not_json_too_deep_or_too_large_are_refused() {
    let app = TestApp::spawn().await;
    post_raw_body(&app, b"amount=5".to_vec())
        .await
        .assert_problem(400, "body-not-json");
    post_raw_body(&app, vec![0xff, 0xfe, 0xfd])
        .await
        .assert_problem(400, "body-not-json");
    let deep_small = format!("{}{}", "[".repeat(100), "]".repeat(100)).into_bytes();
    post_raw_body(&app, deep_small)
        .await
        .assert_problem(400, "body-too-deep");
    let deep_10000 = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000)).into_bytes();
    post_raw_body(&app, deep_10000)
        .await
        .assert_problem(413, "body-too-large");
    post_raw_body(&app, vec![b' '; 10 * 1024 * 1024])
        .await
        .assert_problem(413, "body-too-large");
    app.assert_nothing_written("bad bodies").await;
}

#[tokio::test]
async fn wrong_fields_are_422_naming_the_field() {
    let app = TestApp::spawn().await;
    for (body, field) in [
        (
            json!({"amount_paise": 2300.5, "payer_vpa": "asha@okbank"}),
            "amount_paise",
        ),
        (
            json!({"amount_paise": -500, "payer_vpa": "asha@okbank"}),
            "amount_paise",
        ),
        (
            json!({"amount_paise": "500", "payer_vpa": "asha@okbank"}),
            "amount_paise",
        ),
        (json!({"payer_vpa": "asha@okbank"}), "amount_paise"),
        (json!({"amount_paise": 500}), "payer_vpa"),
        (
            json!({"amount_paise": 500, "payer_vpa": "asha"}),
            "payer_vpa",
        ),
        (
            json!({"amount_paise": 500, "payer_vpa": "asha@okbank", "tip": 1}),
            "tip",
        ),
        (json!([500]), "body"),
    ] {
        let reply = app.pay(1, Some(&new_key()), "elec-1", &body).await;
        let problem = reply.assert_problem(422, "invalid-field");
        assert_eq!(problem["field"], field, "{body}");
    }
    let bad_bill = app
        .pay(1, Some(&new_key()), "bill%20with%20space", &payment_body(1))
        .await;
    assert_eq!(
        bad_bill.assert_problem(422, "invalid-field")["field"],
        "bill_id"
    );
    app.assert_nothing_written("wrong fields").await;
}

#[tokio::test]
async fn a_corrected_retry_with_the_same_key_goes_through() {
    let app = TestApp::spawn().await;
    let key = new_key();
    let wrong = json!({"amount_paise": 2300.5, "payer_vpa": "asha@okbank"});
    app.pay(1, Some(&key), "elec-1", &wrong)
        .await
        .assert_problem(422, "invalid-field");
    let fixed = app.pay(1, Some(&key), "elec-1", &payment_body(2300)).await;
    assert_eq!(fixed.status, 201);
    assert!(!fixed.is_replay());
    assert_eq!(app.ledger().await.debits.len(), 1);
}

/// A token with exactly these claims, signed with the test backend's secret.
fn signed(claims: serde_json::Value) -> String {
    shared::auth::sign_claims(&claims, crate::support::SECRET.as_bytes())
}

fn now_unix() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

#[tokio::test]
async fn requests_without_a_valid_token_are_401_before_anything_else_all_with_one_detail() {
    let app = TestApp::spawn().await;
    let url = format!("{}/v1/bills/elec-1/pay", app.url);
    let now = now_unix();
    // Past the 30-second leeway.
    let expired = signed(json!({"sub": "1", "exp": now - 120}));
    let foreign = shared::auth::sign_token(
        shared::UserId::numbered(1),
        now + 600,
        b"another-secret-another-secret-another",
    );
    let bearer = |claims| Some(format!("Bearer {}", signed(claims)));
    let cases = [
        ("missing token", None),
        ("expired token", Some(format!("Bearer {expired}"))),
        (
            "token signed with another secret",
            Some(format!("Bearer {foreign}")),
        ),
        (
            "subject as a number",
            bearer(json!({"sub": 42, "exp": now + 600})),
        ),
        (
            "token not valid yet",
            bearer(json!({"sub": "42", "exp": now + 600, "nbf": now + 300})),
        ),
        (
            "token issued in the future",
            bearer(json!({"sub": "42", "exp": now + 600, "iat": now + 300})),
        ),
        ("garbage token", Some("Bearer not.a.token".to_owned())),
        ("basic auth", Some("Basic YXNoYTpwYXNz".to_owned())),
        (
            "16 KiB token",
            Some(format!("Bearer {}", "a".repeat(16 << 10))),
        ),
        (
            "300 KiB token of three parts",
            Some(format!("Bearer {0}.{0}.{0}", "QUFB".repeat(25 << 10))),
        ),
    ];
    let mut details = std::collections::HashSet::new();
    for (what, authorization) in cases {
        // Even with no key and a broken body, the token is checked first.
        let request = app.http.post(&url).body("not json");
        let request = match &authorization {
            Some(value) => request.header("Authorization", value),
            None => request,
        };
        let reply = crate::support::Received::from(request.send().await.expect("replies")).await;
        let body = reply.assert_problem(401, "unauthenticated");
        assert_eq!(reply.header("www-authenticate"), Some("Bearer"), "{what}");
        details.insert(body["detail"].as_str().unwrap_or_default().to_owned());
    }
    // Which check failed goes to the log, never to the caller.
    assert_eq!(
        details,
        std::collections::HashSet::from([shared::problem::UNAUTHENTICATED_DETAIL.to_owned()])
    );
    app.assert_nothing_written("unauthenticated").await;
}

#[tokio::test]
async fn a_canonical_subject_and_clocks_within_the_leeway_are_accepted() {
    let app = TestApp::spawn().await;
    let now = now_unix();
    // Expired 10 s ago, valid from 10 s from now, issued 10 s from now: all within 30 s.
    let token = signed(json!({
        "sub": "42", "exp": now - 10, "nbf": now + 10, "iat": now + 10,
        "iss": "anyone", "aud": ["anything"],
    }));
    let reply = app
        .http
        .get(format!("{}/v1/payments/{}", app.url, new_key()))
        .bearer_auth(token)
        .send()
        .await
        .expect("replies");
    // Authenticated: the payment is simply not there.
    crate::support::Received::from(reply)
        .await
        .assert_problem(404, "not-found");
}

#[tokio::test]
async fn unknown_routes_and_methods_are_problems_too() {
    let app = TestApp::spawn().await;
    let missing = app
        .http
        .get(format!("{}/v2/nothing", app.url))
        .send()
        .await
        .expect("replies");
    crate::support::Received::from(missing)
        .await
        .assert_problem(404, "not-found");
    let wrong_method = app
        .http
        .delete(format!("{}/healthz", app.url))
        .send()
        .await
        .expect("replies");
    crate::support::Received::from(wrong_method)
        .await
        .assert_problem(405, "method-not-allowed");
    let bad_id = app.read_payment(1, "not-a-uuid").await;
    bad_id.assert_problem(404, "not-found");
}

/// 1,500 mutated requests (methods, paths, header values, bodies; `test_harness::mutations`,
/// the corpus the edge's tests send through `workerd` too), each over a raw socket: none gets a
/// 5xx but 503, and the money still adds up (every debit has its succeeded payment).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_corpus_of_mutated_requests_gets_no_server_error_but_503() {
    let app = TestApp::spawn().await;
    let corpus = test_harness::mutations::mutated_requests(1, 1_500, &TestApp::token(1));
    let addr = app.url.trim_start_matches("http://").to_owned();
    let mut failures = Vec::new();
    let mut seen = std::collections::BTreeMap::<u16, usize>::new();
    for (index, request) in corpus.iter().enumerate() {
        match test_harness::mutations::send_raw(&addr, request).await {
            Some(reply) if reply.status < 500 || reply.status == 503 => {
                *seen.entry(reply.status).or_default() += 1;
            }
            other => failures.push(format!("#{index}: {other:?} for {}", request.describe())),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The corpus reaches every kind of refusal, and some payments go through.
    for status in [201, 400, 401, 404, 405, 413, 422] {
        assert!(seen.contains_key(&status), "no {status} among {seen:?}");
    }
    let debits = app.ledger().await.debits.len();
    let succeeded = app
        .scalar("SELECT count(*) FROM payments WHERE status = 'succeeded'")
        .await;
    assert_eq!(i64::try_from(debits).expect("small"), succeeded);
}
