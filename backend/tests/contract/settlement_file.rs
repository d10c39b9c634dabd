//! The bank's settlement file (SPEC §7; `backend settle FILE`): the final word on movements the
//! rail's status checks left undecided.
//! - The simulator's file resolves keys awaiting settlement (their retries then replay the
//!   payment); the same file again changes nothing.
//! - A line with another amount, one that contradicts a final status, and one naming a
//!   reference we never issued are reported (the first two on the key's trail) and never
//!   applied.
//! - The gauge of keys awaiting settlement counts them until a file (of several batches)
//!   settles them.
//! - Through the binary: a malformed file exits non-zero naming the line, with nothing applied;
//!   a good one prints the summary.

use std::time::Duration;

use backend::domain::Cause;
use backend::reconcile::try_reconcile_once;
use backend::settlement::{SETTLE_BATCH, import};
use bank_api::settlement::SETTLEMENT_HEADER;
use bank_simulator::Knobs;
use shared::Policy;

use crate::support::process::POLICY_FILE;
use crate::support::{
    Options, SECRET, StoreKind, TestApp, new_key, payment_body, test_policy, wait_for,
};

/// One status check, replied `pending` for an hour: the movement then awaits settlement.
fn one_pending_check(store: StoreKind) -> Options {
    let mut policy: Policy = test_policy();
    policy.status_checks.at_most = 1;
    let lost = Options::replies_lost_past_the_timeout(store);
    Options {
        knobs: Knobs {
            pending_ms: 3_600_000,
            ..lost.knobs.clone()
        },
        policy,
        ..lost
    }
}

