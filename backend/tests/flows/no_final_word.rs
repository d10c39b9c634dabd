//! Calls with no final word from the bank: outcome pending, a key stuck `started`, a status check
//! due (the debit found, the bank never saw the call, or it holds it undecided), one a
//! reconciler is making, and every check the rail allows spent.

use super::*;

/// SQL making the lost reply's call ten minutes old: the rail allows its first status check.
fn due_for_its_first_check() -> String {
    format!("UPDATE idempotency_keys SET {TEN_MINUTES_AGO};")
}

#[tokio::test]
async fn no_final_word_is_outcome_pending_with_when_it_will_be_known() {
    let (walked, _collecting) = Walked::collect();
    let flows = Flows::against(LedgerBank::replying([no_final_word()])).await;
    let key = IdempotencyKey::mint();
    let problem = outcome_pending(&flows.pay(&key, BODY, None).await);
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
    let flows = flows.reopened_after(&due_for_its_first_check()).await;
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
async fn an_unknown_key_the_bank_never_saw_is_released_and_called_again_under_its_reference() {
    let (walked, _collecting) = Walked::collect();
    let (flows, key) = Flows::with_a_lost_reply(&walked).await;
    // The call that timed out never reached the bank, and its first check is due.
    let reference = flows.bank.references()[0].clone();
    flows.bank.forget(&reference);
    let flows = flows.reopened_after(&due_for_its_first_check()).await;
    let retry = flows.pay(&key, BODY, None).await;
    assert_eq!((retry.status, retry.replayed), (201, false));
    walked.assert_took(
        "an unknown key the bank never saw is released, claimed again under its reference, and called",
    );
    assert_eq!((flows.bank.calls(), flows.bank.look_ups()), (2, 1));
    assert_eq!(flows.bank.references(), [reference], "the same reference");
    assert_eq!(flows.bank.moved_paise(), 25_000);
}

#[tokio::test]
async fn an_unknown_key_the_bank_holds_undecided_is_pending_until_its_next_check() {
    let (walked, _collecting) = Walked::collect();
    let (flows, key) = Flows::with_a_lost_reply(&walked).await;
    flows.bank.hold_undecided(&flows.bank.references()[0]);
    let flows = flows.reopened_after(&due_for_its_first_check()).await;
    let problem = outcome_pending(&flows.pay(&key, BODY, None).await);
    assert!(problem["next_check_at"].is_string(), "{problem}");
    walked.assert_took(
        "an unknown key the bank still calls pending stays pending until its next check",
    );
    // The next check is not due yet: the repeat asks nothing.
    assert_eq!(flows.pay(&key, BODY, None).await.status, 503);
    walked.assert_took(
        "an unknown key whose next check is not due is 503 outcome pending, saying when it will be known",
    );
    assert_eq!((flows.bank.calls(), flows.bank.look_ups()), (1, 1));
}

#[tokio::test]
async fn an_unknown_key_a_reconciler_is_asking_about_is_pending_with_no_second_look_up() {
    let (walked, _collecting) = Walked::collect();
    let (flows, key) = Flows::with_a_lost_reply(&walked).await;
    let due_and_held = due_for_its_first_check() + &held_by_another_replica();
    let flows = flows.reopened_after(&due_and_held).await;
    outcome_pending(&flows.pay(&key, BODY, None).await);
    walked.assert_took("an unknown key asked about while someone else asks stays pending");
    assert_eq!(
        flows.bank.look_ups(),
        0,
        "the reconciler's look-up is the only one"
    );
}
