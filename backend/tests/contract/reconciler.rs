//! The reconciler as replicas run it, and as operators watch it (SPEC §5, invariant 5):
//! - two reconcilers (two "replicas", each with its own pool and metrics) draining the same
//!   stuck keys at once take every key exactly once, on each store: PostgreSQL's
//!   `FOR UPDATE SKIP LOCKED` never hands one row to both, nor does SQLite's lease, so the keys
//!   found and the keys resolved each add up to the number of keys;
//! - the `backend` binary's own workers publish what they do at `/metrics`: stuck keys found,
//!   keys resolved by outcome, expired keys deleted, and, with the bank stopped, failed bank
//!   look-ups with the keys postponed and the ages of the oldest `started` and `unknown` keys.

use std::collections::HashSet;
use std::time::Duration;

use crate::support::process::{BackendEnv, BackendProcess};
use crate::support::{
    Options, StoreKind, TestApp, TestDatabase, key_state_in, metric_in, new_key, payment_body,
    send_pay, test_config, wait_for,
};
use backend::metrics::{Metrics, OutcomeLabels};
use backend::reconcile::{self, Step};
use backend::startup::build_state;
use backend::state::AppState;
use bank_simulator::{BankSimulator, Knobs};
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

/// Stuck keys drained by two reconcilers at once: half debited by the bank, half never seen.
const STUCK_KEYS: usize = 200;

/// Writes `keys` as a crash leaves them: `started` six minutes ago (past `stuck_after`), each
/// with its pending payment under its bank reference.
async fn insert_crashed_claims(pool: &PgPool, keys: &[(u64, Uuid)]) {
    let users: Vec<String> = keys.iter().map(|(user, _)| user.to_string()).collect();
    let uuids: Vec<Uuid> = keys.iter().map(|(_, key)| *key).collect();
    sqlx::query(
        "WITH crashed AS ( \
             SELECT user_id, key, gen_random_uuid() AS payment_id, \
                    now() - interval '6 minutes' AS at \
             FROM unnest($1::text[], $2::uuid[]) AS k (user_id, key)), \
         pending AS ( \
             INSERT INTO payments (payment_id, user_id, bill_id, amount_paise, payer_vpa, \
                                   status, bank_reference, created_at) \
             SELECT payment_id, user_id, 'elec-1', 1000, 'asha@okbank', 'pending', \
                    'pay-' || payment_id, at FROM crashed) \
         INSERT INTO idempotency_keys (user_id, key, operation, state, fingerprint, resource_id, \
                                       created_at, claimed_at) \
         SELECT user_id, key, 'pay_bill', 'started', sha256(key::text::bytea), payment_id, at, at \
         FROM crashed",
    )
    .bind(users)
    .bind(uuids)
    .execute(pool)
    .await
    .expect("insert the crashed claims");
}

/// Runs reconciler steps until nothing is due; returns how many keys this one took up.
async fn drain(state: AppState) -> usize {
    let mut handled = 0;
    while reconcile::try_reconcile_once(&state)
        .await
        .expect("a reconciler step")
        == Step::Handled
    {
        handled += 1;
    }
    handled
}

fn resolved(metrics: &Metrics, outcome: &'static str) -> u64 {
    metrics
        .keys_resolved
        .get_or_create(&OutcomeLabels {
            operation: "pay_bill",
            outcome,
        })
        .get()
}

