//! The `phone` command on the real stack (the Worker under `workerd`, the backend on a fresh
//! PostgreSQL database, the bank simulator): its `--json` outcomes and exit codes as `--help`
//! lists them, its identity read only from the environment, and a kept action resumed.
//!
//! Tried: a payment (exit 0, `paid`, one debit at the bank's ledger); a decline (exit 3); the
//! pending list as JSON; a secret given as a flag (a usage error, exit 2: no secret on argv);
//! no identity at all (exit 1, naming `PHONE_TOKEN`); an action that could reach no server
//! (exit 5, kept) resumed against the stack after its deadline (looked up, never received:
//! exit 4, nothing charged, removed).
#![cfg(not(target_arch = "wasm32"))]

mod support;

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use serde_json::{Value, json};
use support::{SECRET, Stack, StackOptions};
use test_harness::server_binary;

/// Runs `phone` with `args`, the store in `store`, the development secret in the environment
/// (never on the command line).
async fn phone(api: &str, store: &Path, args: &[&str]) -> Output {
    tokio::process::Command::new(server_binary("phone"))
        .args(["--api", api, "--store"])
        .arg(store)
        .args(args)
        .env_clear()
        .env("AUTH_JWT_SECRET", SECRET)
        .kill_on_drop(true)
        .output()
        .await
        .expect("phone runs")
}

fn exit_code(output: &Output) -> i32 {
    output.status.code().expect("phone exited by itself")
}

/// The one JSON line of a `--json` run.
fn json_line(output: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut lines = stdout.lines();
    let line = lines.next().unwrap_or_else(|| {
        panic!(
            "no output; stderr: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    assert!(lines.next().is_none(), "one line: {stdout}");
    serde_json::from_str(line).expect("a JSON line")
}

#[tokio::test]
async fn the_phone_prints_json_outcomes_with_the_exit_codes_its_help_lists() {
    let stack = Stack::start(StackOptions::default()).await;
    let store = tempfile::tempdir().expect("a store directory");
    let pay = [
        "--user", "31", "--json", "pay", "--bill", "elec-31", "--amount", "230000",
    ];

    let help = phone(&stack.edge_url, store.path(), &["--help"]).await;
    let help_text = String::from_utf8_lossy(&help.stdout);
    for line in [
        "Exit codes:",
        "3  a final refusal",
        "4  never received",
        "5  not settled yet",
    ] {
        assert!(
            help_text.contains(line),
            "--help lists {line:?}: {help_text}"
        );
    }

    let paid = phone(
        &stack.edge_url,
        store.path(),
        &[&pay[..], &["--vpa", "asha@okbank"]].concat(),
    )
    .await;
    let result = json_line(&paid);
    assert_eq!(exit_code(&paid), 0, "{result}");
    assert_eq!(result["result"], "paid");
    assert_eq!(result["status"], 201);
    assert_eq!(result["body"]["amount_paise"], 230000);
    let debits = stack.debits().await;
    assert_eq!(debits.len(), 1, "one debit: {debits:?}");
    assert_eq!(debits[0]["reference"], result["body"]["bank_reference"]);

    stack.set_bank_knobs(json!({"decline_rate": 1.0})).await;
    let declined = phone(
        &stack.edge_url,
        store.path(),
        &[&pay[..], &["--vpa", "ravi@okbank"]].concat(),
    )
    .await;
    let result = json_line(&declined);
    assert_eq!(exit_code(&declined), 3, "{result}");
    assert_eq!(
        (result["result"].as_str(), result["status"].as_u64()),
        (Some("declined"), Some(402))
    );
    assert_eq!(stack.debits().await.len(), 1, "a decline moves no money");

    let listed = phone(&stack.edge_url, store.path(), &["--json", "pending"]).await;
    assert_eq!(
        json_line(&listed),
        json!({"pending": []}),
        "final replies leave nothing saved"
    );
}

#[tokio::test]
async fn secrets_are_never_flags_and_a_missing_identity_is_named() {
    let store = tempfile::tempdir().expect("a store directory");
    let api = "http://127.0.0.1:9";
    for flag in [["--secret", SECRET], ["--token", "a.b.c"]] {
        let refused = phone(api, store.path(), &[&flag[..], &["pending"]].concat()).await;
        assert_eq!(exit_code(&refused), 2, "{flag:?} is not a flag");
    }
    let nobody = tokio::process::Command::new(server_binary("phone"))
        .args(["--api", api, "--store"])
        .arg(store.path())
        .args([
            "pay",
            "--bill",
            "elec-1",
            "--amount",
            "1",
            "--vpa",
            "asha@okbank",
        ])
        .env_clear()
        .output()
        .await
        .expect("phone runs");
    assert_eq!(exit_code(&nobody), 1);
    assert!(String::from_utf8_lossy(&nobody.stderr).contains("PHONE_TOKEN"));
}

#[tokio::test]
async fn an_action_no_server_heard_is_kept_then_resumed_to_never_received() {
    let stack = Stack::start(StackOptions::default()).await;
    let store = tempfile::tempdir().expect("a store directory");
    // Nothing listens on port 9 of loopback: every attempt and look-up fails at once.
    let quick = [
        "--timeout-seconds",
        "1",
        "--deadline-seconds",
        "1",
        "--user",
        "32",
        "--json",
    ];
    let lost = phone(
        "http://127.0.0.1:9",
        store.path(),
        &[
            &quick[..],
            &[
                "pay",
                "--bill",
                "elec-32",
                "--amount",
                "5000",
                "--vpa",
                "asha@okbank",
            ],
        ]
        .concat(),
    )
    .await;
    let result = json_line(&lost);
    assert_eq!(exit_code(&lost), 5, "{result}");
    assert_eq!(
        (result["result"].as_str(), result["why"].as_str()),
        (Some("pending"), Some("unreachable"))
    );

    let listed = json_line(&phone(&stack.edge_url, store.path(), &["--json", "pending"]).await);
    let kept = listed["pending"].as_array().expect("a list");
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0]["key"], result["key"]);

    // The first run can give up before its 1 s deadline (its next wait would cross it), and a
    // resume inside the deadline rightly sends again; this scenario is the one past it.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let resumed = phone(
        &stack.edge_url,
        store.path(),
        &[&quick[..], &["resume"]].concat(),
    )
    .await;
    let result = json_line(&resumed);
    assert_eq!(exit_code(&resumed), 4, "{result}");
    assert_eq!(result["result"], "not_received");
    assert_eq!(result["key"], kept[0]["key"]);
    assert!(stack.debits().await.is_empty(), "nothing charged");
    let listed = json_line(&phone(&stack.edge_url, store.path(), &["--json", "pending"]).await);
    assert_eq!(listed, json!({"pending": []}));
}
