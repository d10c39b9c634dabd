//! The article's race: attempts with one key at the same instant, many rounds, on each store.
//! Counted at the bank's ledger: exactly one debit per key, with the bank's own dedupe switched
//! off so the server alone is what prevents doubles.

use std::collections::HashSet;

use crate::support::{Options, StoreKind, TestApp, new_key, payment_body};
use bank_simulator::Knobs;
use futures_util::future::join_all;

/// Runs `rounds` rounds of `attempts` simultaneous requests with one fresh key per round, then
/// checks every answer and the ledger.
async fn race(app: &TestApp, rounds: usize, attempts: usize) {
    let body = payment_body(230_000);
    let mut keys = Vec::with_capacity(rounds);
    let (mut conflicts, mut replays) = (0, 0);
    for round in 0..rounds {
        let key = new_key();
        let answers =
            join_all((0..attempts).map(|_| app.pay(1, Some(&key), "elec-1", &body))).await;
        let fresh: Vec<_> = answers
            .iter()
            .filter(|a| a.status == 201 && !a.is_replay())
            .collect();
        assert_eq!(
            fresh.len(),
            1,
            "round {round}: exactly one attempt does the work"
        );
        for answer in &answers {
            match (answer.status, answer.is_replay()) {
                (201, false) => {}
                (201, true) => {
                    replays += 1;
                    assert_eq!(
                        answer.bytes, fresh[0].bytes,
                        "round {round}: replay differs"
                    );
                }
                (409, false) => {
                    conflicts += 1;
                    answer.assert_problem(409, "request-in-progress");
                }
                other => panic!("round {round}: unexpected answer {other:?}"),
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
    println!("{rounds} rounds x {attempts}: {conflicts} answered 409, {replays} replayed");
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

for_each_store!(
    two_attempts_at_once_debit_once_in_every_round,
    eight_attempts_at_once_debit_once_in_every_round,
    a_slow_bank_turns_simultaneous_attempts_into_409s_not_debits,
);
