//! The published OpenAPI document matches the public router: every documented (method, path)
//! is routed (served by its handler, not the fallback), every route declared in
//! `backend/src/http/` is documented (but the admin listener's, `admin.rs`, which is not part of
//! the public API), and every problem type is listed.

use std::collections::BTreeSet;

use crate::support::TestApp;

type Route = (String, String);

/// `(METHOD, path)` of every `.route("path", method(handler))` in the public HTTP modules'
/// source.
fn declared_routes() -> BTreeSet<Route> {
    declared_routes_in(concat!(env!("CARGO_MANIFEST_DIR"), "/src/http"))
}

/// `(METHOD, path)` of every `.route("path", method(handler))` in the Rust files of `dir`
/// (not its subfolders), but `admin.rs`: the admin listener's own routes.
pub fn declared_routes_in(dir: &str) -> BTreeSet<Route> {
    let mut routes = BTreeSet::new();
    for entry in std::fs::read_dir(dir).expect("read the HTTP modules") {
        let path = entry.expect("entry").path();
        let is_rust_source = path.extension().is_some_and(|extension| extension == "rs");
        if !is_rust_source || path.file_name().is_some_and(|name| name == "admin.rs") {
            continue;
        }
        let source = std::fs::read_to_string(path).expect("read source");
        for declaration in source.split(".route(").skip(1) {
            let mut parts = declaration.splitn(3, '"');
            let (Some(before), Some(path), Some(rest)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            if !before.trim().is_empty() {
                continue;
            }
            let method = rest
                .trim_start_matches([',', ' ', '\n'])
                .split('(')
                .next()
                .expect("a method router")
                .trim()
                .to_uppercase();
            routes.insert((method, path.to_owned()));
        }
    }
    routes
}

/// `(METHOD, path)` of every operation in an OpenAPI document.
pub fn documented_routes(document: &serde_json::Value) -> BTreeSet<Route> {
    let paths = document["paths"].as_object().expect("paths");
    paths
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .expect("path item")
                .keys()
                .map(move |method| (method.to_uppercase(), path.clone()))
        })
        .collect()
}

#[tokio::test]
async fn document_lists_exactly_the_routes_the_router_declares() {
    let app = TestApp::spawn().await;
    let document: serde_json::Value = app
        .http
        .get(format!("{}/openapi.json", app.url))
        .send()
        .await
        .expect("replies")
        .json()
        .await
        .expect("JSON");
    assert_eq!(document["openapi"], "3.1.0");
    let documented = documented_routes(&document);
    assert_eq!(
        documented,
        declared_routes(),
        "documented vs declared in src/http"
    );

    for (method, path) in &documented {
        let concrete = path
            .replace("{bill_id}", "elec-1")
            .replace("{payment_id}", "8e03978e-40d5-43e8-bc93-6894a57f9324")
            .replace("{slug}", "not-found")
            .replace("{key}", "8e03978e-40d5-43e8-bc93-6894a57f9324");
        let request = app
            .http
            .request(
                method.parse().expect("method"),
                format!("{}{concrete}", app.url),
            )
            .bearer_auth(TestApp::token(1));
        let reply = crate::support::Received::from(request.send().await.expect("replies")).await;
        assert_ne!(reply.status, 405, "{method} {path} is not routed");
        if reply.status == 404 {
            let body = reply.json();
            assert_ne!(
                body["detail"], "No such route.",
                "{method} {path} hit the fallback"
            );
        }
    }
}

#[tokio::test]
async fn document_lists_every_problem_type_and_the_idempotency_headers() {
    let app = TestApp::spawn().await;
    let document = backend::http::openapi::document(&app.state);
    let types = document["components"]["schemas"]["Problem"]["properties"]["type"]["enum"]
        .as_array()
        .expect("problem types");
    assert_eq!(types.len(), shared::ProblemKind::ALL.len());
    for kind in shared::ProblemKind::ALL {
        assert!(
            types.contains(&serde_json::json!(kind.type_uri())),
            "{kind:?}"
        );
    }
    let headers = &document["components"]["headers"];
    for header in ["Idempotent-Replayed", "Retry-After", "Location"] {
        assert!(headers[header].is_object(), "{header}");
    }
    let pay = &document["paths"]["/v1/bills/{bill_id}/pay"]["post"];
    assert!(
        pay["parameters"]
            .as_array()
            .expect("parameters")
            .iter()
            .any(|p| p["name"] == "Idempotency-Key" && p["in"] == "header")
    );
}
