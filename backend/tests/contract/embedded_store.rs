//! The "nothing else to install" path: the real `backend` binary started with no
//! `DATABASE_URL`, in an empty working directory, keeps its keys and payments in the embedded
//! SQLite file `data/payments.sqlite` (created on start-up), pays once and replays the retry.

use std::time::Duration;

use crate::support::process::{BackendEnv, BackendProcess};
use crate::support::{new_key, payment_body, send_pay};
use bank_simulator::{BankSimulator, Knobs};

#[tokio::test]
async fn without_database_url_the_backend_pays_once_and_replays_from_a_local_sqlite_file() {
    let bank = BankSimulator::spawn(Knobs {
        dedupe: false,
        ..Knobs::default()
    })
    .await
    .expect("bank starts");
    let working_dir = tempfile::tempdir().expect("a temporary directory");
    let backend = BackendProcess::start(&BackendEnv {
        database_url: None,
        working_dir: Some(working_dir.path().to_owned()),
        ..BackendEnv::new("unused", &bank.url)
    })
    .await;
    assert!(
        working_dir.path().join("data/payments.sqlite").is_file(),
        "the default store's file was created in the working directory"
    );
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client");

    let key = new_key();
    let body = payment_body(230_000);
    let first = send_pay(&http, &backend.url, 7, Some(&key), "elec-1", &body)
        .await
        .expect("backend replies");
    assert_eq!(
        first.status,
        201,
        "{}",
        String::from_utf8_lossy(&first.bytes)
    );
    assert!(!first.is_replay());
    let retry = send_pay(&http, &backend.url, 7, Some(&key), "elec-1", &body)
        .await
        .expect("backend replies");
    assert_eq!(retry.status, 201);
    assert!(retry.is_replay());
    assert_eq!(retry.bytes, first.bytes, "the replay is the first reply");

    let ledger = bank.simulator.ledger();
    assert_eq!(ledger.debits.len(), 1, "one debit for two requests");
    assert_eq!(ledger.debits[0].reference, first.json()["bank_reference"]);
}
