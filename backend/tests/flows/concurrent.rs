//! Attempts at once: a repeat while the first runs (409, or a wait for its reply; 409 when no
//! place to wait is free), another body meanwhile (refused), a payment finding no free place at
//! the bank, and two at the same instant over many rounds.

use tokio::task::JoinHandle;

use super::walked::assert_case;
use super::*;

/// The steps of a new key's first attempt until its bank call, which the bank holds.
const FIRST_STEPS_UNTIL_THE_BANK: [&str; 5] =
    ["recall_same_bytes", "admit", "recall", "claim", "call_bank"];

#[tokio::test]
async fn a_repeat_while_the_first_attempt_runs_is_409_or_waits_for_its_reply() {
    let (walked, _collecting) = Walked::collect();
    let flows = Arc::new(Flows::against(LedgerBank::holding([CallOutcome::Succeeded])).await);
    let key = IdempotencyKey::mint();
    let first = flows.first_attempt_at_the_bank(&key).await;
    let at_once = flows.pay(&key, BODY, None).await;
    assert_eq!(at_once.status, 409);
    walked.assert_took_alongside(
        &FIRST_STEPS_UNTIL_THE_BANK,
        "a repeat while the first attempt runs gets 409 when it does not wait",
    );
    let waiting = waiting_repeat(&flows, &key, &walked).await;
    flows.bank.let_calls_go();
    let first = first.await.expect("the first attempt");
    let waited = waiting.await.expect("the waiting repeat");
    assert_eq!(first.status, 201);
    assert_eq!((waited.status, waited.replayed), (201, true));
    assert_eq!(waited.body, first.body);
    walked.assert_took_alongside(
        &["save", "reply rendered"],
        "a repeat that waits reads the key again after each wait and gets the saved reply",
    );
    assert_eq!(flows.bank.calls(), 1);
}

#[tokio::test]
async fn a_repeat_with_no_free_place_to_wait_is_409_at_once() {
    let (walked, _collecting) = Walked::collect();
    let bank = LedgerBank::holding([CallOutcome::Succeeded]);
    let one_waiting = ["--max-waiting-requests", "1"];
    let flows = Arc::new(Flows::configured(bank, &one_waiting).await);
    let key = IdempotencyKey::mint();
    let first = flows.first_attempt_at_the_bank(&key).await;
    let waiting = waiting_repeat(&flows, &key, &walked).await;
    let refused = flows.pay(&key, BODY, Some(Duration::from_secs(10))).await;
    assert_eq!(refused.status, 409);
    let requests = walked.took_by_request();
    let refused_steps = requests.last().expect("the refused repeat's steps");
    assert_case(
        refused_steps,
        "a wait with no place free gets 409, as one that has run out",
    );
    flows.bank.let_calls_go();
    assert_eq!(first.await.expect("the first attempt").status, 201);
    let waited = waiting.await.expect("the waiting repeat");
    assert_eq!((waited.status, waited.replayed), (201, true));
    assert_eq!(flows.bank.calls(), 1);
}

/// A repeat of `key` that may wait ten seconds, in a task of its own, once it is waiting: its
/// first wait (which only marks the key awaited) is over and its second has begun.
async fn waiting_repeat(
    flows: &Arc<Flows>,
    key: &IdempotencyKey,
    walked: &Walked,
) -> JoinHandle<Reply> {
    let waiting = flows.pay_in_a_task(key, Some(Duration::from_secs(10)));
    walked.until_taken("wait", 2).await;
    waiting
}

#[tokio::test]
async fn another_body_while_the_first_attempt_runs_is_refused_as_reused() {
    let (walked, _collecting) = Walked::collect();
    let flows = Arc::new(Flows::against(LedgerBank::holding([CallOutcome::Succeeded])).await);
    let key = IdempotencyKey::mint();
    let first = flows.first_attempt_at_the_bank(&key).await;
    let reused = flows.pay(&key, OTHER_BODY, None).await;
    assert_eq!(
        reused.status, 422,
        "the mismatch, not 409: the body decides first"
    );
    assert_eq!(problem_slug(&reused), "idempotency-key-reused");
    walked.assert_took_alongside(
        &FIRST_STEPS_UNTIL_THE_BANK,
        "another body is refused even while the first attempt runs",
    );
    flows.bank.let_calls_go();
    assert_eq!(first.await.expect("the first attempt").status, 201);
    assert_eq!(flows.bank.calls(), 1);
}

#[tokio::test]
async fn a_payment_with_no_free_place_at_the_bank_is_released_unsent() {
    let (walked, _collecting) = Walked::collect();
    let one_call_at_a_time = ["--max-bank-calls", "1", "--bank-queue-wait-ms", "50"];
    let bank = LedgerBank::holding([CallOutcome::Succeeded]);
    let flows = Arc::new(Flows::configured(bank, &one_call_at_a_time).await);
    let first = flows
        .first_attempt_at_the_bank(&IdempotencyKey::mint())
        .await;
    let key = IdempotencyKey::mint();
    let queued = flows.pay(&key, BODY, None).await;
    assert_eq!(queued.status, 503);
    let problem = json(&queued);
    assert_eq!(slug_of(&problem), "service-unavailable", "{problem}");
    let detail = problem["detail"].as_str().unwrap_or("");
    assert!(detail.contains("nothing was sent"), "{problem}");
    walked.assert_took_alongside(
        &FIRST_STEPS_UNTIL_THE_BANK,
        "a call that found no place at the bank is released: nothing was sent",
    );
    assert_eq!(flows.bank.calls(), 1, "the second payment was never sent");
    let released = "idempotency_keys WHERE state = 'released'";
    assert_eq!(flows.rows(released).await, 1);
    flows.bank.let_calls_go();
    assert_eq!(first.await.expect("the first payment").status, 201);
    let retry = flows.pay(&key, BODY, None).await;
    assert_eq!(retry.status, 201, "its retry, with a place free, is sent");
    assert_eq!(flows.bank.calls(), 2);
}

#[tokio::test]
async fn two_attempts_at_the_same_instant_debit_once_over_many_rounds() {
    let flows = Arc::new(Flows::against(LedgerBank::replying([])).await);
    for round in 1..=25 {
        let key = IdempotencyKey::mint();
        let attempts = [(); 2].map(|_| flows.pay_in_a_task(&key, None));
        let mut statuses = Vec::new();
        for attempt in attempts {
            let reply = attempt.await.expect("an attempt");
            statuses.push((reply.status, reply.replayed));
        }
        statuses.sort();
        let one_claimed = statuses.contains(&(201, false));
        let other = statuses.iter().find(|status| **status != (201, false));
        assert!(
            one_claimed && matches!(other, Some((409, false)) | Some((201, true))),
            "round {round}: {statuses:?}"
        );
        assert_eq!(flows.bank.calls(), round, "round {round}: one call per key");
    }
    assert_eq!(flows.rows("idempotency_keys").await, 25);
}