/// Pays `amount` as `user`, and runs the reconciler until the key awaits settlement.
async fn awaiting_settlement(app: &TestApp, user: u64, amount: u64) -> String {
    let key = new_key();
    app.pay(user, Some(&key), "elec-1", &payment_body(amount))
        .await
        .assert_problem(503, "outcome-pending");
    for _ in 0..50 {
        try_reconcile_once(&app.state).await.expect("step");
        let waiting = app
            .scalar(&format!(
                "SELECT count(*) FROM idempotency_keys \
                 WHERE user_id = '{user}' AND settlement_due_at IS NOT NULL"
            ))
            .await;
        if waiting == 1 {
            return key;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("user {user}'s key never came to await settlement");
}

async fn the_file_resolves_awaiting_keys_and_a_second_import_changes_nothing(store: StoreKind) {
    let app = TestApp::spawn_with(one_pending_check(store)).await;
    let first = awaiting_settlement(&app, 71, 1_100).await;
    let second = awaiting_settlement(&app, 72, 2_200).await;
    app.pay(71, Some(&first), "elec-1", &payment_body(1_100))
        .await
        .assert_problem(503, "outcome-awaiting-settlement");

    let file = app.bank.simulator.settlement_file();
    let summary = import(&app.state, &file, &Cause::background())
        .await
        .expect("imported");
    assert_eq!(
        (summary.resolved, summary.already_final),
        (2, 0),
        "{summary}"
    );
    assert!(summary.mismatched.is_empty() && summary.unknown_references.is_empty());
    for (user, key, amount) in [(71, &first, 1_100), (72, &second, 2_200)] {
        assert_eq!(app.key_state(user, key).await.as_deref(), Some("done"));
        let replay = app
            .pay(user, Some(key), "elec-1", &payment_body(amount))
            .await;
        assert_eq!((replay.status, replay.is_replay()), (201, true));
    }
    let trail = app.trail(71).await;
    assert!(trail.contains(&"resolved".to_owned()), "{trail:?}");

    let again = import(&app.state, &file, &Cause::background())
        .await
        .expect("imported again");
    assert_eq!((again.resolved, again.already_final), (0, 2), "{again}");
    assert_eq!(app.ledger().await.debits.len(), 2, "no call was made");
    assert_eq!(app.bank.simulator.check_stats().status_checks, 2);
}

async fn disagreeing_lines_are_reported_and_never_applied(store: StoreKind) {
    let app = TestApp::spawn_with(one_pending_check(store)).await;
    let waiting = awaiting_settlement(&app, 73, 3_300).await;
    let reference = app.ledger().await.debits[0].reference.clone();
    let at = "2026-12-06T18:30:00Z";
    let file = format!(
        "{SETTLEMENT_HEADER}\n{reference},3301,debited,{at}\n\
         pay-00000000-0000-4000-8000-000000000000,100,debited,{at}\n\
         {reference},3300,refunded,{at}\n"
    );
    let summary = import(&app.state, &file, &Cause::background())
        .await
        .expect("imported");
    assert_eq!(summary.resolved, 0, "{summary}");
    assert_eq!(summary.mismatched.len(), 2, "{summary}");
    assert!(summary.mismatched[0].contains("3301"), "{summary}");
    assert_eq!(summary.unknown_references.len(), 1, "{summary}");
    assert_eq!(
        app.key_state(73, &waiting).await.as_deref(),
        Some("unknown")
    );
    let findings = app
        .scalar("SELECT count(*) FROM key_events WHERE user_id = '73' AND event = 'ledger_checked'")
        .await;
    assert_eq!(findings, 2, "each mismatch on the key's trail");

    // The right line resolves it; a contradiction of that final word is then reported.
    let right = format!("{SETTLEMENT_HEADER}\n{reference},3300,debited,{at}\n");
    let summary = import(&app.state, &right, &Cause::background())
        .await
        .expect("imported");
    assert_eq!(summary.resolved, 1, "{summary}");
    let contradiction = format!("{SETTLEMENT_HEADER}\n{reference},3300,declined,{at}\n");
    let summary = import(&app.state, &contradiction, &Cause::background())
        .await
        .expect("imported");
    assert_eq!(summary.mismatched.len(), 1, "{summary}");
    assert_eq!(
        app.texts("SELECT CAST(status AS TEXT) FROM payments").await,
        ["succeeded"]
    );
}

/// With the backend's own workers running (as deployed), the gauge on-call watches counts the
/// keys awaiting the file, and the import empties it. The file is longer than one batch
/// ([`SETTLE_BATCH`]): every line is applied or reported, whichever batch it falls in.
async fn the_gauge_counts_awaiting_keys_until_a_file_of_many_batches_settles_them(
    store: StoreKind,
) {
    let app = TestApp::spawn_with(Options {
        run_workers: true,
        ..one_pending_check(store)
    })
    .await;
    let waiting = awaiting_settlement(&app, 75, 5_500).await;
    let gauge_reads =
        async |expected: f64| app.metric("payments_keys_awaiting_settlement").await == expected;
    wait_for(
        "the gauge to count the key",
        Duration::from_secs(10),
        async || gauge_reads(1.0).await,
    )
    .await;

    let mut file = app.bank.simulator.settlement_file();
    for line in 0..SETTLE_BATCH {
        let never_ours = format!("pay-00000000-0000-4000-8000-{line:012}");
        file.push_str(&format!("{never_ours},100,debited,2026-12-06T18:30:00Z\n"));
    }
    let summary = import(&app.state, &file, &Cause::background())
        .await
        .expect("imported");
    assert_eq!(summary.resolved, 1, "{summary}");
    assert_eq!(summary.unknown_references.len(), SETTLE_BATCH);
    assert_eq!(app.key_state(75, &waiting).await.as_deref(), Some("done"));
    wait_for("the gauge to empty", Duration::from_secs(10), async || {
        gauge_reads(0.0).await
    })
    .await;
}

for_each_store!(
    the_file_resolves_awaiting_keys_and_a_second_import_changes_nothing,
    disagreeing_lines_are_reported_and_never_applied,
    the_gauge_counts_awaiting_keys_until_a_file_of_many_batches_settles_them,
);

/// `backend settle FILE` as an operator runs it, against this app's database.
async fn settle_command(app: &TestApp, file: &std::path::Path) -> std::process::Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_backend"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("DATABASE_URL", &app.database_url)
        .env("BANK_URL", &app.bank.url)
        .env("AUTH_JWT_SECRET", SECRET)
        .env("APP_ENV", "production")
        .env("DATABASE_REPLICATION", "none")
        .env("REQUIRE_EDGE_PROOF", "false")
        .env("POLICY_FILE", POLICY_FILE)
        .env("NO_COLOR", "1")
        .arg("settle")
        .arg(file)
        .output()
        .await
        .expect("backend settle runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_command_refuses_a_malformed_file_naming_the_line_and_applies_nothing() {
    let app = TestApp::spawn_with(one_pending_check(StoreKind::Postgres)).await;
    let waiting = awaiting_settlement(&app, 74, 4_400).await;
    let reference = app.ledger().await.debits[0].reference.clone();
    let directory = tempfile::tempdir().expect("a directory");
    let file = directory.path().join("settlement.csv");

    // Line 2 is good, line 3 is not: nothing is applied, not even line 2.
    let malformed = format!(
        "{SETTLEMENT_HEADER}\n{reference},4400,debited,2026-12-06T18:30:00Z\n\
         {reference},4400,debited,half past six\n"
    );
    std::fs::write(&file, malformed).expect("write the file");
    let refused = settle_command(&app, &file).await;
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(stderr.contains("line 3"), "{stderr}");
    assert_eq!(
        app.key_state(74, &waiting).await.as_deref(),
        Some("unknown")
    );

    std::fs::write(&file, app.bank.simulator.settlement_file()).expect("write the file");
    let imported = settle_command(&app, &file).await;
    let stdout = String::from_utf8_lossy(&imported.stdout);
    assert!(
        imported.status.success(),
        "{}",
        String::from_utf8_lossy(&imported.stderr)
    );
    assert!(
        stdout.contains("resolved 1, already final 0, mismatched 0, unknown references 0"),
        "{stdout}"
    );
    assert_eq!(app.key_state(74, &waiting).await.as_deref(), Some("done"));
}
