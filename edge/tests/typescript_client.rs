//! The TypeScript package (`clients/typescript/`) against the real stack: this test starts the
//! Worker under `workerd`, the backend on a fresh PostgreSQL database and the bank simulator
//! (the edge's per-user limit a burst of two, so a 429 can be met), runs the package's stack
//! tests (`clients/typescript/test-stack/stack.test.ts`) with `node --test`, then audits the
//! bank's ledger on its own: every debit belongs to a payment the package saw paid, and each
//! such payment has exactly one debit. The scenarios themselves (lost replies, a slow bank, 409
//! then wait, 429, a decline, the deadline with the outcome unsettled, a process killed between
//! saving and sending) are listed in that file.
#![cfg(not(target_arch = "wasm32"))]

mod support;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use edge::rate_limit::Limit;
use serde_json::Value;
use support::{SECRET, Stack, StackOptions};

fn package_dir() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../clients/typescript"
    ))
}

#[tokio::test]
async fn the_typescript_client_pays_once_per_action_through_edge_and_backend() {
    let compiled = package_dir().join(".build-stack/test-stack/stack.test.js");
    assert!(
        compiled.is_file(),
        "{} is missing: build it first (cd clients/typescript && npm ci && npm run build:stack)",
        compiled.display()
    );
    let stack = Stack::start(StackOptions {
        user_limit: Limit {
            per_minute: 60,
            burst: 2,
        },
        ..StackOptions::default()
    })
    .await;
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let summary = scratch.path().join("summary.json");

    let run = tokio::process::Command::new("node")
        .args(["--test", "--test-concurrency=1"])
        .arg(&compiled)
        .current_dir(package_dir())
        .env("PAYMENTS_EDGE_URL", &stack.edge_url)
        .env("PAYMENTS_BACKEND_URL", &stack.backend_url)
        .env("BANK_URL", &stack.bank_url)
        .env("AUTH_JWT_SECRET", SECRET)
        .env("SUMMARY_FILE", &summary)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(300), run)
        .await
        .expect("the stack tests end within 5 minutes")
        .expect("node runs");
    assert!(
        output.status.success(),
        "the package's stack tests failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );

    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).expect("the summary was written"))
            .expect("the summary is JSON");
    let paid = summary["paid"].as_array().expect("a list of payments");
    let mut debits_per_reference: HashMap<String, usize> = HashMap::new();
    for debit in stack.debits().await {
        let reference = debit["reference"].as_str().expect("a reference").to_owned();
        *debits_per_reference.entry(reference).or_default() += 1;
    }
    assert_eq!(
        debits_per_reference.len(),
        paid.len(),
        "every debit is a payment the client saw paid: {debits_per_reference:?} vs {paid:?}"
    );
    for payment in paid {
        let reference = payment["bank_reference"]
            .as_str()
            .expect("a bank reference");
        assert_eq!(
            debits_per_reference.get(reference),
            Some(&1),
            "one debit for {payment}"
        );
    }
}
