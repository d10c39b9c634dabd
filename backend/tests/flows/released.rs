//! Released claims (the bank did not execute the call): re-claimed by the same body, refused to
//! another, not re-claimed while a reconciler holds it, and after expiry: reused once its check
//! finds a late debit, nothing, or a void; kept while the bank holds the call undecided or a
//! reconciler checks it.

use super::*;

/// SQL expiring the released key, its claim ten minutes old (so the rail allows its last check
/// for a late debit) and that check still to come.
fn expired_with_a_check_to_come() -> String {
    format!(
        "UPDATE idempotency_keys SET created_at = created_at - 600000000, \
         claimed_at = claimed_at - 600000000, expires_at = {};",
        now_us() - 1
    )
}

#[tokio::test]
async fn a_call_the_bank_did_not_execute_is_released_and_the_retry_debits_once() {
    let (walked, _collecting) = Walked::collect();
    let flows = Flows::against(LedgerBank::replying([
        not_executed(),
        CallOutcome::Succeeded,
    ]))
    .await;
    let key = IdempotencyKey::mint();
    let first = flows.pay(&key, BODY, None).await;
    assert_eq!(first.status, 503);
    assert!(
        String::from_utf8_lossy(&first.body).contains("no money moved"),
        "{}",
        String::from_utf8_lossy(&first.body)
    );
    walked.assert_took("a call the bank did not execute is released at once: nothing charged");
    let retry = flows.pay(&key, BODY, None).await;
    assert_eq!(retry.status, 201);
    walked.assert_took(
        "a released key with the same body is claimed again under its reference and called",
    );
    assert_eq!(flows.bank.calls(), 2);
    assert_eq!(
        flows.bank.references().len(),
        1,
        "the retry reuses the claim's reference"
    );
    assert_eq!(flows.bank.moved_paise(), 25_000);
}

#[tokio::test]
async fn a_released_claim_retried_with_another_body_is_refused_and_calls_nothing() {
    let (walked, _collecting) = Walked::collect();
    let (flows, key) = Flows::with_a_released_claim(&walked).await;
    let reused = flows.pay(&key, OTHER_BODY, None).await;
    assert_eq!(reused.status, 422);
    assert_eq!(problem_slug(&reused), "idempotency-key-reused");
    walked.assert_took("another body under a released key is refused");
    assert_eq!(flows.bank.calls(), 1, "only the first, released call");
    let retry = flows.pay(&key, BODY, None).await;
    assert_eq!(retry.status, 201, "the released claim is still the key's");
    assert_eq!(flows.bank.references().len(), 1);
}

#[tokio::test]
async fn a_released_key_reused_after_it_expired_is_checked_once_then_paid_anew() {
    let (walked, _collecting) = Walked::collect();
    let (flows, key) = Flows::with_a_released_claim(&walked).await;
    // The bank executed the call it said it had not (a late debit), and the key expired with
    // its last late-debit check still to come (the claim ten minutes old, so the rail allows it).
    let first_reference = flows.bank.references()[0].clone();
    flows.bank.debit_late(&first_reference, 25_000);
    let flows = flows.reopened_after(&expired_with_a_check_to_come()).await;
    let retry = flows.pay(&key, BODY, None).await;
    let body = String::from_utf8_lossy(&retry.body);
    assert_eq!((retry.status, retry.replayed), (201, false), "{body}");
    assert_eq!(flows.bank.look_ups(), 1, "the last check, inline");
    walked.assert_took(
        "an expired released key whose last check finds a late debit settles it, then makes way for a new claim",
    );
    assert_eq!(
        flows.bank.calls(),
        2,
        "the released call and the new payment's"
    );
    let references = flows.bank.references();
    assert_eq!(
        references.len(),
        2,
        "the new payment has a reference of its own"
    );
    assert_eq!(json(&retry)["bank_reference"], references[1].as_str());
    let settled = "payments WHERE status = 'succeeded'";
    assert_eq!(
        flows.rows(settled).await,
        2,
        "the old movement settled by its check"
    );
    assert_eq!(flows.rows("idempotency_keys").await, 1, "the key replaced");
}

