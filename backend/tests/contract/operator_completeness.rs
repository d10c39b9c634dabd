//! The operator console is complete or says it is not (SPEC §8): a ledger check reads every
//! movement of a customer, however many, and finds a double charge among the oldest; every list
//! pages with a cursor, each row reached once; a new late debit is on the first page however
//! many came before; a reason with a control character is refused before anything is leased;
//! operators' reads are in the customer's trail; and ledger checks leave payments their bank
//! calls. Against a real backend, database and bank simulator, on both stores.

use std::collections::HashSet;
use std::time::Duration;

use backend::config::Limits;
use bank_simulator::Knobs;
use serde_json::{Value, json};

use crate::support::{Options, StoreKind, TestApp, new_key, payment_body};

/// An operator request to the admin listener; the status and the JSON body.
async fn operator(app: &TestApp, method: &str, path: &str, body: &Value) -> (u16, Value) {
    let url = format!("{}{path}", app.admin_url);
    let request = match method {
        "GET" => app.http.get(url),
        _ => app.http.post(url).json(body),
    };
    let reply = request
        .bearer_auth(TestApp::operator_token("asha"))
        .send()
        .await
        .expect("the backend replies");
    let status = reply.status().as_u16();
    (status, reply.json().await.unwrap_or(Value::Null))
}

/// Writes `count` succeeded payments of `user`, a minute apart (the first the newest), each
/// debited at the bank under its own reference; the two oldest pay one bill ("dup-bill") twice,
/// the incident's double charge. Returns the double charge's references.
async fn payments_at_the_bank(
    app: &TestApp,
    store: StoreKind,
    user: u64,
    count: i64,
) -> [String; 2] {
    let sql = match store {
        StoreKind::Sqlite => format!(
            "WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < {count}) \
             INSERT INTO payments (payment_id, user_id, bill_id, amount_paise, payer_vpa, status, \
                                   bank_reference, created_at, finished_at) \
             SELECT randomblob(16), {user}, \
                    CASE WHEN n > {count} - 2 THEN 'dup-bill' ELSE 'bill-' || n END, 1000, \
                    'asha@okbank', 'succeeded', 'pay-seed-{user}-' || n, \
                    CAST(unixepoch('subsec') * 1000000 AS INTEGER) - n * 60000000, NULL FROM g"
        ),
        StoreKind::Postgres => format!(
            "INSERT INTO payments (payment_id, user_id, bill_id, amount_paise, payer_vpa, status, \
                                   bank_reference, created_at) \
             SELECT gen_random_uuid(), {user}, \
                    CASE WHEN g > {count} - 2 THEN 'dup-bill' ELSE 'bill-' || g END, 1000, \
                    'asha@okbank', 'succeeded', 'pay-seed-{user}-' || g, \
                    now() - make_interval(mins => g) \
             FROM generate_series(1, {count}) AS g"
        ),
    };
    app.execute(&sql).await;
    let references = app
        .texts(&format!(
            "SELECT bank_reference FROM payments WHERE user_id = '{user}'"
        ))
        .await;
    for reference in &references {
        let debited = app
            .http
            .post(format!("{}/debits", app.bank.url))
            .json(
                &json!({ "reference": reference, "amount_paise": 1000, "account": "asha@okbank" }),
            )
            .send()
            .await
            .expect("the bank replies");
        assert_eq!(debited.status(), 201);
    }
    [
        format!("pay-seed-{user}-{}", count - 1),
        format!("pay-seed-{user}-{count}"),
    ]
}