async fn two_reconcilers_at_once_take_each_stuck_key_exactly_once(store: StoreKind) {
    let app = TestApp::spawn_on(store).await;
    let mut references = Vec::with_capacity(STUCK_KEYS);
    for i in 0..STUCK_KEYS {
        let user = i as u64 % 10 + 1;
        references.push(
            app.claim_without_paying(user, &new_key(), &payment_body(1000))
                .await,
        );
    }
    // Crashed six minutes ago: past `stuck_after`.
    app.age_keys(None, Duration::from_secs(6 * 60)).await;
    // The crashed attempts of every other key had reached the bank.
    let debited: HashSet<String> = references.iter().step_by(2).cloned().collect();
    for reference in &debited {
        let response = app
            .http
            .post(format!("{}/debits", app.bank.url))
            .json(
                &json!({ "reference": reference, "amount_paise": 1000, "account": "asha@okbank" }),
            )
            .send()
            .await
            .expect("the bank replies");
        assert_eq!(response.status(), 201);
    }

    // A second replica: its own pool and metrics, the same database and bank.
    let options = Options::default();
    let replica_store = backend::store::connect(&app.database_url, 5, Duration::from_secs(3))
        .await
        .expect("the second replica connects");
    let replica = build_state(
        &test_config(app.database_url.clone(), &app.bank.url, &options),
        replica_store,
    )
    .expect("the second replica's state");
    let first = tokio::spawn(drain(app.state.clone()));
    let second = tokio::spawn(drain(replica.clone()));
    let (first, second) = (
        first.await.expect("the first reconciler ran"),
        second.await.expect("the second reconciler ran"),
    );

    let (a, b) = (&app.state.metrics, &replica.metrics);
    println!(
        "two reconcilers on {store:?}: {STUCK_KEYS} stuck keys, taken up {first} + {second}; \
         resolved succeeded {} + {}, released {} + {}",
        resolved(a, "succeeded"),
        resolved(b, "succeeded"),
        resolved(a, "released"),
        resolved(b, "released"),
    );
    assert_eq!(first + second, STUCK_KEYS, "every key taken up once");
    assert_eq!(
        a.stuck_keys_found.get() + b.stuck_keys_found.get(),
        STUCK_KEYS as u64,
        "stuck keys found, summed over both replicas"
    );
    assert_eq!(
        resolved(a, "succeeded") + resolved(b, "succeeded"),
        (STUCK_KEYS / 2) as u64,
        "debited keys resolved once each"
    );
    assert_eq!(
        resolved(a, "released") + resolved(b, "released"),
        (STUCK_KEYS / 2) as u64,
        "never-seen keys released once each"
    );
    assert_eq!(a.lookup_failures.get() + b.lookup_failures.get(), 0);

    let unfinished = app
        .scalar("SELECT count(*) FROM idempotency_keys WHERE state IN ('started', 'unknown')")
        .await;
    assert_eq!(unfinished, 0);
    let released = app
        .scalar("SELECT count(*) FROM idempotency_keys WHERE state = 'released'")
        .await;
    assert_eq!(released, (STUCK_KEYS / 2) as i64);
    let succeeded = app
        .texts(
            "SELECT p.bank_reference FROM payments p \
             JOIN idempotency_keys k ON k.user_id = p.user_id AND k.resource_id = p.payment_id \
             WHERE p.status = 'succeeded' AND k.state = 'done'",
        )
        .await;
    assert_eq!(succeeded.into_iter().collect::<HashSet<_>>(), debited);
    assert_eq!(
        app.scalar("SELECT count(*) FROM payments WHERE status = 'pending'")
            .await,
        (STUCK_KEYS / 2) as i64,
        "released keys keep their pending payments"
    );
    assert_eq!(app.ledger().await.debits.len(), STUCK_KEYS / 2);
}

/// A batch of due keys with one corrupt row among them (its claim's payment row is gone): the
/// reconciler skips it, logged and counted, and resolves every other key of the batch.
async fn a_corrupt_row_among_due_keys_is_skipped_and_the_others_resolve(store: StoreKind) {
    let app = TestApp::spawn_on(store).await;
    let keys: Vec<String> = (0..6).map(|_| new_key()).collect();
    let mut references = Vec::new();
    for key in &keys {
        references.push(app.claim_without_paying(71, key, &payment_body(900)).await);
    }
    app.age_keys(None, Duration::from_secs(6 * 60)).await;
    app.execute(&format!(
        "DELETE FROM payments WHERE bank_reference = '{}'",
        references[2]
    ))
    .await;

    let reconciler = crate::support::load::BackgroundReconciler::start(&app);
    wait_for(
        "the five readable keys to be released",
        Duration::from_secs(20),
        async || {
            app.scalar("SELECT count(*) FROM idempotency_keys WHERE state = 'released'")
                .await
                == 5
        },
    )
    .await;
    reconciler.stop().await;
    assert_eq!(
        app.key_state(71, &keys[2]).await.as_deref(),
        Some("started"),
        "the corrupt key is left as it was, for an operator"
    );
    assert!(app.state.metrics.corrupt_keys_skipped.get() >= 1);
    assert!(
        app.metric("payments_reconcile_corrupt_keys_skipped_total")
            .await
            >= 1.0,
        "and shown at /metrics"
    );
}

