//! The article's race: attempts with one key at the same instant, many rounds, on each store.
//! Counted at the bank's ledger: exactly one debit per key, with the bank's own dedupe switched
//! off so the server alone is what prevents doubles.

use std::collections::HashSet;

use crate::support::{Options, StoreKind, TestApp, new_key, payment_body};
use backend::domain::Cause;
use backend::store::{FinalOutcome, KeyRef};
use bank_simulator::Knobs;
use futures_util::future::join_all;
use shared::api::MovementStatus;
use shared::{IdempotencyKey, KeyState, Operation, UserId};

/// Runs `rounds` rounds of `attempts` simultaneous requests with one fresh key per round, then
/// checks every reply and the ledger.
async fn race(app: &TestApp, rounds: usize, attempts: usize) {
    let body = payment_body(230_000);
    let mut keys = Vec::with_capacity(rounds);
    let (mut conflicts, mut replays) = (0, 0);
    for round in 0..rounds {
        let key = new_key();
        let replies =
            join_all((0..attempts).map(|_| app.pay(1, Some(&key), "elec-1", &body))).await;
        let fresh: Vec<_> = replies
            .iter()
            .filter(|a| a.status == 201 && !a.is_replay())
            .collect();
        assert_eq!(
            fresh.len(),
            1,
            "round {round}: exactly one attempt does the work"
        );
        for reply in &replies {
            match (reply.status, reply.is_replay()) {
                (201, false) => {}
                (201, true) => {
                    replays += 1;
                    assert_eq!(reply.bytes, fresh[0].bytes, "round {round}: replay differs");
                }
                (409, false) => {
                    conflicts += 1;
                    reply.assert_problem(409, "request-in-progress");
                }
                other => panic!("round {round}: unexpected reply {other:?}"),
            }
        }
        keys.push(key);
    }
    let ledger = app.ledger().await;
    assert_eq!(ledger.debits.len(), rounds, "one debit per round");
    let references: HashSet<_> = ledger.debits.iter().map(|d| d.reference.clone()).collect();
    let expected: HashSet<_> = app
        .texts("SELECT bank_reference FROM payments")
        .await
        .into_iter()
        .collect();
    assert_eq!(
        references, expected,
        "each key debited once, under its own reference"
    );
    assert_eq!(
        app.count("payments").await,
        i64::try_from(rounds).expect("small")
    );
    assert_eq!(
        app.count("idempotency_keys").await,
        i64::try_from(rounds).expect("small")
    );
    println!("{rounds} rounds x {attempts}: {conflicts} replied 409, {replays} replayed");
}

fn without_bank_dedupe(store: StoreKind) -> Options {
    Options {
        knobs: Knobs {
            dedupe: false,
            ..Knobs::default()
        },
        store,
        ..Options::default()
    }
}

/// Rounds of two attempts: 1,000 on PostgreSQL; 200 on SQLite, whose writers queue one at a
/// time, so each round takes longer while proving the same.
async fn two_attempts_at_once_debit_once_in_every_round(store: StoreKind) {
    let app = TestApp::spawn_with(without_bank_dedupe(store)).await;
    let rounds = match store {
        StoreKind::Postgres => 1_000,
        StoreKind::Sqlite => 200,
    };
    race(&app, rounds, 2).await;
}

/// Rounds of eight attempts: 200 on PostgreSQL, 50 on SQLite.
async fn eight_attempts_at_once_debit_once_in_every_round(store: StoreKind) {
    let app = TestApp::spawn_with(without_bank_dedupe(store)).await;
    let rounds = match store {
        StoreKind::Postgres => 200,
        StoreKind::Sqlite => 50,
    };
    race(&app, rounds, 8).await;
}

async fn a_slow_bank_turns_simultaneous_attempts_into_409s_not_debits(store: StoreKind) {
    let app = TestApp::spawn_with(Options {
        knobs: Knobs {
            dedupe: false,
            latency_ms: 50,
            ..Knobs::default()
        },
        store,
        ..Options::default()
    })
    .await;
    race(&app, 50, 8).await;
}

/// The request path and a reconciler can both come to write one claim's outcome; the store, not
/// the caller, decides which reply stands. Written through the store on each (on SQLite the
/// outcome is one string of three statements, each after the first writing only if the one
/// before it did): the first reply stands, the key finishes once, the trail holds one
/// `bank_answered`; an outcome for no movement writes nothing; a retry of the key claims
/// nothing new (no second payment, no second `claimed`) and replays the first reply.
async fn a_late_outcome_keeps_the_first_reply_and_a_retry_claims_nothing(store: StoreKind) {
    let app = TestApp::spawn_on(store).await;
    let body = payment_body(230_000);
    let key = new_key();
    app.claim_without_paying(7, &key, &body).await;
    let idempotency_key = IdempotencyKey::try_from(key.clone()).expect("a valid key");
    let key_ref = KeyRef::new(UserId::numbered(7), &idempotency_key);
    let claimed = app
        .state
        .store
        .load_key(key_ref.clone())
        .await
        .expect("read");
    let payment_id = claimed.expect("the claim is stored").movement_id;
    let finish = |result: FinalOutcome, movement_id| {
        let (store, key_ref) = (app.state.store.clone(), key_ref.clone());
        async move {
            store
                .finish(
                    key_ref,
                    Operation::PayBill,
                    movement_id,
                    &result,
                    &Cause::background(),
                )
                .await
                .expect("the outcome is written")
        }
    };
    let declined = FinalOutcome::Declined {
        reason: "insufficient_funds".to_owned(),
    };

    let first = finish(FinalOutcome::Succeeded, payment_id)
        .await
        .expect("the payment exists");
    assert_eq!(first.movement.status(), MovementStatus::Succeeded);
    let key_now = first.key.expect("the key finished with the first reply");
    assert_eq!(key_now.record.state, KeyState::Done);
    assert_eq!(key_now.movement_id, payment_id);

    let late = finish(declined.clone(), payment_id)
        .await
        .expect("the payment exists");
    assert_eq!(
        late.movement.status(),
        MovementStatus::Succeeded,
        "the first reply stands"
    );
    assert!(late.key.is_none(), "the key had finished already");
    assert!(
        finish(declined, uuid::Uuid::new_v4()).await.is_none(),
        "no movement, nothing written"
    );

    let retry = app.pay(7, Some(&key), "elec-1", &body).await;
    assert_eq!(retry.status, 201, "{retry:?}");
    assert_eq!(retry.json()["payment_id"], payment_id.to_string());
    assert_eq!(retry.json()["status"], "succeeded");
    let events_named = |event: &str| {
        format!("SELECT count(*) FROM key_trail WHERE user_id = '7' AND event = '{event}'")
    };
    assert_eq!(app.scalar(&events_named("claimed")).await, 1);
    assert_eq!(app.scalar(&events_named("bank_answered")).await, 1);
    assert_eq!(app.count("payments").await, 1);
    assert_eq!(
        app.scalar("SELECT count(*) FROM payments WHERE status = 'succeeded'")
            .await,
        1
    );
    assert!(
        app.ledger().await.debits.is_empty(),
        "the bank was never called"
    );
}

for_each_store!(
    a_late_outcome_keeps_the_first_reply_and_a_retry_claims_nothing,
    two_attempts_at_once_debit_once_in_every_round,
    eight_attempts_at_once_debit_once_in_every_round,
    a_slow_bank_turns_simultaneous_attempts_into_409s_not_debits,
);