async fn a_ledger_check_reads_every_movement_and_finds_a_double_charge_among_the_oldest(
    store: StoreKind,
) {
    let app = TestApp::spawn_on(store).await;
    let mut doubled = payments_at_the_bank(&app, store, 90, 600).await.to_vec();
    let reason = json!({ "reason": "complaint #77: charged twice in March?" });
    let (status, report) = operator(
        &app,
        "POST",
        "/admin/api/customers/90/ledger-check",
        &reason,
    )
    .await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["movements_checked"], 600);
    assert_eq!(report["complete"], true);
    assert_eq!(report["clean"], false);
    let findings = report["findings"].as_array().expect("findings");
    assert_eq!(findings.len(), 1, "{report}");
    assert_eq!(findings[0]["kind"], "double_charge");
    let mut named: Vec<String> = findings[0]["references"]
        .as_array()
        .expect("references")
        .iter()
        .map(|reference| reference.as_str().expect("text").to_owned())
        .collect();
    named.sort();
    doubled.sort();
    assert_eq!(named, doubled);

    // Paging: every movement once, newest first, page by page.
    let mut seen = HashSet::new();
    let mut last_created: Option<time::OffsetDateTime> = None;
    let mut path = "/admin/api/customers/90?limit=200".to_owned();
    let mut pages = 0;
    loop {
        let (status, page) = operator(&app, "GET", &path, &Value::Null).await;
        assert_eq!(status, 200, "{page}");
        pages += 1;
        for action in page["actions"].as_array().expect("actions") {
            assert!(
                seen.insert(action["id"].to_string()),
                "a movement shown twice"
            );
            let created = time::OffsetDateTime::parse(
                action["created_at"].as_str().expect("time"),
                &time::format_description::well_known::Rfc3339,
            )
            .expect("RFC 3339");
            if let Some(last) = last_created {
                assert!(created <= last, "newest first: {created} after {last}");
            }
            last_created = Some(created);
        }
        match page["next"].as_str() {
            Some(next) => path = format!("/admin/api/customers/90?limit=200&before={next}"),
            None => break,
        }
    }
    assert_eq!((seen.len(), pages), (600, 3));

    // A cursor or limit that does not read names the parameter.
    for (bad, field) in [
        ("?before=yesterday", "before"),
        ("?limit=0", "limit"),
        ("?limit=201", "limit"),
        ("?limit=ten", "limit"),
    ] {
        let (status, problem) = operator(
            &app,
            "GET",
            &format!("/admin/api/customers/90{bad}"),
            &Value::Null,
        )
        .await;
        assert_eq!((status, &problem["field"]), (422, &json!(field)), "{bad}");
    }

    // Each read is in the customer's trail, with the operator's name.
    let (_, trail) = operator(&app, "GET", "/admin/api/customers/90/trail", &Value::Null).await;
    let events = trail["events"].as_array().expect("events");
    assert_eq!(
        events[0]["event"], "customer_viewed",
        "newest first: this very read"
    );
    assert_eq!(events[0]["operator"], "asha");
    let views = events
        .iter()
        .filter(|event| event["event"] == "customer_viewed")
        .count();
    assert!(views >= 4, "the three pages and this trail read: {views}");
    assert!(
        events.iter().any(|event| event["event"] == "ledger_checked"
            && event["detail"]
                .as_str()
                .is_some_and(|d| d.contains("complete"))),
        "{trail}"
    );
}

async fn five_hundred_and_one_late_debits_are_each_reached_and_the_newest_comes_first(
    store: StoreKind,
) {
    let app = TestApp::spawn_on(store).await;
    let insert = match store {
        StoreKind::Postgres => {
            "INSERT INTO key_events (user_id, key, resource_id, event, detail) \
             SELECT 91, gen_random_uuid(), gen_random_uuid(), 'late_debit_found', \
                    'late debit ' || g FROM generate_series(1, 501) AS g"
        }
        StoreKind::Sqlite => {
            "WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 501) \
             INSERT INTO key_events (user_id, key, resource_id, event, detail) \
             SELECT 91, randomblob(16), randomblob(16), 'late_debit_found', 'late debit ' || n \
             FROM g"
        }
    };
    app.execute(insert).await;
    let newest = app
        .scalar("SELECT max(event_id) FROM key_events WHERE event = 'late_debit_found'")
        .await;
    let (status, queue) = operator(&app, "GET", "/admin/api/queue", &Value::Null).await;
    assert_eq!(status, 200, "{queue}");
    assert_eq!(queue["late_debits"][0]["found"]["event_id"], newest);

    let mut seen = Vec::new();
    let mut path = "/admin/api/late-debits?limit=200".to_owned();
    loop {
        let (status, page) = operator(&app, "GET", &path, &Value::Null).await;
        assert_eq!(status, 200, "{page}");
        for late in page["late_debits"].as_array().expect("late debits") {
            seen.push(late["found"]["event_id"].as_i64().expect("an id"));
        }
        match page["next"].as_str() {
            Some(next) => path = format!("/admin/api/late-debits?limit=200&before={next}"),
            None => break,
        }
    }
    assert_eq!(seen.len(), 501);
    assert!(
        seen.windows(2).all(|pair| pair[0] > pair[1]),
        "newest first, each once"
    );
}

