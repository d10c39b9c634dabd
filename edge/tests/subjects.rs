//! Opaque subjects through the edge (SPEC §7, "Claims"): users as identity providers name them,
//! Auth0 (`auth0|…`), Firebase (a 28-character uid), Cognito or Keycloak (a UUID), and `42`
//! beside `042`, pay at once with one shared key through the Worker under `workerd`, in both
//! edge modes (replies kept at the edge; none kept, `EDGE_KEEPS_REPLIES=false`). Per user: a
//! repeat in flight is the edge's 409, a changed body the edge's 422, every finished repeat the
//! first reply byte for byte, a read of one's own payment 200 and of another's 404; at the
//! bank's ledger, one debit per user. A token naming no usable user gets at the edge the
//! backend's own 401, saying why, and is never forwarded.
#![cfg(not(target_arch = "wasm32"))]

mod support;

use futures_util::future::join_all;
use serde_json::json;
use support::{Call, PAY_ROUTE, Received, Stack, StackOptions, Via};
use test_harness::PROVIDER_SUBJECTS;

const PAY_BODY: &str = r#"{"amount_paise":230000,"payer_vpa":"asha@okbank"}"#;
const CHANGED_BODY: &str = r#"{"amount_paise":230001,"payer_vpa":"asha@okbank"}"#;

fn as_token(call: Call, token: &str) -> Call {
    call.with_header("authorization", &format!("Bearer {token}"))
}

fn as_subject(call: Call, subject: &str) -> Call {
    as_token(call, &Stack::token_for_subject(subject))
}

/// Pays once with a second attempt in flight: the first reply and its payment id.
async fn pay_with_a_repeat_in_flight(stack: &Stack, call: &Call) -> (Received, String) {
    let (first, in_flight) = tokio::join!(stack.send(Via::Edge, call), async {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        stack.send(Via::Edge, call).await
    });
    assert_eq!(first.status, 201, "{first:?}");
    assert_eq!(in_flight.status, 409, "the edge's in-flight mark");
    let location = first.header("location").expect("Location");
    let payment_id = location.rsplit('/').next().expect("an id").to_owned();
    (first, payment_id)
}

async fn each_subject_pays_once_under_one_shared_key(keeps_replies: bool) {
    let stack = Stack::start(StackOptions {
        bank_latency_ms: 1000,
        shared_settings: vec![("EDGE_KEEPS_REPLIES", keeps_replies.to_string())],
        ..StackOptions::default()
    })
    .await;
    let key = uuid::Uuid::new_v4().to_string();
    let calls: Vec<Call> = PROVIDER_SUBJECTS
        .iter()
        .map(|subject| as_subject(Call::pay(0, &key, "elec-42", PAY_BODY), subject))
        .collect();
    let firsts = join_all(
        calls
            .iter()
            .map(|call| pay_with_a_repeat_in_flight(&stack, call)),
    )
    .await;
    for ((subject, call), (first, _)) in PROVIDER_SUBJECTS.iter().zip(&calls).zip(&firsts) {
        let repeat = stack.send(Via::Edge, call).await;
        assert_eq!(
            (repeat.status, repeat.is_replay()),
            (201, true),
            "{subject}"
        );
        assert_eq!(repeat.bytes, first.bytes, "{subject}: the first reply");
        let changed = call.clone().with_body(CHANGED_BODY);
        assert_eq!(
            stack.send(Via::Edge, &changed).await.status,
            422,
            "{subject}"
        );
    }
    let forwarded_per_user = if keeps_replies { 1 } else { 2 };
    assert_eq!(
        stack.backend_requests(PAY_ROUTE).await,
        forwarded_per_user * PROVIDER_SUBJECTS.len() as u64,
        "per user the first attempt{}; the 409 and the 422 were the edge's",
        if keeps_replies { "" } else { " and the replay" }
    );
    for (reader, subject) in PROVIDER_SUBJECTS.iter().enumerate() {
        for (owner, (_, payment_id)) in firsts.iter().enumerate() {
            let read = as_subject(
                Call::get(&format!("/v1/payments/{payment_id}"), None),
                subject,
            );
            let expected = if reader == owner { 200 } else { 404 };
            assert_eq!(
                stack.send(Via::Edge, &read).await.status,
                expected,
                "{subject} reads {}'s payment",
                PROVIDER_SUBJECTS[owner]
            );
        }
    }
    let debits = stack.debits().await;
    assert_eq!(
        debits.len(),
        PROVIDER_SUBJECTS.len(),
        "one debit per user: {debits:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_subjects_pay_once_each_under_one_key_with_replies_kept_at_the_edge() {
    each_subject_pays_once_under_one_shared_key(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_subjects_pay_once_each_under_one_key_with_no_reply_kept_at_the_edge() {
    each_subject_pays_once_under_one_shared_key(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_naming_no_usable_user_gets_the_backends_401_at_the_edge_saying_why() {
    let stack = Stack::start(StackOptions::default()).await;
    let key = uuid::Uuid::new_v4().to_string();
    let exp = time::OffsetDateTime::now_utc().unix_timestamp() + 600;
    let cases = [
        (json!({ "exp": exp }), "the token has no user claim"),
        (json!({ "sub": "", "exp": exp }), "the user claim is empty"),
        (
            json!({ "sub": "a".repeat(256), "exp": exp }),
            "longer than 255",
        ),
        (json!({ "sub": "asha bhat", "exp": exp }), "printable ASCII"),
        (json!({ "sub": "müller", "exp": exp }), "printable ASCII"),
    ];
    for (claims, why) in &cases {
        let call = as_token(
            Call::pay(0, &key, "elec-42", PAY_BODY),
            &Stack::token_with_claims(claims),
        );
        let at_edge = stack.send(Via::Edge, &call).await;
        let direct = stack.send(Via::Backend, &call).await;
        assert_eq!(at_edge.status, 401, "{claims}");
        assert_eq!(
            at_edge.bytes, direct.bytes,
            "{claims}: the backend's own problem"
        );
        let detail = at_edge.json()["detail"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(detail.contains(why), "{claims}: {detail}");
    }
    assert_eq!(
        stack.backend_requests(PAY_ROUTE).await,
        cases.len() as u64,
        "only the direct requests reached the backend"
    );
    assert!(stack.debits().await.is_empty(), "nothing charged");
}
