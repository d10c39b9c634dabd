//! The bank gateway misbehaves on the wire as each mode says: a real bank simulator in process
//! behind it, a plain HTTP client in front (redirects not followed), and the bank's own ledger
//! telling whether money moved.

use std::time::Duration;

use bank_simulator::{BankSimulator, Knobs, RunningBank};
use serde_json::{Value, json};
use test_harness::{BankGateway, GatewayMode, Received, wait_for};

/// A bank, the gateway in front of it (in PassThrough mode), and a client for the gateway.
async fn bank_behind_a_gateway() -> (RunningBank, BankGateway, reqwest::Client) {
    let bank = BankSimulator::spawn(Knobs::default())
        .await
        .expect("start the bank simulator");
    let gateway = BankGateway::start(&bank.url).await;
    let client = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("build the test's client");
    (bank, gateway, client)
}

/// `POST /debits` of 100 paise under `reference`, through the gateway.
async fn debit(client: &reqwest::Client, gateway: &BankGateway, reference: &str) -> Received {
    let body = json!({"reference": reference, "amount_paise": 100, "account": "payer@okbank"});
    let response = client
        .post(format!("{}/debits", gateway.url()))
        .header(
            "traceparent",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        )
        .json(&body)
        .send()
        .await
        .expect("the gateway replies");
    Received::from(response).await
}

/// `GET {path}`, through the gateway.
async fn get(client: &reqwest::Client, gateway: &BankGateway, path: &str) -> Received {
    let response = client
        .get(format!("{}{path}", gateway.url()))
        .send()
        .await
        .expect("the gateway replies");
    Received::from(response).await
}

/// Asserts the gateway's own error page: `status`, HTML, nothing a JSON reader could take for
/// the bank's reply.
fn assert_html_page(received: &Received, status: u16) {
    assert_eq!(received.status, status);
    let content_type = received.header("content-type").unwrap_or_default();
    assert!(content_type.starts_with("text/html"), "{content_type}");
    assert!(
        serde_json::from_slice::<Value>(&received.bytes).is_err(),
        "not JSON: {}",
        String::from_utf8_lossy(&received.bytes)
    );
}

#[tokio::test]
async fn pass_through_debits_once_and_returns_the_banks_201_and_its_look_ups() {
    let (bank, gateway, client) = bank_behind_a_gateway().await;

    let reply = debit(&client, &gateway, "pay-pass").await;

    assert_eq!(reply.status, 201);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert_eq!(
        reply.json(),
        json!({"status": "debited", "bank_reference": "pay-pass"})
    );
    assert_eq!(bank.simulator.ledger().debits_for("pay-pass").count(), 1);
    let looked_up = get(&client, &gateway, "/debits/pay-pass").await;
    assert_eq!(looked_up.status, 200);
    assert_eq!(looked_up.json()["bank_reference"], "pay-pass");
    let never_seen = get(&client, &gateway, "/debits/pay-never?from=gateway").await;
    assert_eq!(never_seen.status, 404);
    assert_eq!(
        never_seen.json(),
        json!({"status": "unknown", "reference": "pay-never"})
    );
    let ledger = get(&client, &gateway, "/ledger").await;
    assert_eq!(ledger.json()["debits"].as_array().map(Vec::len), Some(1));
    assert_eq!(gateway.calls_forwarded(), 1);
    assert_eq!(gateway.replied_itself(), 0);
}

#[tokio::test]
async fn unavailable_replies_503_html_to_every_request_and_forwards_nothing() {
    let (bank, gateway, client) = bank_behind_a_gateway().await;
    gateway.set_mode(GatewayMode::Unavailable);

    let reply = debit(&client, &gateway, "pay-down").await;
    let looked_up = get(&client, &gateway, "/debits/pay-down").await;

    assert_html_page(&reply, 503);
    assert_html_page(&looked_up, 503);
    assert!(bank.simulator.ledger().debits.is_empty());
    assert_eq!(gateway.calls_forwarded(), 0);
    assert_eq!(gateway.replied_itself(), 2);
}

