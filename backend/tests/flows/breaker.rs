//! The bank's circuit breaker, open after two calls with no final word: a new key is refused
//! before any claim, a released key is not claimed again, and a finished key is still replayed.

use super::*;

/// The backend's flags for a breaker that opens after two failed calls, for a minute.
const BREAKER: [&str; 4] = [
    "--bank-breaker-min-calls",
    "2",
    "--bank-breaker-open-seconds",
    "60",
];

/// Opens the breaker: two payments whose calls get no final word (the bank's next two
/// replies).
async fn open_the_breaker(flows: &Flows) {
    for _ in 0..2 {
        assert_eq!(
            flows.pay(&IdempotencyKey::mint(), BODY, None).await.status,
            503
        );
    }
}

#[tokio::test]
async fn while_the_bank_fails_the_breaker_refuses_before_any_claim() {
    let failing = [no_final_word(), no_final_word()];
    let flows = Flows::configured(LedgerBank::replying(failing), &BREAKER).await;
    open_the_breaker(&flows).await;
    let (walked, _collecting) = Walked::collect();
    let refused = flows.pay(&IdempotencyKey::mint(), BODY, None).await;
    assert_eq!(refused.status, 503);
    assert_eq!(problem_slug(&refused), "bank-unavailable");
    walked.assert_took(
        "while the breaker refuses, a new key is 503 bank unavailable and nothing is claimed",
    );
    assert_eq!(
        flows.bank.calls(),
        2,
        "the refused payment never reached the bank"
    );
    assert_eq!(
        flows.rows("idempotency_keys").await,
        2,
        "nor claimed its key"
    );
}

#[tokio::test]
async fn while_the_breaker_refuses_a_finished_key_is_still_replayed() {
    let replies = [CallOutcome::Succeeded, no_final_word(), no_final_word()];
    let flows = Flows::configured(LedgerBank::replying(replies), &BREAKER).await;
    let key = IdempotencyKey::mint();
    let first = flows.pay(&key, BODY, None).await;
    assert_eq!(first.status, 201);
    // A new process, which remembers nothing, and whose breaker then opens.
    let flows = flows.reopened_after("").await;
    open_the_breaker(&flows).await;
    let (walked, _collecting) = Walked::collect();
    let repeat = flows.pay(&key, BODY, None).await;
    assert_eq!((repeat.status, repeat.replayed), (201, true));
    assert_eq!(repeat.body, first.body);
    walked.assert_took("while the breaker refuses, a stored key is still decided on");
    assert_eq!(flows.bank.calls(), 3);
}

#[tokio::test]
async fn while_the_breaker_refuses_a_released_key_is_not_claimed_again() {
    let replies = [not_executed(), no_final_word(), no_final_word()];
    let flows = Flows::configured(LedgerBank::replying(replies), &BREAKER).await;
    let key = IdempotencyKey::mint();
    assert_eq!(flows.pay(&key, BODY, None).await.status, 503);
    open_the_breaker(&flows).await;
    let calls = flows.bank.calls();
    let (walked, _collecting) = Walked::collect();
    let retry = flows.pay(&key, BODY, None).await;
    assert_eq!(retry.status, 503);
    assert_eq!(problem_slug(&retry), "bank-unavailable");
    walked.assert_took("while the breaker refuses, a released key is read and not claimed again");
    assert_eq!(
        flows.bank.calls(),
        calls,
        "the retry never reached the bank"
    );
    assert_eq!(
        flows
            .rows("idempotency_keys WHERE state = 'released'")
            .await,
        1,
        "the key is still released, for a retry once the bank is back"
    );
}
