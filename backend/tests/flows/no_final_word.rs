//! Calls with no final word from the bank: outcome pending, a key stuck `started`, a status check
//! due, every check the rail allows spent, and the breaker while the bank fails.

use super::*;

#[tokio::test]
async fn no_final_word_is_outcome_pending_with_when_it_will_be_known() {
    let (walked, _collecting) = Walked::collect();
    let lost = CallOutcome::MayBeInFlight {
        reason: "timed out".into(),
    };
    let flows = Flows::against(LedgerBank::replying([lost])).await;
    let key = IdempotencyKey::mint();
    let first = flows.pay(&key, BODY, None).await;
    assert_eq!(first.status, 503);
    let problem = json(&first);
    assert_eq!(slug_of(&problem), "outcome-pending", "{problem}");
    assert!(problem["next_check_at"].is_string(), "{problem}");
    walked.assert_took(
        "no final word from the bank leaves the key unknown, with when its first check is due",
    );
    // The repeat does not call the bank again: the rail's first check is not due.
    let repeat = flows.pay(&key, BODY, None).await;
    assert_eq!(repeat.status, 503);
    walked.assert_took(
        "an unknown key whose next check is not due is 503 outcome pending, saying when it will be known",
    );
    assert_eq!(flows.bank.calls(), 1);
}

#[tokio::test]
async fn a_key_stuck_started_past_stuck_after_is_asked_of_the_bank_and_gets_its_true_reply() {
    // The bank debits but its reply is lost, and the process dies with the key `started`,
    // claimed ten minutes ago (past `stuck_after` and the rail's first check).
    let (walked, _collecting) = Walked::collect();
    let (flows, key) = Flows::with_a_lost_reply(&walked).await;
    let stuck = format!(
        "UPDATE idempotency_keys SET state = 'started', bank_call_ended = 0, {TEN_MINUTES_AGO}, \
         lease_owner = NULL, lease_until = NULL, status_checks = 0;"
    );
    let flows = flows.reopened_after(&stuck).await;
    let started = "idempotency_keys WHERE state = 'started'";
    assert_eq!(flows.rows(started).await, 1);
    let retry = flows.pay(&key, BODY, None).await;
    assert_eq!(
        retry.status,
        201,
        "{}",
        String::from_utf8_lossy(&retry.body)
    );
    assert_eq!(json(&retry)["amount_paise"], 25_000);
    walked.assert_took("a key started past stuck_after is asked about inline");
    assert_eq!(flows.bank.calls(), 1, "a look-up, never a second debit");
    assert_eq!(flows.bank.moved_paise(), 25_000);
    let repeat = flows.pay(&key, BODY, None).await;
    assert_eq!((repeat.status, repeat.replayed), (201, true));
}

#[tokio::test]
async fn an_unknown_key_whose_check_is_due_is_asked_and_the_debit_found_is_its_reply() {
    let (walked, _collecting) = Walked::collect();
    let (flows, key) = Flows::with_a_lost_reply(&walked).await;
    // The call is ten minutes old: the rail allows its first status check.
    let due = format!("UPDATE idempotency_keys SET {TEN_MINUTES_AGO};");
    let flows = flows.reopened_after(&due).await;
    let retry = flows.pay(&key, BODY, None).await;
    assert_eq!((retry.status, retry.replayed), (201, true));
    walked.assert_took(
        "an unknown key whose check is due is asked about, and the bank's final word replayed",
    );
    assert_eq!(json(&retry)["amount_paise"], 25_000);
    assert_eq!((flows.bank.calls(), flows.bank.look_ups()), (1, 1));
    assert_eq!(flows.rows("idempotency_keys WHERE state = 'done'").await, 1);
}

#[tokio::test]
async fn a_key_past_every_status_check_the_rail_allows_awaits_the_settlement_file() {
    let (walked, _collecting) = Walked::collect();
    let (flows, key) = Flows::with_a_lost_reply(&walked).await;
    // Every check the rail allows was made with no final reply: the settlement file is due in
    // a day. A check would otherwise be due (the call is ten minutes old).
    let a_day_us = 86_400_000_000_i64;
    let exhausted = format!(
        "UPDATE idempotency_keys SET status_checks = 3, {TEN_MINUTES_AGO}, \
         settlement_due_at = {};",
        now_us() + a_day_us
    );
    let flows = flows.reopened_after(&exhausted).await;
    let retry = flows.pay(&key, BODY, None).await;
    assert_eq!(retry.status, 503);
    let problem = json(&retry);
    assert_eq!(
        slug_of(&problem),
        "outcome-awaiting-settlement",
        "{problem}"
    );
    assert!(problem["settlement_due_at"].is_string(), "{problem}");
    walked.assert_took("an unknown key whose checks ran out waits for the settlement file");
    let retry_after = retry.retry_after.expect("a Retry-After");
    assert!(
        retry_after > Duration::from_secs(23 * 3600),
        "{retry_after:?}"
    );
    assert_eq!(flows.bank.calls(), 1, "no second money call");
    assert_eq!(
        flows.bank.look_ups(),
        0,
        "and no status check past the rail's limit"
    );
}

#[tokio::test]
async fn while_the_bank_fails_the_breaker_refuses_before_any_claim() {
    let failing = (0..2).map(|_| CallOutcome::MayBeInFlight {
        reason: "connection reset".into(),
    });
    let breaker = [
        "--bank-breaker-min-calls",
        "2",
        "--bank-breaker-open-seconds",
        "60",
    ];
    let flows = Flows::configured(LedgerBank::replying(failing), &breaker).await;
    for _ in 0..2 {
        assert_eq!(
            flows.pay(&IdempotencyKey::mint(), BODY, None).await.status,
            503
        );
    }
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
