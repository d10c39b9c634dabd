//! CORS on the public routes (`CORS_ALLOWED_ORIGINS`, `backend/src/http/cors.rs`): a page on a
//! listed origin gets its preflight allowed before the edge's proof and the token are looked at
//! (a preflight carries neither), and reads a payment's reply with the headers a retrying
//! client needs; a page on another origin, or any page while the list is empty, gets no CORS
//! header at all (its browser then blocks it), and a request without `Origin` is served as
//! before. A setting that lists something other than an origin stops start-up, naming it. (In a
//! real browser: `scripts/cors-browser-test.sh`.)

use std::process::Command;

use reqwest::Method;
use secret_settings::SecretString;
use test_harness::Received;

use crate::support::{Options, TestApp, new_key, payment_body};

/// The page allowed to call the API.
const PAGE: &str = "https://app.example.in";
/// A page that is not.
const OTHER_PAGE: &str = "https://pay.example.com";
/// The headers a page's payment sends beyond the safelisted ones, as Chromium lists them.
const REQUESTED_HEADERS: &str = "authorization,content-type,idempotency-key,traceparent";
/// The reply headers a page must be able to read.
const EXPOSED: [&str; 5] = [
    "idempotent-replayed",
    "idempotency-expires",
    "location",
    "retry-after",
    "preference-applied",
];
const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

async fn spawn_allowing(origins: &str, options: Options) -> TestApp {
    TestApp::spawn_with(Options {
        cors_allowed_origins: backend::config::AllowedOrigins::parse(origins)
            .expect("valid origins"),
        ..options
    })
    .await
}

/// The preflight a browser on `origin` sends before a payment (or a `GET`) to `path` of `base`.
async fn preflight(app: &TestApp, base: &str, path: &str, origin: &str) -> Received {
    let method = if path.ends_with("/pay") {
        "POST"
    } else {
        "GET"
    };
    let response = app
        .http
        .request(Method::OPTIONS, format!("{base}{path}"))
        .header("origin", origin)
        .header("access-control-request-method", method)
        .header("access-control-request-headers", REQUESTED_HEADERS)
        .send()
        .await
        .expect("the backend replies");
    Received::from(response).await
}

/// A payment of user 31's with a fresh key, sent from a page on `origin` (none: not a browser).
async fn pay_from(app: &TestApp, origin: Option<&str>) -> (String, Received) {
    let key = new_key();
    let mut request = app
        .http
        .post(format!("{}/v1/bills/elec-1/pay", app.url))
        .bearer_auth(TestApp::token(31))
        .header("idempotency-key", &key)
        .header("traceparent", TRACEPARENT)
        .json(&payment_body(5_000));
    if let Some(origin) = origin {
        request = request.header("origin", origin);
    }
    let received = Received::from(request.send().await.expect("the backend replies")).await;
    (key, received)
}

/// The comma-separated values of header `name`, lower-cased.
fn listed(received: &Received, name: &str) -> Vec<String> {
    received
        .header(name)
        .unwrap_or_default()
        .split(',')
        .map(|value| value.trim().to_ascii_lowercase())
        .collect()
}

