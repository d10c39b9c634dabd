//! The operator API on the admin listener (SPEC §8), against a real backend, bank simulator
//! and database: who may call it (an operator token of the operator secret with the operator
//! role, nothing else, and never through the public listener), a customer's actions with their
//! trails, the queue and "ask the bank now" (the reconciler's look-up, never a second debit),
//! and the double-charge check against the bank's own records.

use serde_json::{Value, json};
use shared::auth::sign_claims;

use std::collections::BTreeSet;

use crate::openapi::{declared_routes_in, documented_routes};
use crate::support::{OPERATOR_SECRET, Options, SECRET, StoreKind, TestApp, new_key, payment_body};

/// Every operator API route, as (method, path) with `{key}` for a key.
const ROUTES: [(&str, &str); 6] = [
    ("GET", "/admin/api/customers/42"),
    ("GET", "/admin/api/customers/42/trail"),
    ("GET", "/admin/api/queue"),
    ("GET", "/admin/api/late-debits"),
    ("POST", "/admin/api/customers/42/keys/{key}/ask-bank"),
    ("POST", "/admin/api/customers/42/ledger-check"),
];

/// Calls an operator route on `base_url` with `token` (none if `None`).
async fn call(
    app: &TestApp,
    base_url: &str,
    (method, path): (&str, &str),
    token: Option<&str>,
    body: &Value,
) -> (u16, Value) {
    let path = path.replace("{key}", &uuid::Uuid::new_v4().to_string());
    let url = format!("{base_url}{path}");
    let mut request = match method {
        "GET" => app.http.get(url),
        _ => app.http.post(url).json(body),
    };
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let reply = request.send().await.expect("the backend replies");
    let status = reply.status().as_u16();
    (status, reply.json().await.unwrap_or(Value::Null))
}

async fn operator(app: &TestApp, method: &str, path: &str, body: &Value) -> (u16, Value) {
    let token = TestApp::operator_token("asha");
    call(app, &app.admin_url, (method, path), Some(&token), body).await
}

async fn only_an_operator_token_opens_the_operator_api_and_only_on_the_admin_listener(
    store: StoreKind,
) {
    let app = TestApp::spawn_on(store).await;
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let operator_claims = json!({
        "sub": "asha", "roles": ["payments-operator"], "iat": now, "exp": now + 600,
    });
    let refused: [(&str, Option<String>, u16, &str); 7] = [
        ("no token", None, 401, "unauthenticated"),
        (
            "a customer's token",
            Some(TestApp::token(42)),
            401,
            "unauthenticated",
        ),
        (
            "operator claims signed with the customers' secret",
            Some(sign_claims(&operator_claims, SECRET.as_bytes())),
            401,
            "unauthenticated",
        ),
        (
            "an expired operator token",
            Some(sign_claims(
                &json!({
                    "sub": "asha", "roles": ["payments-operator"],
                    "iat": now - 4000, "exp": now - 3600,
                }),
                OPERATOR_SECRET.as_bytes(),
            )),
            401,
            "unauthenticated",
        ),
        (
            "an operator token that lives longer than an hour",
            Some(sign_claims(
                &json!({
                    "sub": "asha", "roles": ["payments-operator"],
                    "iat": now, "exp": now + 3601,
                }),
                OPERATOR_SECRET.as_bytes(),
            )),
            401,
            "unauthenticated",
        ),
        (
            "a token of the operator secret without the role",
            Some(sign_claims(
                &json!({ "sub": "42", "roles": ["support"], "iat": now, "exp": now + 600 }),
                OPERATOR_SECRET.as_bytes(),
            )),
            403,
            "forbidden",
        ),
        (
            "a garbled token",
            Some("not.a.token".to_owned()),
            401,
            "unauthenticated",
        ),
    ];
    let body = json!({ "reason": "customer called" });
    for route in ROUTES {
        for (what, token, status, slug) in &refused {
            let (got, problem) = call(&app, &app.admin_url, route, token.as_deref(), &body).await;
            assert_eq!(got, *status, "{what} on {route:?}: {problem}");
            assert_eq!(
                problem["type"],
                format!("/problems/{slug}"),
                "{what} on {route:?}"
            );
        }
        let good = TestApp::operator_token("asha");
        let (public, _) = call(&app, &app.url, route, Some(&good), &body).await;
        assert_eq!(public, 404, "{route:?} is not on the public listener");
    }
    let page = app
        .http
        .get(format!("{}/admin/console", app.url))
        .send()
        .await
        .expect("replies");
    assert_eq!(page.status(), 404, "nor is the console page");
    let page = app
        .http
        .get(format!("{}/admin/console", app.admin_url))
        .send()
        .await
        .expect("replies");
    assert_eq!(page.status(), 200);
    let policy = page.headers()["content-security-policy"]
        .to_str()
        .expect("text");
    assert!(policy.contains("default-src 'self'"), "{policy}");
    assert!(page.text().await.expect("the page").contains("console.js"));
    assert_eq!(
        app.count("key_events").await,
        0,
        "no refused call left a trace"
    );
}

