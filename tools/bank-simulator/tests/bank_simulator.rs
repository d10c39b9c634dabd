//! The bank simulator over real sockets: dedupe, declines, failures, lost replies, refunds,
//! knobs and repeatability, each counted at the simulator's ledger.

use std::time::Duration;

use bank_simulator::{
    BankSimulator, DebitOutcome, DebitRequest, DeclineReason, Knobs, Ledger, RefundOutcome,
    RefundRejection, RefundRequest, RunningBank,
};
use reqwest::{Client, StatusCode};
use serde_json::{Value, json};

const PAYER: &str = "asha@okbank";

async fn bank(knobs: Knobs) -> RunningBank {
    BankSimulator::spawn(knobs)
        .await
        .expect("simulator binds a local port")
}

fn debit_request(reference: &str, amount_paise: u64, account: &str) -> DebitRequest {
    DebitRequest {
        reference: reference.into(),
        amount_paise,
        account: account.into(),
    }
}

fn refund_request(reference: &str, debit_reference: &str, amount_paise: u64) -> RefundRequest {
    RefundRequest {
        reference: reference.into(),
        debit_reference: debit_reference.into(),
        amount_paise,
    }
}

/// Sends a request and returns its status and JSON body.
async fn send(request: reqwest::RequestBuilder) -> (StatusCode, Value) {
    let response = request.send().await.expect("simulator replies");
    let status = response.status();
    let body = response.json().await.expect("body is JSON");
    (status, body)
}

async fn post_debit(
    client: &Client,
    bank: &RunningBank,
    request: &DebitRequest,
) -> (StatusCode, Value) {
    send(client.post(format!("{}/debits", bank.url)).json(request)).await
}

async fn post_refund(
    client: &Client,
    bank: &RunningBank,
    request: &RefundRequest,
) -> (StatusCode, Value) {
    send(client.post(format!("{}/refunds", bank.url)).json(request)).await
}

async fn get(client: &Client, bank: &RunningBank, path: &str) -> (StatusCode, Value) {
    send(client.get(format!("{}{path}", bank.url))).await
}

async fn put_knobs(client: &Client, bank: &RunningBank, knobs: &Value) -> (StatusCode, Value) {
    send(client.put(format!("{}/knobs", bank.url)).json(knobs)).await
}

fn debited(reference: &str) -> Value {
    serde_json::to_value(DebitOutcome::Debited {
        bank_reference: reference.into(),
    })
    .expect("serializes")
}

fn declined() -> Value {
    serde_json::to_value(DebitOutcome::Declined {
        reason: DeclineReason::InsufficientFunds,
    })
    .expect("serializes")
}

fn refunded(reference: &str) -> Value {
    serde_json::to_value(RefundOutcome::Refunded {
        bank_reference: reference.into(),
    })
    .expect("serializes")
}

fn rejected(reason: RefundRejection) -> Value {
    serde_json::to_value(RefundOutcome::Rejected { reason }).expect("serializes")
}

#[tokio::test]
async fn healthz_replies_ok() {
    let bank = bank(Knobs::default()).await;
    let (status, body) = get(&Client::new(), &bank, "/healthz").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, json!({"status": "ok"}));
}

#[tokio::test]
async fn a_debit_is_executed_once_and_shows_in_the_ledger() {
    let bank = bank(Knobs::default()).await;
    let client = Client::new();

    let (status, body) =
        post_debit(&client, &bank, &debit_request("pay-1-a", 230_000, PAYER)).await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(body, debited("pay-1-a"));

    let (status, body) = get(&client, &bank, "/ledger").await;
    assert_eq!(status, StatusCode::OK);
    let ledger: Ledger = serde_json::from_value(body).expect("ledger parses");
    assert_eq!(ledger, bank.simulator.ledger());
    assert_eq!(ledger.debits.len(), 1);
    assert_eq!(ledger.debits[0].reference, "pay-1-a");
    assert_eq!(ledger.debits[0].amount_paise, 230_000);
    assert_eq!(ledger.debits[0].account, PAYER);
    assert!(ledger.refunds.is_empty());

    let (status, body) = get(&client, &bank, "/debits/pay-1-a").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, debited("pay-1-a"));
}