#[track_caller]
fn assert_no_cors_header(received: &Received, what: &str) {
    let cors: Vec<_> = (received.headers.keys())
        .filter(|name| name.as_str().starts_with("access-control-"))
        .collect();
    assert!(cors.is_empty(), "{what}: {cors:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_listed_origins_preflight_is_allowed_before_the_edge_proof_and_the_token() {
    let mut options = Options::default();
    options.identity.edge_proof_secrets = vec![SecretString::from(
        "the-edge-proof-secret-of-these-tests-0123",
    )];
    let app = spawn_allowing(&format!("http://127.0.0.1:5173, {PAGE}"), options).await;
    for path in [
        "/v1/bills/elec-1/pay",
        "/v1/payments/0b7a4a4e-8d2f-4f6c-9a51-58b1e3d7c0aa",
        "/v1/idempotency-keys/8e03978e-40d5-43e8-bc93-6894a57f9324",
        "/idempotency-policy",
        "/problems/not-found",
        "/openapi.json",
    ] {
        let allowed = preflight(&app, &app.url, path, PAGE).await;
        assert!((200..300).contains(&allowed.status), "{path}: {allowed:?}");
        assert_eq!(
            allowed.header("access-control-allow-origin"),
            Some(PAGE),
            "{path}"
        );
        let methods = listed(&allowed, "access-control-allow-methods");
        assert!(methods.contains(&"post".to_owned()), "{path}: {methods:?}");
        let headers = listed(&allowed, "access-control-allow-headers");
        for needed in REQUESTED_HEADERS.split(',').chain(["prefer", "tracestate"]) {
            assert!(
                headers.iter().any(|h| h == needed),
                "{path}: {needed} in {headers:?}"
            );
        }
        assert_eq!(allowed.header("access-control-max-age"), Some("600"));
        assert!(listed(&allowed, "vary").contains(&"origin".to_owned()));
    }
    // Operators' routes are not for pages.
    let admin = preflight(&app, &app.admin_url, "/metrics", PAGE).await;
    assert_no_cors_header(&admin, "the admin listener");
    app.assert_nothing_written("preflights").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_listed_origins_page_reads_the_payment_its_replay_and_a_refusal() {
    let app = spawn_allowing(PAGE, Options::default()).await;
    let (key, paid) = pay_from(&app, Some(PAGE)).await;
    assert_eq!(paid.status, 201, "{paid:?}");
    assert_eq!(paid.header("access-control-allow-origin"), Some(PAGE));
    let exposed = listed(&paid, "access-control-expose-headers");
    for header in EXPOSED {
        assert!(
            exposed.iter().any(|e| e == header),
            "{header} in {exposed:?}"
        );
    }
    assert!(paid.header("idempotency-expires").is_some(), "{paid:?}");

    let replay = Received::from(
        app.http
            .post(format!("{}/v1/bills/elec-1/pay", app.url))
            .bearer_auth(TestApp::token(31))
            .header("idempotency-key", &key)
            .header("origin", PAGE)
            .json(&payment_body(5_000))
            .send()
            .await
            .expect("the backend replies"),
    )
    .await;
    assert!(replay.is_replay(), "{replay:?}");
    assert_eq!(replay.header("access-control-allow-origin"), Some(PAGE));

    let refused = Received::from(
        app.http
            .post(format!("{}/v1/bills/elec-1/pay", app.url))
            .header("origin", PAGE)
            .send()
            .await
            .expect("the backend replies"),
    )
    .await;
    refused.assert_problem(401, "unauthenticated");
    assert_eq!(refused.header("access-control-allow-origin"), Some(PAGE));
    assert_eq!(app.ledger().await.debits.len(), 1, "one debit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn another_origin_and_a_request_without_one_get_no_cors_header() {
    let app = spawn_allowing(PAGE, Options::default()).await;
    // Served as before the setting: the preflight is a method the route lacks, so the browser
    // never sends the payment; a request it did send could not be read by the page.
    let refused = preflight(&app, &app.url, "/v1/bills/elec-1/pay", OTHER_PAGE).await;
    refused.assert_problem(405, "method-not-allowed");
    assert_no_cors_header(&refused, "another origin's preflight");
    let (_, unreadable) = pay_from(&app, Some(OTHER_PAGE)).await;
    assert_eq!(unreadable.status, 201, "{unreadable:?}");
    assert_no_cors_header(&unreadable, "another origin's payment");

    let (_, not_a_browser) = pay_from(&app, None).await;
    assert_eq!(not_a_browser.status, 201, "{not_a_browser:?}");
    assert_no_cors_header(&not_a_browser, "a payment without Origin");
    let bare_options = Received::from(
        app.http
            .request(Method::OPTIONS, format!("{}/v1/bills/elec-1/pay", app.url))
            .send()
            .await
            .expect("the backend replies"),
    )
    .await;
    bare_options.assert_problem(405, "method-not-allowed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_the_setting_empty_no_reply_carries_a_cors_header() {
    let app = TestApp::spawn().await;
    let refused = preflight(&app, &app.url, "/v1/bills/elec-1/pay", PAGE).await;
    refused.assert_problem(405, "method-not-allowed");
    assert_no_cors_header(&refused, "a preflight with CORS off");
    let (_, paid) = pay_from(&app, Some(PAGE)).await;
    assert_eq!(paid.status, 201, "{paid:?}");
    assert_no_cors_header(&paid, "a payment with CORS off");
}

#[test]
fn a_setting_listing_anything_but_origins_stops_start_up_naming_it() {
    let dev_token = |origins: &str| {
        Command::new(env!("CARGO_BIN_EXE_backend"))
            .arg("dev-token")
            .env_remove("AUTH_JWT_SECRET")
            .env_remove("AUTH_JWKS_URL")
            .env("APP_ENV", "development")
            .env(
                "POLICY_FILE",
                concat!(env!("CARGO_MANIFEST_DIR"), "/../policy.yaml"),
            )
            .env("CORS_ALLOWED_ORIGINS", origins)
            .output()
            .expect("the backend binary runs")
    };
    for (origins, reason) in [
        ("*", "CORS_ALLOWED_ORIGINS may not be `*`"),
        (
            "https://app.example.in/",
            "CORS_ALLOWED_ORIGINS: \"https://app.example.in/\" is not an origin",
        ),
        (
            "https://app.example.in,app.example.com",
            "CORS_ALLOWED_ORIGINS: \"app.example.com\" is not an origin",
        ),
    ] {
        let refused = dev_token(origins);
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(!refused.status.success(), "{origins}: started anyway");
        assert!(stderr.contains(reason), "{origins}: {stderr}");
    }
    for origins in ["", "https://app.example.in, http://127.0.0.1:5173"] {
        let started = dev_token(origins);
        assert!(started.status.success(), "{origins}: {started:?}");
    }
}
