//! Attempts at once: a repeat while the first runs (409, or a wait for its reply), and two at the
//! same instant over many rounds.

use super::*;

#[tokio::test]
async fn a_repeat_while_the_first_attempt_runs_is_409_or_waits_for_its_reply() {
    let (walked, _collecting) = Walked::collect();
    let flows = Arc::new(Flows::against(LedgerBank::holding([CallOutcome::Succeeded])).await);
    let key = IdempotencyKey::mint();
    let first = tokio::spawn({
        let (flows, key) = (Arc::clone(&flows), key.clone());
        async move { flows.pay(&key, BODY, None).await }
    });
    flows.bank.wait_for_calls(1).await;
    let at_once = flows.pay(&key, BODY, None).await;
    assert_eq!(at_once.status, 409);
    // The first attempt's steps so far, then the repeat's.
    let first_steps = ["recall_same_bytes", "admit", "recall", "claim", "call_bank"];
    walked.assert_took_after(
        &first_steps,
        "a repeat while the first attempt runs gets 409 when it does not wait",
    );
    let waiting = tokio::spawn({
        let (flows, key) = (Arc::clone(&flows), key.clone());
        async move { flows.pay(&key, BODY, Some(Duration::from_secs(10))).await }
    });
    flows.bank.let_calls_go();
    let first = first.await.expect("the first attempt");
    let waited = waiting.await.expect("the waiting repeat");
    assert_eq!(first.status, 201);
    assert_eq!((waited.status, waited.replayed), (201, true));
    assert_eq!(waited.body, first.body);
    assert_eq!(flows.bank.calls(), 1);
}

#[tokio::test]
async fn two_attempts_at_the_same_instant_debit_once_over_many_rounds() {
    let flows = Arc::new(Flows::against(LedgerBank::replying([])).await);
    for round in 1..=25 {
        let key = IdempotencyKey::mint();
        let attempts = (0..2).map(|_| {
            let (flows, key) = (Arc::clone(&flows), key.clone());
            tokio::spawn(async move { flows.pay(&key, BODY, None).await })
        });
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
