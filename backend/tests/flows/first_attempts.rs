//! A first attempt and its repeats: a new key, a decline, another body under the key, the
//! repeats of a new process (from the database), refusals before any look-up, and refunds the
//! store refuses.

use super::*;

#[tokio::test]
async fn a_new_key_debits_once_and_its_repeats_replay_the_same_bytes() {
    let (walked, _collecting) = Walked::collect();
    let (flows, key, first) = Flows::with_a_paid_key(&walked).await;
    // The first attempt's reply is remembered: the first repeat comes from memory after
    // admission, and the next ones, the very bytes again, before it.
    let repeats = [
        "a repeat remembered in memory is replayed from there, after admission",
        "the very bytes of a repeat already replayed from memory are replayed before admission",
        "the very bytes of a repeat already replayed from memory are replayed before admission",
    ];
    for case in repeats {
        let repeat = flows.pay(&key, BODY, None).await;
        assert_eq!((repeat.status, repeat.replayed), (201, true));
        assert_eq!(repeat.body, first.body);
        walked.assert_took(case);
    }
    assert_eq!(flows.bank.calls(), 1);
    assert_eq!(flows.bank.moved_paise(), 25_000);
}

#[tokio::test]
async fn another_body_under_the_key_is_refused_and_calls_nothing() {
    let (walked, _collecting) = Walked::collect();
    let (flows, key, _) = Flows::with_a_paid_key(&walked).await;
    let reused = flows.pay(&key, OTHER_BODY, None).await;
    assert_eq!(reused.status, 422);
    assert_eq!(problem_slug(&reused), "idempotency-key-reused");
    walked.assert_took("another body under a remembered key is refused from memory");
    assert_eq!(flows.bank.calls(), 1);
}

#[tokio::test]
async fn after_a_restart_a_finished_key_is_decided_from_the_database() {
    let (walked, _collecting) = Walked::collect();
    let (flows, key, first) = Flows::with_a_paid_key(&walked).await;
    // A new process: nothing in memory, the key only in the database.
    let flows = flows.reopened_after("").await;
    let reused = flows.pay(&key, OTHER_BODY, None).await;
    assert_eq!(reused.status, 422);
    assert_eq!(problem_slug(&reused), "idempotency-key-reused");
    walked.assert_took("another body under a stored finished key is refused");
    let repeat = flows.pay(&key, BODY, None).await;
    assert_eq!((repeat.status, repeat.replayed), (201, true));
    assert_eq!(repeat.body, first.body);
    walked
        .assert_took("a repeat of a finished key found by the claim is replayed from the database");
    assert_eq!(flows.bank.calls(), 1);
}

#[tokio::test]
async fn a_decline_is_a_402_replayed_as_such() {
    let declined = CallOutcome::Declined {
        reason: "insufficient funds".into(),
    };
    let (walked, _collecting) = Walked::collect();
    let flows = Flows::against(LedgerBank::replying([declined])).await;
    let key = IdempotencyKey::mint();
    let first = flows.pay(&key, BODY, None).await;
    assert_eq!(first.status, 402);
    walked.assert_took(
        "a new key is claimed, the bank called once, its final word saved and rendered",
    );
    let repeat = flows.pay(&key, BODY, None).await;
    assert_eq!((repeat.status, repeat.replayed), (402, true));
    walked.assert_took("a repeat remembered in memory is replayed from there, after admission");
    assert_eq!(flows.bank.calls(), 1);
}

#[tokio::test]
async fn a_request_admission_refuses_touches_nothing() {
    let (walked, _collecting) = Walked::collect();
    let flows = Flows::against(LedgerBank::replying([])).await;
    let key = IdempotencyKey::mint().to_string();
    let refusals = [
        (
            vec![key.as_bytes()],
            br#"{"amount_paise":"#.to_vec(),
            400,
            "body-not-json",
        ),
        (
            vec![key.as_bytes()],
            br#"{"amount_paise":100}"#.to_vec(),
            422,
            "invalid-field",
        ),
        (
            vec![],
            BODY.as_bytes().to_vec(),
            400,
            "idempotency-key-missing",
        ),
        (
            vec![&b"not-a-uuid"[..]],
            BODY.as_bytes().to_vec(),
            400,
            "idempotency-key-malformed",
        ),
        (vec![], vec![b' '; 64 * 1024], 413, "body-too-large"),
    ];
    for (key_header_values, body, status, problem) in refusals {
        let refused = flows
            .pay_as_sent(key_header_values, &body, None)
            .await
            .expect("a reply");
        assert_eq!(refused.status, status, "{problem}");
        assert_eq!(problem_slug(&refused), problem);
        walked.assert_took("a request that fails admission is refused before any look-up");
    }
    assert_eq!(flows.bank.calls(), 0);
    assert_eq!(flows.rows("idempotency_keys").await, 0);
}

#[tokio::test]
async fn a_refund_beyond_what_remains_is_422_and_calls_nothing() {
    let flows = Flows::against(LedgerBank::replying([CallOutcome::Succeeded])).await;
    let paid = flows.pay(&IdempotencyKey::mint(), BODY, None).await;
    let payment_id = json(&paid)["payment_id"]
        .as_str()
        .expect("an id")
        .to_owned();
    let too_much = r#"{"amount_paise":30000}"#;
    let (walked, _collecting) = Walked::collect();
    let refused = flows
        .refund(&IdempotencyKey::mint(), &payment_id, too_much)
        .await;
    assert_eq!(refused.status, 422);
    walked.assert_took("a refund larger than what remains is 422");
    let unknown = flows
        .refund(
            &IdempotencyKey::mint(),
            "not-a-payment",
            r#"{"amount_paise":1}"#,
        )
        .await;
    assert_eq!(unknown.status, 404);
    walked.assert_took("a request that fails admission is refused before any look-up");
    let someone_elses = uuid::Uuid::new_v4().to_string();
    let unknown = flows
        .refund(
            &IdempotencyKey::mint(),
            &someone_elses,
            r#"{"amount_paise":1}"#,
        )
        .await;
    assert_eq!(unknown.status, 404);
    walked.assert_took("a refund of a payment the user does not have is 404");
    assert_eq!(flows.bank.calls(), 1);
}