#[tokio::test]
async fn a_repeated_reference_replays_the_first_outcome_without_moving_money() {
    let bank = bank(Knobs::default()).await;
    let client = Client::new();
    let first = post_debit(&client, &bank, &debit_request("pay-1-b", 500, PAYER)).await;
    // Even a repeat with another amount is the same debit to the bank.
    let repeat = post_debit(&client, &bank, &debit_request("pay-1-b", 900, PAYER)).await;
    assert_eq!(first, (StatusCode::CREATED, debited("pay-1-b")));
    assert_eq!(repeat, first);
    assert_eq!(bank.simulator.ledger().debits.len(), 1);
}

#[tokio::test]
async fn with_dedupe_off_a_repeated_reference_debits_twice() {
    let bank = bank(Knobs {
        dedupe: false,
        ..Knobs::default()
    })
    .await;
    let client = Client::new();
    let request = debit_request("pay-1-c", 500, PAYER);
    for _ in 0..2 {
        assert_eq!(
            post_debit(&client, &bank, &request).await,
            (StatusCode::CREATED, debited("pay-1-c"))
        );
    }
    let ledger = bank.simulator.ledger();
    assert_eq!(ledger.debits_for("pay-1-c").count(), 2);
}

#[tokio::test]
async fn concurrent_repeats_of_a_reference_execute_exactly_once() {
    // Jitter interleaves the requests' decisions differently from round to round.
    let bank = bank(Knobs {
        jitter_ms: 3,
        ..Knobs::default()
    })
    .await;
    let client = Client::new();
    for round in 0..20 {
        let reference = format!("pay-1-round-{round}");
        let mut requests = tokio::task::JoinSet::new();
        for _ in 0..50 {
            let (client, url) = (client.clone(), bank.url.clone());
            let request = debit_request(&reference, 1_000, PAYER);
            requests.spawn(async move {
                send(client.post(format!("{url}/debits")).json(&request)).await
            });
        }
        while let Some(reply) = requests.join_next().await {
            assert_eq!(
                reply.expect("request task ran"),
                (StatusCode::CREATED, debited(&reference))
            );
        }
        assert_eq!(
            bank.simulator.ledger().debits_for(&reference).count(),
            1,
            "round {round}"
        );
    }
    assert_eq!(bank.simulator.ledger().debits.len(), 20);
}

#[tokio::test]
async fn accounts_named_decline_are_always_declined() {
    let bank = bank(Knobs::default()).await;
    let client = Client::new();
    let request = debit_request("pay-1-d", 500, "decline.test@bank");
    for _ in 0..2 {
        assert_eq!(
            post_debit(&client, &bank, &request).await,
            (StatusCode::PAYMENT_REQUIRED, declined())
        );
    }
    assert_eq!(
        get(&client, &bank, "/debits/pay-1-d").await,
        (StatusCode::OK, declined())
    );
    assert!(bank.simulator.ledger().debits.is_empty());
}

#[tokio::test]
async fn a_decline_rate_of_one_declines_every_debit_and_moves_no_money() {
    let bank = bank(Knobs {
        decline_rate: 1.0,
        ..Knobs::default()
    })
    .await;
    let client = Client::new();
    for reference in ["pay-1-e", "pay-1-f", "pay-1-g"] {
        let reply = post_debit(&client, &bank, &debit_request(reference, 500, PAYER)).await;
        assert_eq!(reply, (StatusCode::PAYMENT_REQUIRED, declined()));
        assert_eq!(
            get(&client, &bank, &format!("/debits/{reference}")).await,
            (StatusCode::OK, declined())
        );
    }
    assert!(bank.simulator.ledger().debits.is_empty());
}