async fn a_reason_with_a_control_character_is_refused_before_the_key_is_leased(store: StoreKind) {
    let app = TestApp::spawn_on(store).await;
    let key = new_key();
    app.claim_without_paying(92, &key, &payment_body(500)).await;
    app.age_keys(Some(&key), Duration::from_secs(6 * 60)).await;
    let key_uuid = crate::support::storage_uuid(&key);
    let ask = format!("/admin/api/customers/92/keys/{key_uuid}/ask-bank");
    for reason in ["before\u{0}after", "two\nlines", "tab\there", "bell\u{7}"] {
        let (status, problem) = operator(&app, "POST", &ask, &json!({ "reason": reason })).await;
        assert_eq!(
            (status, &problem["field"]),
            (422, &json!("reason")),
            "{reason:?}"
        );
    }
    // Nothing was leased (a lease would hold the key for a minute: 409) nor recorded: a proper
    // request takes the key at once.
    let (status, reply) = operator(&app, "POST", &ask, &json!({ "reason": "ticket 9" })).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["result"], "released", "the bank never saw it");
    let lookups = app
        .scalar(
            "SELECT count(*) FROM key_events WHERE user_id = '92' AND event = 'operator_lookup'",
        )
        .await;
    assert_eq!(lookups, 1, "only the accepted request is in the trail");
}

crate::for_each_store!(
    a_ledger_check_reads_every_movement_and_finds_a_double_charge_among_the_oldest,
    five_hundred_and_one_late_debits_are_each_reached_and_the_newest_comes_first,
    a_reason_with_a_control_character_is_refused_before_the_key_is_leased,
);

/// Two ledger checks at once, each with look-ups the bank replies slowly, while customers pay:
/// the checks keep to their share of `MAX_BANK_CALLS`, so every payment gets its bank call
/// within `BANK_QUEUE_WAIT_MS` (201, never 503 "bank at capacity"); and a second check of a
/// customer already being checked is 409.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_ledger_checks_at_once_leave_payments_their_bank_calls() {
    let app = TestApp::spawn_with(Options {
        limits: Limits {
            max_bank_calls: 8,
            bank_queue_wait: Duration::from_millis(300),
            ..Limits::default()
        },
        ..Options::default()
    })
    .await;
    payments_at_the_bank(&app, StoreKind::Postgres, 93, 12).await;
    payments_at_the_bank(&app, StoreKind::Postgres, 94, 12).await;
    app.bank.simulator.set_knobs(Knobs {
        lookup_latency_ms: 400,
        ..Knobs::default()
    });
    let reason = json!({ "reason": "audit" });
    let checks: Vec<_> = [93, 94]
        .into_iter()
        .map(|user| {
            let (admin, http, reason) = (app.admin_url.clone(), app.http.clone(), reason.clone());
            tokio::spawn(async move {
                let reply = http
                    .post(format!("{admin}/admin/api/customers/{user}/ledger-check"))
                    .bearer_auth(TestApp::operator_token("asha"))
                    .json(&reason)
                    .send()
                    .await
                    .expect("replies");
                let status = reply.status().as_u16();
                (status, reply.json::<Value>().await.expect("JSON"))
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (status, busy) = operator(
        &app,
        "POST",
        "/admin/api/customers/93/ledger-check",
        &reason,
    )
    .await;
    assert_eq!(status, 409, "one check per customer at a time: {busy}");

    let app = &app;
    let payments: Vec<_> = (0..6)
        .map(|n| async move {
            let bill = format!("bill-{n}");
            app.pay(95, Some(&new_key()), &bill, &payment_body(100))
                .await
        })
        .collect();
    for paid in futures_util::future::join_all(payments).await {
        assert_eq!(paid.status, 201, "{}", String::from_utf8_lossy(&paid.bytes));
    }
    for check in checks {
        let (status, report) = check.await.expect("joins");
        assert_eq!(status, 200, "{report}");
        assert_eq!(report["complete"], true, "{report}");
        assert_eq!(report["movements_checked"], 12);
    }
}