async fn a_customer_shows_each_action_with_its_trail(store: StoreKind) {
    let app = TestApp::spawn_on(store).await;
    let key = new_key();
    let body = payment_body(230_000);
    let first = app.pay(42, Some(&key), "elec-1", &body).await;
    assert_eq!(first.status, 201);
    assert!(app.pay(42, Some(&key), "elec-1", &body).await.is_replay());
    app.trail_of_length(42, 3).await;

    let (status, customer) = operator(&app, "GET", "/admin/api/customers/42", &Value::Null).await;
    assert_eq!(status, 200, "{customer}");
    assert_eq!(customer["user_id"], "42");
    let actions = customer["actions"].as_array().expect("actions");
    assert_eq!(actions.len(), 1, "{customer}");
    let action = &actions[0];
    assert_eq!(action["operation"], "pay_bill");
    assert_eq!(action["status"], "succeeded");
    assert_eq!(action["bill_id"], "elec-1");
    assert_eq!(action["bank_reference"], first.json()["bank_reference"]);
    assert_eq!(action["key"]["state"], "done");
    let events: Vec<&str> = action["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|event| event["event"].as_str().expect("name"))
        .collect();
    assert_eq!(events, ["claimed", "bank_answered", "replayed"]);

    // Not user ids (SPEC §3): a space, a control character, a subject over 255 characters.
    let too_long = format!("/admin/api/customers/{}", "a".repeat(256));
    for missing in [
        "/admin/api/customers/a%20b",
        "/admin/api/customers/a%0Ab",
        &too_long,
    ] {
        let (status, problem) = operator(&app, "GET", missing, &Value::Null).await;
        assert_eq!(
            (status, &problem["type"]),
            (404, &json!("/problems/not-found"))
        );
    }
    let (status, nobody) = operator(&app, "GET", "/admin/api/customers/43", &Value::Null).await;
    assert_eq!(status, 200);
    assert_eq!(nobody["actions"], json!([]));
}

/// A customer's whole trail read a page of two at a time: every event once, newest first by
/// event id, whether it is a `key_events` row or (on PostgreSQL) a routine event kept on its
/// payment's row; the pages together are the trail as the database holds it.
async fn the_whole_trail_pages_newest_first_across_events_kept_on_rows_and_in_the_event_table(
    store: StoreKind,
) {
    let app = TestApp::spawn_on(store).await;
    let body = payment_body(230_000);
    let mut payment_id = String::new();
    for bill in ["elec-1", "gas-1", "water-1"] {
        let key = new_key();
        let paid = app.pay(44, Some(&key), bill, &body).await;
        assert_eq!(paid.status, 201);
        payment_id = paid.json()["payment_id"].as_str().expect("id").to_owned();
        assert!(app.pay(44, Some(&key), bill, &body).await.is_replay());
    }
    assert_eq!(
        app.refund(44, &new_key(), &payment_id, 1_000).await.status,
        201
    );
    let written = app.trail_of_length(44, 11).await;
    assert_eq!(
        written.len(),
        11,
        "three payments, their replays, a refund: {written:?}"
    );
    let in_the_event_table = app
        .scalar("SELECT count(*) FROM key_events WHERE event IN ('claimed', 'bank_answered')")
        .await;
    let expected_in_the_event_table = match store {
        // Only the refund's: a refund's events are all `key_events` rows.
        StoreKind::Postgres => 2,
        StoreKind::Sqlite => 8,
    };
    assert_eq!(in_the_event_table, expected_in_the_event_table);

    let mut read: Vec<(i64, String)> = Vec::new();
    let mut path = "/admin/api/customers/44/trail?limit=2".to_owned();
    loop {
        let (status, page) = operator(&app, "GET", &path, &Value::Null).await;
        assert_eq!(status, 200, "{page}");
        for event in page["events"].as_array().expect("events") {
            let id = event["event_id"].as_i64().expect("every event has an id");
            read.push((id, event["event"].as_str().expect("name").to_owned()));
            if event["event"] == "claimed" || event["event"] == "bank_answered" {
                assert!(event["request_id"].is_string(), "{event}");
                assert!(event["trace_id"].is_string(), "{event}");
            }
        }
        match page["next"].as_str() {
            Some(next) => path = format!("/admin/api/customers/44/trail?limit=2&before={next}"),
            None => break,
        }
    }
    assert!(
        read.windows(2).all(|pair| pair[0].0 > pair[1].0),
        "newest first, none twice: {read:?}"
    );
    let mut oldest_first: Vec<String> = read
        .into_iter()
        .rev()
        .map(|(_, event)| event)
        .filter(|event| event != "customer_viewed")
        .collect();
    oldest_first.truncate(written.len());
    assert_eq!(oldest_first, written);
}

async fn an_unknown_key_is_queued_and_asking_the_bank_resolves_it_without_a_second_debit(
    store: StoreKind,
) {
    let app = TestApp::spawn_with(Options::replies_lost_past_the_timeout(store)).await;
    let key = new_key();
    let reply = app
        .pay(9, Some(&key), "elec-1", &payment_body(230_000))
        .await;
    reply.assert_problem(503, "outcome-pending");

    let (status, queue) = operator(&app, "GET", "/admin/api/queue", &Value::Null).await;
    assert_eq!(status, 200);
    let queued = queue["keys"].as_array().expect("keys");
    assert_eq!(queued.len(), 1, "{queue}");
    assert_eq!(queued[0]["user_id"], "9");
    assert_eq!(queued[0]["state"], "unknown");
    let stored_key = queued[0]["key"].as_str().expect("key").to_owned();
    let ask = format!("/admin/api/customers/9/keys/{stored_key}/ask-bank");

    for (body, field) in [
        (json!({}), "reason"),
        (json!({ "reason": "   " }), "reason"),
        (json!({ "reason": 7 }), "reason"),
        (json!({ "reason": "x".repeat(501) }), "reason"),
    ] {
        let (status, problem) = operator(&app, "POST", &ask, &body).await;
        assert_eq!(status, 422, "{body}: {problem}");
        assert_eq!(problem["field"], field);
    }
    let not_json = app
        .http
        .post(format!("{}{ask}", app.admin_url))
        .bearer_auth(TestApp::operator_token("asha"))
        .body("reason=why")
        .send()
        .await
        .expect("replies");
    assert_eq!(not_json.status(), 400);
    let elsewhere = format!("/admin/api/customers/10/keys/{stored_key}/ask-bank");
    let (status, _) = operator(&app, "POST", &elsewhere, &json!({ "reason": "x" })).await;
    assert_eq!(status, 404, "another customer's key is not found");
    assert_eq!(app.key_state(9, &key).await.as_deref(), Some("unknown"));

    let reason = json!({ "reason": "customer says the app showed an error" });
    let (status, asked) = operator(&app, "POST", &ask, &reason).await;
    assert_eq!(status, 200, "{asked}");
    assert_eq!(
        asked,
        json!({ "result": "resolved", "state": "done", "status": "succeeded" })
    );
    assert_eq!(
        app.ledger().await.debits.len(),
        1,
        "a look-up, never a debit"
    );
    let (_, again) = operator(&app, "POST", &ask, &reason).await;
    assert_eq!(again["result"], "already_final");

    let trail = app.trail(9).await;
    assert_eq!(
        trail,
        [
            "claimed",
            "bank_answer_unknown",
            "operator_lookup",
            "resolved"
        ]
    );
    // The look-up and what it resolved are both recorded against the operator who asked.
    assert_eq!(
        app.texts(
            "SELECT event || ' by ' || operator || ': ' || reason FROM key_events \
             WHERE operator IS NOT NULL ORDER BY event_id"
        )
        .await,
        [
            "operator_lookup by asha: customer says the app showed an error",
            "resolved by asha: customer says the app showed an error"
        ]
    );
    let (_, queue) = operator(&app, "GET", "/admin/api/queue", &Value::Null).await;
    assert_eq!(queue["keys"], json!([]));
}

async fn the_double_charge_check_names_one_bill_debited_under_two_references(store: StoreKind) {
    let app = TestApp::spawn_on(store).await;
    // The incident's broken client: a fresh key for the retry of the same bill.
    let body = payment_body(49_900);
    let first = app.pay(77, Some(&new_key()), "mobile-nov", &body).await;
    let second = app.pay(77, Some(&new_key()), "mobile-nov", &body).await;
    assert_eq!((first.status, second.status), (201, 201));
    assert_eq!(
        app.pay(78, Some(&new_key()), "mobile-nov", &body)
            .await
            .status,
        201
    );

    let reason = json!({ "reason": "complaint #4411: charged twice?" });
    let check = "/admin/api/customers/77/ledger-check";
    let (status, report) = operator(&app, "POST", check, &reason).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["clean"], false);
    assert_eq!(report["movements_checked"], 2);
    let findings = report["findings"].as_array().expect("findings");
    assert_eq!(findings.len(), 1, "{report}");
    assert_eq!(findings[0]["kind"], "double_charge");
    let mut named: Vec<&str> = findings[0]["references"]
        .as_array()
        .expect("references")
        .iter()
        .map(|reference| reference.as_str().expect("text"))
        .collect();
    named.sort_unstable();
    let mut references = [
        first.json()["bank_reference"]
            .as_str()
            .expect("ref")
            .to_owned(),
        second.json()["bank_reference"]
            .as_str()
            .expect("ref")
            .to_owned(),
    ];
    references.sort_unstable();
    assert_eq!(named, references);
    for entry in report["entries"].as_array().expect("entries") {
        assert_eq!(entry["bank_status"], "succeeded");
        assert_eq!(entry["our_status"], "succeeded");
    }

    let (_, clean) = operator(
        &app,
        "POST",
        "/admin/api/customers/78/ledger-check",
        &reason,
    )
    .await;
    assert_eq!(clean["clean"], true, "{clean}");

    let (_, customer) = operator(&app, "GET", "/admin/api/customers/77", &Value::Null).await;
    let events = customer["events"].as_array().expect("customer events");
    let names: Vec<&str> = events
        .iter()
        .map(|event| event["event"].as_str().expect("a name"))
        .collect();
    assert_eq!(names, ["ledger_checked", "customer_viewed"], "{customer}");
    assert_eq!(events[0]["operator"], "asha");
    assert_eq!(events[0]["reason"], "complaint #4411: charged twice?");
    assert_eq!(
        events[1]["operator"], "asha",
        "the read is on the record too"
    );
}