#[tokio::test]
async fn a_simulated_failure_records_nothing_and_names_the_reference() {
    let bank = bank(Knobs {
        error_rate: 1.0,
        ..Knobs::default()
    })
    .await;
    let client = Client::new();
    let request = debit_request("pay-1-h", 500, PAYER);

    let (status, body) = post_debit(&client, &bank, &request).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body["status"], "error");
    assert_eq!(
        body["reference"], "pay-1-h",
        "the bank's own 'not executed'"
    );
    assert_eq!(
        get(&client, &bank, "/debits/pay-1-h").await,
        (
            StatusCode::NOT_FOUND,
            json!({"status": "unknown", "reference": "pay-1-h"})
        ),
        "a reference the bank never saw"
    );
    assert!(bank.simulator.ledger().debits.is_empty());

    // Nothing was remembered, so the retry after recovery is a first attempt.
    bank.simulator.set_knobs(Knobs::default());
    assert_eq!(
        post_debit(&client, &bank, &request).await,
        (StatusCode::CREATED, debited("pay-1-h"))
    );
    assert_eq!(bank.simulator.ledger().debits.len(), 1);
}

#[tokio::test]
async fn a_lost_reply_is_executed_but_sent_after_the_caller_gave_up() {
    let knobs = Knobs {
        lost_reply_rate: 1.0,
        lost_reply_delay_ms: 300,
        ..Knobs::default()
    };
    let bank = bank(knobs).await;
    let impatient = Client::builder()
        .timeout(Duration::from_millis(100))
        .build()
        .expect("client builds");

    let error = impatient
        .post(format!("{}/debits", bank.url))
        .json(&debit_request("pay-1-i", 500, PAYER))
        .send()
        .await
        .expect_err("the reply comes after the client's timeout");
    assert!(error.is_timeout(), "timed out, got {error}");

    assert_eq!(bank.simulator.ledger().debits_for("pay-1-i").count(), 1);
    // Lookups are not subject to the knobs.
    assert_eq!(
        get(&impatient, &bank, "/debits/pay-1-i").await,
        (StatusCode::OK, debited("pay-1-i"))
    );
}

#[tokio::test]
async fn refunds_are_limited_to_the_debit_and_deduplicated() {
    let bank = bank(Knobs::default()).await;
    let client = Client::new();
    post_debit(&client, &bank, &debit_request("pay-1-j", 1_000, PAYER)).await;

    let partial = refund_request("refund-1-a", "pay-1-j", 400);
    assert_eq!(
        post_refund(&client, &bank, &partial).await,
        (StatusCode::CREATED, refunded("refund-1-a"))
    );
    assert_eq!(
        post_refund(&client, &bank, &partial).await,
        (StatusCode::CREATED, refunded("refund-1-a"))
    );

    let too_much = refund_request("refund-1-b", "pay-1-j", 601);
    let exceeds = (
        StatusCode::UNPROCESSABLE_ENTITY,
        rejected(RefundRejection::ExceedsDebit),
    );
    assert_eq!(post_refund(&client, &bank, &too_much).await, exceeds);

    let rest = refund_request("refund-1-c", "pay-1-j", 600);
    assert_eq!(
        post_refund(&client, &bank, &rest).await,
        (StatusCode::CREATED, refunded("refund-1-c"))
    );

    let unknown = refund_request("refund-1-d", "pay-never", 1);
    let unknown_debit = (
        StatusCode::UNPROCESSABLE_ENTITY,
        rejected(RefundRejection::UnknownDebit),
    );
    assert_eq!(post_refund(&client, &bank, &unknown).await, unknown_debit);

    assert_eq!(
        get(&client, &bank, "/refunds/refund-1-a").await,
        (StatusCode::OK, refunded("refund-1-a"))
    );
    assert_eq!(
        get(&client, &bank, "/refunds/refund-1-b").await,
        (StatusCode::OK, exceeds.1)
    );
    assert_eq!(
        get(&client, &bank, "/refunds/refund-never").await.0,
        StatusCode::NOT_FOUND
    );

    let ledger = bank.simulator.ledger();
    let refunds: Vec<_> = ledger
        .refunds
        .iter()
        .map(|entry| (entry.reference.as_str(), entry.amount_paise))
        .collect();
    assert_eq!(refunds, [("refund-1-a", 400), ("refund-1-c", 600)]);
    assert!(ledger.refunds.iter().all(|entry| entry.account == PAYER));
    assert!(
        ledger
            .refunds
            .iter()
            .all(|entry| entry.debit_reference.as_deref() == Some("pay-1-j"))
    );
}