#[tokio::test]
async fn unavailable_after_forwarding_replies_503_html_yet_the_bank_debits() {
    let (bank, gateway, client) = bank_behind_a_gateway().await;
    gateway.set_mode(GatewayMode::UnavailableAfterForwarding);

    let reply = debit(&client, &gateway, "pay-late").await;

    assert_html_page(&reply, 503);
    assert_eq!(gateway.calls_forwarded(), 1);
    assert_eq!(gateway.replied_itself(), 1);
    wait_for(
        "the forwarded debit in the bank's ledger",
        Duration::from_secs(5),
        async || bank.simulator.ledger().debits_for("pay-late").count() == 1,
    )
    .await;
    let looked_up = get(&client, &gateway, "/debits/pay-late").await;
    assert_eq!(looked_up.status, 200, "look-ups pass through");
    assert_eq!(looked_up.json()["status"], "debited");
}

#[tokio::test]
async fn redirects_calls_replies_307_with_the_location_and_debits_nothing() {
    let (bank, gateway, client) = bank_behind_a_gateway().await;
    let location = "https://bank.example/maintenance";
    gateway.set_mode(GatewayMode::RedirectsCalls {
        location: location.to_owned(),
    });

    let reply = debit(&client, &gateway, "pay-moved").await;

    assert_eq!(reply.status, 307);
    assert_eq!(reply.header("location"), Some(location));
    assert!(bank.simulator.ledger().debits.is_empty());
    assert_eq!(gateway.calls_forwarded(), 0);
    assert_eq!(gateway.replied_itself(), 1);
    let looked_up = get(&client, &gateway, "/debits/pay-moved").await;
    assert_eq!(looked_up.status, 404, "look-ups pass through");
}

#[tokio::test]
async fn huge_replies_pad_the_banks_reply_to_exactly_the_asked_size() {
    let (bank, gateway, client) = bank_behind_a_gateway().await;
    let bytes = 3 * 1024 * 1024 + 7;
    gateway.set_mode(GatewayMode::HugeReplies { bytes });

    let reply = debit(&client, &gateway, "pay-huge").await;

    assert_eq!(reply.status, 201);
    assert_eq!(reply.bytes.len(), bytes);
    let body = reply.json();
    assert_eq!(body["status"], "debited");
    assert_eq!(body["bank_reference"], "pay-huge");
    assert!(body["padding"].is_string());
    assert_eq!(bank.simulator.ledger().debits_for("pay-huge").count(), 1);
    assert_eq!(gateway.calls_forwarded(), 1);
    assert_eq!(gateway.replied_itself(), 0);
    let looked_up = get(&client, &gateway, "/debits/pay-huge").await;
    assert_eq!(
        looked_up.json(),
        json!({"status": "debited", "bank_reference": "pay-huge"}),
        "look-ups pass through unpadded"
    );
}

#[tokio::test]
async fn names_another_reference_replies_with_the_banks_outcome_for_pay_not_yours() {
    let (bank, gateway, client) = bank_behind_a_gateway().await;
    gateway.set_mode(GatewayMode::NamesAnotherReference);

    let reply = debit(&client, &gateway, "pay-mine").await;

    assert_eq!(reply.status, 201);
    assert_eq!(
        reply.json(),
        json!({"status": "debited", "bank_reference": "pay-not-yours"})
    );
    assert_eq!(
        bank.simulator.ledger().debits_for("pay-mine").count(),
        1,
        "the bank debited the call's own reference"
    );
    let never_seen = get(&client, &gateway, "/debits/pay-never").await;
    assert_eq!(
        never_seen.json()["reference"],
        "pay-never",
        "look-ups pass through"
    );
}

#[tokio::test]
async fn switching_back_to_pass_through_forwards_again() {
    let (bank, gateway, client) = bank_behind_a_gateway().await;
    gateway.set_mode(GatewayMode::Unavailable);
    assert_html_page(&debit(&client, &gateway, "pay-again").await, 503);

    gateway.set_mode(GatewayMode::PassThrough);
    let reply = debit(&client, &gateway, "pay-again").await;

    assert_eq!(reply.status, 201);
    assert_eq!(bank.simulator.ledger().debits_for("pay-again").count(), 1);
}

#[tokio::test]
async fn a_dropped_gateway_stops_replying() {
    let (_bank, gateway, _client) = bank_behind_a_gateway().await;
    let url = gateway.url();

    drop(gateway);

    wait_for(
        "the gateway's port to close",
        Duration::from_secs(5),
        async || {
            let fresh = reqwest::Client::builder()
                .no_proxy()
                .build()
                .expect("build a client");
            fresh.get(format!("{url}/ledger")).send().await.is_err()
        },
    )
    .await;
}
