//! The store failing on cue, after the bank call: a trigger that refuses the write of the final
//! word, the mark `unknown` or the release (as a database gone away would), and a movement
//! deleted while its call is out. None of them is a second debit or a reply that claims more
//! than is known.

use super::*;

/// SQL making every write that moves a key to `state` fail, as a database gone away would.
fn refuse_moves_to(state: &str) -> String {
    format!(
        "CREATE TRIGGER refuse_{state} BEFORE UPDATE OF state ON idempotency_keys \
         WHEN NEW.state = '{state}' \
         BEGIN SELECT RAISE(ABORT, 'the test refuses this write'); END;"
    )
}

#[tokio::test]
async fn a_save_that_fails_marks_the_key_unknown_for_an_early_check() {
    let (walked, _collecting) = Walked::collect();
    let flows = Flows::against(LedgerBank::replying([CallOutcome::Succeeded])).await;
    flows.execute(&refuse_moves_to("done")).await;
    let key = IdempotencyKey::mint();
    outcome_pending(&flows.pay(&key, BODY, None).await);
    walked.assert_took("a save that fails marks the key unknown for an early check");
    assert_eq!(
        flows.rows("idempotency_keys WHERE state = 'unknown'").await,
        1
    );
    assert_eq!(flows.bank.moved_paise(), 25_000, "the debit stands");
    assert_eq!(flows.bank.calls(), 1);
}

#[tokio::test]
async fn a_mark_that_fails_leaves_the_key_started_and_says_nothing_of_when() {
    let (walked, _collecting) = Walked::collect();
    let flows = Flows::against(LedgerBank::replying([no_final_word()])).await;
    flows.execute(&refuse_moves_to("unknown")).await;
    let problem = outcome_pending(&flows.pay(&IdempotencyKey::mint(), BODY, None).await);
    assert!(problem["next_check_at"].is_null(), "{problem}");
    walked.assert_took("a mark that fails leaves the key started and says nothing of when");
    assert_eq!(
        flows.rows("idempotency_keys WHERE state = 'started'").await,
        1,
        "stuck detection finds it"
    );
}

#[tokio::test]
async fn a_release_that_fails_leaves_the_key_for_reconciliation() {
    let (walked, _collecting) = Walked::collect();
    let flows = Flows::against(LedgerBank::replying([not_executed()])).await;
    flows.execute(&refuse_moves_to("released")).await;
    // Outcome pending, not "nothing charged": the claim was not given back.
    outcome_pending(&flows.pay(&IdempotencyKey::mint(), BODY, None).await);
    walked.assert_took("a release that fails leaves the key for reconciliation: outcome pending");
    assert_eq!(
        flows.rows("idempotency_keys WHERE state = 'started'").await,
        1
    );
    assert_eq!(flows.bank.calls(), 1);
}

#[tokio::test]
async fn a_movement_deleted_while_its_call_is_out_is_outcome_pending() {
    let (walked, _collecting) = Walked::collect();
    let flows = Arc::new(Flows::against(LedgerBank::holding([CallOutcome::Succeeded])).await);
    let paying = flows
        .first_attempt_at_the_bank(&IdempotencyKey::mint())
        .await;
    flows.execute("DELETE FROM payments;").await;
    flows.bank.let_calls_go();
    outcome_pending(&paying.await.expect("the payment"));
    walked.assert_took("a movement gone before its save is outcome pending");
    assert_eq!(flows.bank.calls(), 1);
}