#[tokio::test]
async fn knobs_put_over_http_change_a_running_bank_and_bad_rates_are_refused() {
    let bank = bank(Knobs::default()).await;
    let client = Client::new();

    let declining = Knobs {
        decline_rate: 1.0,
        seed: 7,
        ..Knobs::default()
    };
    let (status, body) = put_knobs(
        &client,
        &bank,
        &serde_json::to_value(&declining).expect("serializes"),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, serde_json::to_value(&declining).expect("serializes"));
    let (_, body) = get(&client, &bank, "/knobs").await;
    assert_eq!(
        serde_json::from_value::<Knobs>(body).expect("knobs parse"),
        declining
    );
    assert_eq!(
        post_debit(&client, &bank, &debit_request("pay-1-k", 500, PAYER))
            .await
            .0,
        StatusCode::PAYMENT_REQUIRED
    );

    let (status, body) = put_knobs(&client, &bank, &json!({"decline_rate": 1.5})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(body["status"], "invalid_request");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|message| message.contains("decline_rate")),
        "{body}"
    );
    assert_eq!(
        bank.simulator.knobs(),
        declining,
        "refused knobs change nothing"
    );

    let (status, _) = put_knobs(&client, &bank, &json!({"decline_rte": 0.5})).await;
    assert_eq!(
        status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "a misspelt knob is refused"
    );
}

#[tokio::test]
async fn reset_forgets_the_ledger_and_the_outcomes() {
    let bank = bank(Knobs::default()).await;
    let client = Client::new();
    post_debit(&client, &bank, &debit_request("pay-1-l", 500, PAYER)).await;

    let response = client
        .post(format!("{}/reset", bank.url))
        .send()
        .await
        .expect("simulator replies");
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
    assert_eq!(bank.simulator.ledger(), Ledger::default());
    assert_eq!(
        get(&client, &bank, "/debits/pay-1-l").await.0,
        StatusCode::NOT_FOUND
    );
}

/// Sends 20 debits one after another and lists their status codes.
async fn twenty_debit_statuses(bank: &RunningBank) -> Vec<StatusCode> {
    let client = Client::new();
    let mut statuses = Vec::new();
    for index in 0..20 {
        let request = debit_request(&format!("pay-1-seq-{index}"), 100, PAYER);
        statuses.push(post_debit(&client, bank, &request).await.0);
    }
    statuses
}

#[tokio::test]
async fn the_same_seed_and_arrivals_give_the_same_outcomes() {
    let knobs = Knobs {
        decline_rate: 0.5,
        seed: 42,
        ..Knobs::default()
    };
    let first_bank = bank(knobs.clone()).await;
    let first = twenty_debit_statuses(&first_bank).await;
    let second = twenty_debit_statuses(&bank(knobs.clone()).await).await;

    assert_eq!(first, second);
    assert!(
        first.contains(&StatusCode::CREATED) && first.contains(&StatusCode::PAYMENT_REQUIRED),
        "{first:?}"
    );

    // Setting the knobs re-seeds: the same sequence again, on the same bank.
    first_bank.simulator.reset();
    first_bank.simulator.set_knobs(knobs);
    assert_eq!(twenty_debit_statuses(&first_bank).await, first);
}

