//! TLS to the bank and to the database (`backend/src/transport_security.rs`), against real TLS
//! servers with certificates from a CA made in the test: the `bank-simulator` binary serving
//! https, and a throwaway PostgreSQL cluster that rejects every plaintext connection
//! (`test_harness::TlsPostgres`). The backend runs as its own process in production mode,
//! configured only through the environment, as a deployment configures it:
//! - a payment and its replay go through with `sslmode=verify-full` to the database and https
//!   to the bank trusting the test CA alone (`BANK_CA_FILE`): one debit in the ledger;
//! - a bank whose certificate is not from the CA the backend trusts (the built-in roots, or
//!   another test CA) gets no payment through and moves no money;
//! - a database whose certificate is not from the CA in `sslrootcert` stops `backend migrate`
//!   with an error naming the certificate.

use std::process::Command;
use std::time::Duration;

use test_harness::{ServerProcess, TestCa, TlsPostgres, listening_url, server_binary};

use crate::support::process::{BackendEnv, BackendProcess, POLICY_FILE};
use crate::support::{SECRET, new_key, payment_body, send_pay};

/// A bank simulator serving https with a certificate `ca` issued.
async fn tls_bank(ca: &TestCa) -> (ServerProcess, String) {
    let identity = ca.issue("bank");
    let mut command = Command::new(server_binary("bank-simulator"));
    command
        .args(["--listen", "127.0.0.1:0", "--tls-cert"])
        .arg(&identity.certificate_file)
        .arg("--tls-key")
        .arg(&identity.key_file);
    ServerProcess::start("bank-simulator", command, |line| {
        listening_url(line, "bank simulator")
    })
    .await
}

/// The ledger's debits, read over https trusting `ca`.
async fn debits(bank_url: &str, ca: &TestCa) -> usize {
    let ca_pem = std::fs::read(ca.certificate_file()).expect("read the CA");
    let http = reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(&ca_pem).expect("PEM"))
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    let ledger: bank_simulator::Ledger = http
        .get(format!("{bank_url}/ledger"))
        .send()
        .await
        .expect("the ledger replies over https")
        .json()
        .await
        .expect("the ledger is JSON");
    ledger.debits.len()
}

/// The `sslmode=verify-full` URL of `database` trusting `ca`.
fn verifying_url(database: &TlsPostgres, ca: &TestCa) -> String {
    database.url(&format!(
        "sslmode=verify-full&sslrootcert={}",
        ca.certificate_file().display()
    ))
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client")
}

#[tokio::test]
async fn a_payment_and_its_replay_go_through_tls_to_the_bank_and_the_database() {
    let ca = TestCa::new("payments test CA");
    let database = TlsPostgres::start(&ca.issue("database"));
    let (_bank, bank_url) = tls_bank(&ca).await;
    assert!(bank_url.starts_with("https://"), "{bank_url}");

    let backend = BackendProcess::start(&BackendEnv {
        extra: vec![(
            "BANK_CA_FILE".to_owned(),
            ca.certificate_file().display().to_string(),
        )],
        ..BackendEnv::new(&verifying_url(&database, &ca), &bank_url)
    })
    .await;
    let http = client();
    let key = new_key();
    let body = payment_body(25_000);
    let first = send_pay(&http, &backend.url, 42, Some(&key), "bill-tls", &body)
        .await
        .expect("replied");
    assert_eq!(first.status, 201, "{}", backend.log());
    let replay = send_pay(&http, &backend.url, 42, Some(&key), "bill-tls", &body)
        .await
        .expect("replied");
    assert_eq!(replay.status, 201);
    assert!(replay.is_replay(), "the second reply is the saved one");
    assert_eq!(replay.bytes, first.bytes);
    assert_eq!(debits(&bank_url, &ca).await, 1, "one debit at the bank");

    // The cluster refuses plaintext, so the backend's rows got there over TLS.
    let plaintext = sqlx::PgPool::connect(&database.url("sslmode=disable")).await;
    let refused = plaintext.expect_err("the cluster refuses plaintext");
    assert!(refused.to_string().contains("no encryption"), "{refused}");
}

#[tokio::test]
async fn a_bank_certificate_from_a_ca_the_backend_does_not_trust_moves_no_money() {
    let bank_ca = TestCa::new("the bank's CA");
    let other_ca = TestCa::new("another CA");
    let (_bank, bank_url) = tls_bank(&bank_ca).await;
    let database = test_harness::TestDatabase::create().await;

    // The built-in roots do not know a test CA, and BANK_CA_FILE trusts the named CA only.
    let trusting_nothing_of_it: [Vec<(String, String)>; 2] = [
        Vec::new(),
        vec![(
            "BANK_CA_FILE".to_owned(),
            other_ca.certificate_file().display().to_string(),
        )],
    ];
    for extra in trusting_nothing_of_it {
        let backend = BackendProcess::start(&BackendEnv {
            bank_timeout_ms: 2_000,
            extra: extra.clone(),
            ..BackendEnv::new(database.url(), &bank_url)
        })
        .await;
        let reply = send_pay(
            &client(),
            &backend.url,
            42,
            Some(&new_key()),
            "bill-untrusted",
            &payment_body(25_000),
        )
        .await
        .expect("replied");
        assert_ne!(
            reply.status, 201,
            "paid through an untrusted bank ({extra:?})"
        );
        assert!(
            backend.log().contains("certificate") || backend.log().contains("UnknownIssuer"),
            "the log names the certificate ({extra:?}): {}",
            backend.log()
        );
    }
    assert_eq!(debits(&bank_url, &bank_ca).await, 0, "no money moved");
}

#[tokio::test]
async fn a_database_certificate_from_another_ca_stops_the_backend() {
    let database_ca = TestCa::new("the database's CA");
    let other_ca = TestCa::new("another CA");
    let database = TlsPostgres::start(&database_ca.issue("database"));
    let output = Command::new(env!("CARGO_BIN_EXE_backend"))
        .arg("migrate")
        .env_clear()
        .env("DATABASE_URL", verifying_url(&database, &other_ca))
        .env("AUTH_JWT_SECRET", SECRET)
        .env("APP_ENV", "production")
        .env("DATABASE_REPLICATION", "none")
        .env("REQUIRE_EDGE_PROOF", "false")
        .env("POLICY_FILE", POLICY_FILE)
        .env("NO_COLOR", "1")
        .output()
        .expect("the backend runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "migrated through an untrusted server"
    );
    assert!(
        stderr.contains("certificate") || stderr.contains("UnknownIssuer"),
        "{stderr}"
    );
}
