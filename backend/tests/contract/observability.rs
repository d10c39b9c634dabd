//! What on-call reads (docs/metrics.md): after a payment and its replay the latency histograms
//! have moved (the request's, by route template and status class; the bank call's, by call and
//! outcome; the claim's and the outcome's writes), the saturation gauges and
//! `payments_build_info` are there, and every metric on the wire is one the generated list names,
//! under the one prefix (the list itself is filled by the calls that register the metrics:
//! `backend/src/metrics/list.rs`).

use backend::metrics::metric_list;

use crate::support::{TestApp, metrics_text, new_key, payment_body};

const PAY: &str = r#"route="/v1/bills/{bill_id}/pay",method="POST""#;

#[tokio::test]
async fn a_payment_and_its_replay_move_the_histograms_and_every_exported_metric_is_listed() {
    let app = TestApp::spawn().await;
    let key = new_key();
    let first = app.pay(7, Some(&key), "elec-1", &payment_body(5_000)).await;
    assert_eq!(first.status, 201);
    let replay = app.pay(7, Some(&key), "elec-1", &payment_body(5_000)).await;
    assert!(replay.is_replay());

    let requests =
        format!(r#"payments_http_request_duration_seconds_count{{{PAY},status_class="2xx"}}"#);
    assert_eq!(app.metric(&requests).await, 2.0, "{requests}");
    let debits = r#"payments_bank_call_duration_seconds_count{call="debit",outcome="succeeded"}"#;
    assert_eq!(app.metric(debits).await, 1.0);
    for write in ["claim", "finish"] {
        let series =
            format!(r#"payments_database_write_duration_seconds_count{{write="{write}"}}"#);
        assert_eq!(app.metric(&series).await, 1.0, "{series}");
    }
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(
        app.metric(&format!(r#"payments_build_info{{version="{version}"}}"#))
            .await,
        1.0
    );
    assert_eq!(app.metric("payments_bank_calls_in_flight").await, 0.0);
    assert_eq!(
        app.metric("payments_database_pool_max_connections").await,
        20.0
    );
    assert!(
        app.metric(r#"payments_database_pool_connections{state="idle"}"#)
            .await
            >= 1.0
    );
    assert_eq!(
        app.metric("payments_database_replication_required").await,
        0.0
    );

    let exported = metrics_text(&app.http, &app.admin_url).await;
    let listed: Vec<String> = metric_list().into_iter().map(|entry| entry.name).collect();
    let under_30s = exported
        .lines()
        .find(|line| {
            line.starts_with("payments_http_request_duration_seconds_bucket{")
                && line.contains(PAY)
                && line.contains(r#"status_class="2xx""#)
                && line.contains(r#"le="30.0""#)
        })
        .unwrap_or_else(|| panic!("no 30 s bucket of the pay route in\n{exported}"));
    assert!(under_30s.ends_with(" 2"), "{under_30s}");
    let mut seen = 0;
    for line in exported.lines() {
        let Some(described) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let name = described.split(' ').next().unwrap_or_default();
        assert!(
            listed.iter().any(|listed| listed == name),
            "{name} is exported but not listed"
        );
        assert!(name.starts_with("payments_"), "{name} lacks the prefix");
        seen += 1;
    }
    assert!(seen >= 20, "the scrape names {seen} metrics");
}