#[tokio::test]
async fn malformed_requests_get_a_json_client_error() {
    let bank = bank(Knobs::default()).await;
    let client = Client::new();
    let debits = format!("{}/debits", bank.url);
    let bodies = [
        json!({"reference": "r", "amount_paise": 0, "account": PAYER}),
        json!({"reference": "r", "amount_paise": -5, "account": PAYER}),
        json!({"reference": "r", "amount_paise": 1.5, "account": PAYER}),
        json!({"reference": "r", "amount_paise": "100", "account": PAYER}),
        json!({"reference": "r", "account": PAYER}),
        json!({"reference": "", "amount_paise": 100, "account": PAYER}),
        json!([]),
    ];
    for body in bodies {
        let (status, reply) = send(client.post(&debits).json(&body)).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        assert_eq!(reply["status"], "invalid_request", "{body}");
        assert!(reply["message"].is_string(), "{body}");
    }

    let not_json = client
        .post(&debits)
        .header("content-type", "application/json")
        .body("{\"reference\": ");
    let (status, reply) = send(not_json).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(reply["status"], "invalid_request");

    let unlabelled = client
        .post(&debits)
        .body(r#"{"reference": "r", "amount_paise": 1, "account": "a@b"}"#);
    assert!(send(unlabelled).await.0.is_client_error());

    let refund = json!({"reference": "f", "debit_reference": "d", "amount_paise": 0});
    let (status, _) = send(client.post(format!("{}/refunds", bank.url)).json(&refund)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);

    assert!(bank.simulator.ledger().debits.is_empty());
}

#[tokio::test]
async fn an_unknown_route_is_a_404_that_does_not_say_unknown() {
    let bank = bank(Knobs::default()).await;
    let client = Client::new();
    for path in ["/wrong/debits/pay-1-k", "/debit/pay-1-k", "/"] {
        let (status, body) = get(&client, &bank, path).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(body, json!({"status": "not_found"}), "{path}");
    }
    let (status, body) = get(&client, &bank, "/refunds/refund-1-k").await;
    assert_eq!(
        (status, body),
        (
            StatusCode::NOT_FOUND,
            json!({"status": "unknown", "reference": "refund-1-k"})
        )
    );
}

#[tokio::test]
async fn look_ups_reply_200_or_the_original_calls_status_as_the_knob_says() {
    let bank = bank(Knobs::default()).await;
    let client = Client::new();
    post_debit(&client, &bank, &debit_request("pay-1-l", 1_000, PAYER)).await;
    post_debit(
        &client,
        &bank,
        &debit_request("pay-1-m", 1_000, "decline.test@bank"),
    )
    .await;
    post_refund(
        &client,
        &bank,
        &refund_request("refund-1-l", "pay-1-l", 400),
    )
    .await;
    post_refund(
        &client,
        &bank,
        &refund_request("refund-1-m", "pay-1-l", 9_999),
    )
    .await;
    let look_ups = async || {
        let mut statuses = Vec::new();
        for path in [
            "/debits/pay-1-l",
            "/debits/pay-1-m",
            "/refunds/refund-1-l",
            "/refunds/refund-1-m",
        ] {
            statuses.push(get(&client, &bank, path).await.0);
        }
        statuses
    };
    assert_eq!(look_ups().await, [StatusCode::OK; 4], "the default: 200");

    let (status, _) = put_knobs(&client, &bank, &json!({"lookup_status": "original"})).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        look_ups().await,
        [
            StatusCode::CREATED,
            StatusCode::PAYMENT_REQUIRED,
            StatusCode::CREATED,
            StatusCode::UNPROCESSABLE_ENTITY
        ],
        "as the original calls replied"
    );
    let (_, body) = get(&client, &bank, "/debits/pay-1-l").await;
    assert_eq!(body, debited("pay-1-l"), "the same body either way");
}