for_each_store!(
    two_reconcilers_at_once_take_each_stuck_key_exactly_once,
    a_corrupt_row_among_due_keys_is_skipped_and_the_others_resolve,
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_show_keys_found_resolved_expired_and_lookup_failures_while_the_bank_is_down() {
    // The bank debits and holds its reply past the backend's 200 ms timeout: the key goes
    // `unknown` and the backend's own reconciler resolves it.
    let bank = BankSimulator::spawn(Knobs {
        lost_reply_rate: 1.0,
        lost_reply_delay_ms: 1_000,
        ..Knobs::default()
    })
    .await
    .expect("bank starts");
    let database = TestDatabase::create().await;
    let pool = PgPool::connect(database.url())
        .await
        .expect("connect to the test database");
    let backend = BackendProcess::start(&BackendEnv {
        bank_timeout_ms: 200,
        janitor_interval_seconds: 1,
        ..BackendEnv::new(database.url(), &bank.url)
    })
    .await;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client");
    let metrics = async || -> String {
        http.get(format!("{}/metrics", backend.admin_url))
            .send()
            .await
            .expect("metrics reply")
            .text()
            .await
            .expect("metrics text")
    };
    let patience = Duration::from_secs(15);
    let body = crate::support::payment_body(1_500);

    let lost = new_key();
    send_pay(&http, &backend.url, 41, Some(&lost), "elec-1", &body)
        .await
        .expect("backend replies")
        .assert_problem(503, "outcome-pending");
    let succeeded =
        r#"payments_reconcile_keys_resolved_total{operation="pay_bill",outcome="succeeded"}"#;
    wait_for(
        "the lost reply's key to be resolved",
        patience,
        async || metric_in(&metrics().await, succeeded) == 1.0,
    )
    .await;
    assert_eq!(
        key_state_in(&pool, 41, &lost).await.as_deref(),
        Some("done")
    );

    // Three keys past their retention: the janitor (every second here) deletes them.
    sqlx::query(
        "INSERT INTO idempotency_keys (user_id, key, operation, state, fingerprint, \
                                       resource_id, created_at, claimed_at, expires_at) \
         SELECT 42, gen_random_uuid(), 'pay_bill', 'done', sha256(g::text::bytea), \
                gen_random_uuid(), now() - interval '49 hours', now() - interval '49 hours', \
                now() - interval '1 hour' \
         FROM generate_series(1, 3) AS g",
    )
    .execute(&pool)
    .await
    .expect("insert expired keys");
    wait_for(
        "the janitor to delete the expired keys",
        patience,
        async || metric_in(&metrics().await, "payments_janitor_keys_expired_total") == 3.0,
    )
    .await;

    // The bank stops. A new payment's call cannot connect: nothing left, so its claim is
    // released at once with no status check. A claim that crashed six minutes ago is due: it
    // cannot be looked up, so it is postponed and stays unfinished.
    drop(bank);
    let unreachable = new_key();
    send_pay(&http, &backend.url, 43, Some(&unreachable), "elec-1", &body)
        .await
        .expect("backend replies")
        .assert_problem(503, "service-unavailable");
    assert_eq!(
        key_state_in(&pool, 43, &unreachable).await.as_deref(),
        Some("released")
    );
    let crashed = Uuid::new_v4();
    insert_crashed_claims(&pool, &[(44, crashed)]).await;
    wait_for(
        "a failed look-up of the crashed claim and the age gauge",
        patience,
        async || {
            let text = metrics().await;
            let keys_postponed: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM idempotency_keys \
                 WHERE state = 'started' AND failed_lookups >= 1 AND next_lookup_at IS NOT NULL",
            )
            .fetch_one(&pool)
            .await
            .expect("count the postponed keys");
            metric_in(&text, "payments_reconcile_lookup_failures_total") >= 1.0
                && metric_in(&text, "payments_oldest_started_key_age_seconds") >= 360.0
                && keys_postponed == 1
        },
    )
    .await;
    let postponed: Vec<(String, i16, i16, bool)> = sqlx::query_as(
        "SELECT state::text, failed_lookups, status_checks, next_lookup_at > now() \
         FROM idempotency_keys WHERE state IN ('started', 'unknown')",
    )
    .fetch_all(&pool)
    .await
    .expect("unfinished keys");
    assert_eq!(postponed.len(), 1, "{postponed:?}");
    let (state, failed_lookups, status_checks, later) = &postponed[0];
    assert_eq!(state, "started");
    assert!(
        *failed_lookups >= 1 && *status_checks >= 1 && *later,
        "the crashed claim was postponed after a failed look-up, which counts as a check"
    );

    let text = metrics().await;
    assert!(
        metric_in(&text, "payments_reconcile_stuck_keys_found_total") >= 2.0,
        "{text}"
    );
    let reconciler_lines: Vec<&str> = text
        .lines()
        .filter(|line| {
            ["reconcile_", "janitor_", "oldest_"]
                .iter()
                .any(|prefix| line.starts_with(prefix))
        })
        .collect();
    println!(
        "reconciler metrics with the bank down:\n{}",
        reconciler_lines.join("\n")
    );
}
