//! Where payment data may not be stored outside one country, the edge keeps none
//! (`EDGE_KEEPS_REPLIES=false`, docs/edge.md): under the real runtime, with the Durable Objects'
//! storage in files this test reads byte for byte, a paid and a declined key leave their
//! fingerprints and expiry in storage but not one identifying byte of their replies (the payment
//! id, the bill, the bank's reference, the decline); the edge still refuses a repeat in flight (409) and a
//! changed body (422) itself, and the backend replays every finished repeat, byte for byte, with
//! one debit. The control: with replies kept (the default), the same scan finds them, so the scan
//! can see what it looks for.
#![cfg(not(target_arch = "wasm32"))]

mod support;

use serde_json::json;
use support::{Call, PAY_ROUTE, Stack, StackOptions, Via};

const PAY_BODY: &str = r#"{"amount_paise":230000,"payer_vpa":"asha@okbank"}"#;
const CHANGED_BODY: &str = r#"{"amount_paise":230001,"payer_vpa":"asha@okbank"}"#;

fn new_key() -> String {
    uuid::Uuid::new_v4().to_string()
}

async fn stack_keeping_replies(keeps: bool) -> Stack {
    Stack::start(StackOptions {
        bank_latency_ms: 1000,
        durable_objects_on_disk: true,
        shared_settings: vec![("EDGE_KEEPS_REPLIES", keeps.to_string())],
        ..StackOptions::default()
    })
    .await
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

/// Pays once with a second attempt in flight, then repeats: the first reply, and its payment id.
async fn pay_with_a_repeat_in_flight(stack: &Stack, call: &Call) -> (Vec<u8>, String) {
    let (first, in_flight) = tokio::join!(stack.send(Via::Edge, call), async {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        stack.send(Via::Edge, call).await
    });
    assert_eq!(first.status, 201, "{first:?}");
    assert_eq!(
        in_flight.status, 409,
        "the edge's in-flight mark: {in_flight:?}"
    );
    let location = first.header("location").expect("Location");
    let payment_id = location.rsplit('/').next().expect("an id").to_owned();
    (first.bytes.clone(), payment_id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_replies_not_kept_the_edge_stores_no_reply_and_the_backend_replays() {
    let stack = stack_keeping_replies(false).await;
    let key = new_key();
    let call = Call::pay(7, &key, "elec-42", PAY_BODY);
    let (first, payment_id) = pay_with_a_repeat_in_flight(&stack, &call).await;
    for _ in 0..3 {
        let repeat = stack.send(Via::Edge, &call).await;
        assert_eq!(repeat.status, 201);
        assert!(repeat.is_replay());
        assert_eq!(repeat.bytes, first);
    }
    assert_eq!(
        stack.backend_requests(PAY_ROUTE).await,
        4,
        "the first attempt and three replays reached the backend; the 409 did not"
    );
    let changed = Call::pay(7, &key, "elec-42", CHANGED_BODY);
    let refused = stack.send(Via::Edge, &changed).await;
    assert_eq!(refused.status, 422);
    assert_eq!(
        stack.backend_requests(PAY_ROUTE).await,
        4,
        "the 422 came from the edge's fingerprint"
    );

    stack.set_bank_knobs(json!({ "decline_rate": 1.0 })).await;
    let declined_call = Call::pay(7, &new_key(), "elec-43", PAY_BODY);
    let declined = stack.send(Via::Edge, &declined_call).await;
    assert_eq!(declined.status, 402);
    let replayed = stack.send(Via::Edge, &declined_call).await;
    assert!(replayed.is_replay());
    assert_eq!(replayed.bytes, declined.bytes);

    let stored = stack.durable_object_storage();
    assert!(
        contains(&stored, "\"state\":\"finished\""),
        "the finished records are on disk ({} bytes)",
        stored.len()
    );
    for reply_part in [
        payment_id.as_str(),
        "elec-42",
        "bank_reference",
        "payment-declined",
    ] {
        assert!(
            !contains(&stored, reply_part),
            "{reply_part} is stored at the edge"
        );
    }
    assert_eq!(stack.debits().await.len(), 1, "one payment, one debit");
    stack.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_replies_kept_the_same_scan_finds_them() {
    let stack = stack_keeping_replies(true).await;
    let call = Call::pay(7, &new_key(), "elec-42", PAY_BODY);
    let (first, payment_id) = pay_with_a_repeat_in_flight(&stack, &call).await;
    let repeat = stack.send(Via::Edge, &call).await;
    assert_eq!(repeat.bytes, first);
    assert_eq!(
        stack.backend_requests(PAY_ROUTE).await,
        1,
        "replayed by the edge"
    );
    let stored = stack.durable_object_storage();
    for reply_part in [payment_id.as_str(), "elec-42", "bank_reference"] {
        assert!(contains(&stored, reply_part), "{reply_part} is not stored");
    }
    stack.stop().await;
}