/// The operator API's document lists exactly the `/admin/api` routes declared in
/// `src/http/operator/`, each with the 401 and 403 every one of them can reply.
#[tokio::test]
async fn the_operator_openapi_document_lists_exactly_the_operator_routes() {
    let app = TestApp::spawn().await;
    let document: Value = app
        .http
        .get(format!("{}/admin/openapi.json", app.admin_url))
        .send()
        .await
        .expect("replies")
        .json()
        .await
        .expect("JSON");
    for (path, item) in document["paths"].as_object().expect("paths") {
        for operation in item.as_object().expect("item").values() {
            for status in ["401", "403"] {
                assert!(
                    operation["responses"][status].is_object(),
                    "{path} {status}"
                );
            }
        }
    }
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/http/operator");
    let declared: BTreeSet<_> = declared_routes_in(dir)
        .into_iter()
        .filter(|(_, path)| path.starts_with("/admin/api/"))
        .collect();
    assert_eq!(documented_routes(&document), declared);
    assert_eq!(
        declared.len(),
        ROUTES.len(),
        "and the authorization test covers them all"
    );
}

for_each_store!(
    only_an_operator_token_opens_the_operator_api_and_only_on_the_admin_listener,
    a_customer_shows_each_action_with_its_trail,
    the_whole_trail_pages_newest_first_across_events_kept_on_rows_and_in_the_event_table,
    an_unknown_key_is_queued_and_asking_the_bank_resolves_it_without_a_second_debit,
    the_double_charge_check_names_one_bill_debited_under_two_references,
);
