//! A key used again after its row is gone: lost with the database, expired (read from the
//! database, or its bytes remembered in memory), and past its last generation.

use super::*;

#[tokio::test]
async fn a_claim_lost_with_the_database_is_made_again_under_its_first_reference() {
    let flows = Flows::against(LedgerBank::replying([])).await;
    let key = IdempotencyKey::mint();
    let first = flows.pay(&key, BODY, None).await;
    assert_eq!(first.status, 201);
    // The database loses the claim, as a promoted asynchronous copy or a restore would: the
    // key, its payment and its trail are gone; a new process serves the phone's retry.
    let flows = flows
        .reopened_after(
            "DELETE FROM key_events; DELETE FROM idempotency_keys; DELETE FROM payments;",
        )
        .await;
    let (walked, _collecting) = Walked::collect();
    let again = flows.pay(&key, BODY, None).await;
    assert_eq!((again.status, again.replayed), (201, false));
    walked.assert_took(
        "a new key is claimed, the bank called once, its final word saved and rendered",
    );
    for field in ["payment_id", "bank_reference", "amount_paise"] {
        assert_eq!(json(&again)[field], json(&first)[field], "{field}");
    }
    assert_eq!(flows.bank.calls(), 2, "the retry calls the bank again");
    assert_eq!(flows.bank.references().len(), 1, "under the same reference");
    assert_eq!(flows.bank.moved_paise(), 25_000, "which the bank dedupes");
}

#[tokio::test]
async fn a_key_reused_after_it_expired_is_a_new_payment_under_a_new_reference() {
    let (walked, _collecting) = Walked::collect();
    let (flows, key, first) = Flows::with_a_paid_key(&walked).await;
    // The key passes the expiry on its row before the sweep deletes it (which keeps its
    // payment, SPEC §3): the same request again deletes it and is a new one, whose
    // first-choice id is the kept payment's.
    let expired = format!("UPDATE idempotency_keys SET expires_at = {};", now_us() - 1);
    let flows = flows.reopened_after(&expired).await;
    let again = flows.pay(&key, BODY, None).await;
    assert_eq!((again.status, again.replayed), (201, false));
    walked.assert_took("an expired finished key makes way for a new claim, whatever the body");
    assert_ne!(json(&again)["payment_id"], json(&first)["payment_id"]);
    assert_ne!(
        json(&again)["bank_reference"],
        json(&first)["bank_reference"]
    );
    assert_eq!(flows.bank.references().len(), 2);
    assert_eq!(flows.bank.moved_paise(), 50_000);
}

#[tokio::test]
async fn a_key_reused_past_its_last_generation_is_refused_and_calls_nothing() {
    let mut flows = Flows::against(LedgerBank::replying([])).await;
    let key = IdempotencyKey::mint();
    // Generation 0 and every reuse after expiry up to the last one: each a payment of its own.
    let movements = shared::movement_id::MAX_GENERATIONS + 1;
    for _ in 0..movements {
        assert_eq!(flows.pay(&key, BODY, None).await.status, 201);
        flows = flows.reopened_after("DELETE FROM idempotency_keys;").await;
    }
    // One more is a client reusing a key, not a retry: a 422 naming it, never a 500.
    let refused = flows
        .try_pay(&key, BODY, None)
        .await
        .expect_err("refused")
        .into_response();
    assert_eq!(refused.status(), 422);
    let body = axum::body::to_bytes(refused.into_body(), 64 * 1024)
        .await
        .expect("the problem's body");
    let problem: serde_json::Value = serde_json::from_slice(&body).expect("a JSON problem");
    assert_eq!(slug_of(&problem), "idempotency-key-reused", "{problem}");
    assert!(
        problem["detail"]
            .as_str()
            .unwrap_or("")
            .contains("65 requests")
    );
    assert_eq!(flows.bank.references().len(), movements as usize);
    assert_eq!(flows.rows("payments").await, i64::from(movements));
    assert_eq!(flows.rows("idempotency_keys").await, 0, "nothing claimed");
}

#[tokio::test]
async fn remembered_bytes_of_a_key_past_its_expiry_are_not_replayed_but_paid_anew() {
    let (walked, _collecting) = Walked::collect();
    let (flows, key, _) = Flows::with_a_paid_key(&walked).await;
    // A new process, the key's expiry three seconds away: its repeats put its reply, then its
    // very bytes, in memory, which keeps them until a second (`CLOCK_MARGIN`) before that.
    let expires_at = now_us() + 3_000_000;
    let expiring = format!("UPDATE idempotency_keys SET expires_at = {expires_at};");
    let flows = flows.reopened_after(&expiring).await;
    let repeats = [
        "a repeat of a finished key found by the claim is replayed from the database",
        "a repeat remembered in memory is replayed from there, after admission",
        "the very bytes of a repeat already replayed from memory are replayed before admission",
    ];
    for case in repeats {
        let repeat = flows.pay(&key, BODY, None).await;
        assert_eq!((repeat.status, repeat.replayed), (201, true));
        walked.assert_took(case);
    }
    let past_the_expiry = expires_at - now_us() + 100_000;
    let past_the_expiry = u64::try_from(past_the_expiry).expect("the repeats took under 3 s");
    tokio::time::sleep(Duration::from_micros(past_the_expiry)).await;
    // The memory has forgotten the key (it never hands out an entry past its key's expiry, so
    // the machine's own check of one, the vector case "remembered bytes of an expired key go
    // through admission and the database", is walked by the machine alone); the database
    // deletes it, and the same bytes are a new payment.
    let again = flows.pay(&key, BODY, None).await;
    assert_eq!((again.status, again.replayed), (201, false));
    walked.assert_took("an expired finished key makes way for a new claim, whatever the body");
    assert_eq!(flows.bank.references().len(), 2, "a new payment");
}