#[tokio::test]
async fn a_released_key_whose_movement_was_voided_is_paid_anew_and_keeps_the_void() {
    let (walked, _collecting) = Walked::collect();
    let (flows, key) = Flows::with_a_released_claim(&walked).await;
    // The last late-debit check found nothing: the movement void, the key's checks ended, and
    // the key expired.
    let now = now_us();
    let voided = format!(
        "UPDATE payments SET status = 'void', finished_at = {now}; \
         UPDATE idempotency_keys SET next_lookup_at = NULL, expires_at = {};",
        now - 1
    );
    let flows = flows.reopened_after(&voided).await;
    let retry = flows.pay(&key, BODY, None).await;
    assert_eq!((retry.status, retry.replayed), (201, false));
    assert_eq!(flows.bank.look_ups(), 0, "the void needs no check");
    walked
        .assert_took("an expired released key whose movement was voided makes way for a new claim");
    let references = flows.bank.references();
    assert_eq!(
        references.len(),
        2,
        "never a call under the void reference again"
    );
    assert_eq!(json(&retry)["bank_reference"], references[1].as_str());
    assert_eq!(flows.rows("payments WHERE status = 'void'").await, 1);
    assert_eq!(flows.bank.moved_paise(), 25_000);
}

#[tokio::test]
async fn an_expired_released_key_whose_check_finds_nothing_is_voided_and_paid_anew() {
    let (walked, _collecting) = Walked::collect();
    let (flows, key) = Flows::with_a_released_claim(&walked).await;
    let flows = flows.reopened_after(&expired_with_a_check_to_come()).await;
    let retry = flows.pay(&key, BODY, None).await;
    assert_eq!((retry.status, retry.replayed), (201, false));
    walked.assert_took(
        "an expired released key with a check to come is asked about before it is reused",
    );
    assert_eq!(flows.bank.look_ups(), 1, "the check, inline");
    assert_eq!(flows.rows("payments WHERE status = 'void'").await, 1);
    assert_eq!(flows.bank.references().len(), 2, "a new reference");
    assert_eq!(flows.bank.moved_paise(), 25_000);
}

#[tokio::test]
async fn an_expired_released_key_the_bank_holds_undecided_is_pending_and_not_reused() {
    let (walked, _collecting) = Walked::collect();
    let (flows, key) = Flows::with_a_released_claim(&walked).await;
    flows.bank.hold_undecided(&flows.bank.references()[0]);
    let flows = flows.reopened_after(&expired_with_a_check_to_come()).await;
    let problem = outcome_pending(&flows.pay(&key, BODY, None).await);
    assert!(problem["next_check_at"].is_string(), "{problem}");
    walked.assert_took(
        "an expired released key whose last check finds the bank still pending is pending",
    );
    assert_eq!(
        flows.bank.calls(),
        1,
        "no new call while the old one may land"
    );
    assert_eq!(flows.rows("idempotency_keys").await, 1, "the key kept");
}

#[tokio::test]
async fn an_expired_released_key_a_reconciler_is_checking_is_409_at_work() {
    let (walked, _collecting) = Walked::collect();
    let (flows, key) = Flows::with_a_released_claim(&walked).await;
    let expired_and_held = expired_with_a_check_to_come() + &held_by_another_replica();
    let flows = flows.reopened_after(&expired_and_held).await;
    let retry = flows.pay(&key, BODY, None).await;
    assert_eq!(retry.status, 409);
    walked.assert_took("an expired released key a reconciler is checking is at work");
    assert_eq!((flows.bank.calls(), flows.bank.look_ups()), (1, 0));
}

#[tokio::test]
async fn a_released_key_a_reconciler_is_checking_is_not_claimed_again() {
    let (walked, _collecting) = Walked::collect();
    let (flows, key) = Flows::with_a_released_claim(&walked).await;
    // The re-claim is one conditional write, which misses when the key is not free: held by a
    // reconciler checking for a late debit here, or claimed first by another retry.
    let flows = flows.reopened_after(&held_by_another_replica()).await;
    let retry = flows.pay(&key, BODY, None).await;
    assert_eq!(retry.status, 409);
    walked.assert_took("a released key another retry claimed first is at work");
    assert_eq!(flows.bank.calls(), 1, "no second call");
    let released = "idempotency_keys WHERE state = 'released'";
    assert_eq!(flows.rows(released).await, 1);
}
