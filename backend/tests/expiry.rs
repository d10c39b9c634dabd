//! Expiry (SPEC §4 "same key after keep_keys_for_hours", §5 invariant 6): the janitor deletes a
//! backlog of 100,000 expired keys in bounded batches while new payments keep being claimed and
//! answered 201 (the slowest claim during the sweep is printed, never asserted on); payments
//! are kept, only key rows go; a key reused after expiry is a new request, whether or not the
//! janitor got to it first, and a key still within its retention replays.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use backend::bank_simulator::Knobs;
use backend::janitor::{self, EXPIRY_BATCH_SIZE};
use support::{Options, TestApp, new_key, payment_body, wait_for};

const EXPIRED_KEYS: i64 = 100_000;
/// Clients paying with new keys while the janitor sweeps.
const CLAIM_LOOPS: usize = 4;

/// Writes `EXPIRED_KEYS` finished keys, each with its succeeded payment, all 50 hours old (past
/// `keep_keys_for_hours: 48`), in one statement.
async fn insert_expired_backlog(app: &TestApp) {
    sqlx::query(
        "WITH old AS ( \
             SELECT g, 1000 + g % 100 AS user_id, gen_random_uuid() AS key, \
                    gen_random_uuid() AS payment_id, now() - interval '50 hours' AS at \
             FROM generate_series(1, $1) AS g), \
         paid AS ( \
             INSERT INTO payments (payment_id, user_id, bill_id, amount_paise, payer_vpa, \
                                   status, bank_reference, created_at, finished_at) \
             SELECT payment_id, user_id, 'old-' || g, 1000, 'asha@okbank', 'succeeded', \
                    'pay-' || user_id || '-' || key, at, at FROM old) \
         INSERT INTO idempotency_keys (user_id, key, operation, state, fingerprint, resource_id, \
                                       created_at, claimed_at) \
         SELECT user_id, key, 'pay_bill', 'done', sha256(key::text::bytea), payment_id, at, at \
         FROM old",
    )
    .bind(EXPIRED_KEYS)
    .execute(app.state.store.pool())
    .await
    .expect("insert the expired backlog");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_of_100_000_expired_keys_is_deleted_in_batches_while_new_claims_keep_succeeding()
{
    let app = Arc::new(TestApp::spawn().await);
    let inserting = Instant::now();
    insert_expired_backlog(&app).await;
    let inserted_in = inserting.elapsed();
    assert_eq!(app.count("idempotency_keys").await, EXPIRED_KEYS);

    // Clients keep paying with new keys until the sweep is over; every claim must be a 201.
    let sweep_done = Arc::new(AtomicBool::new(false));
    let claims = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (0..CLAIM_LOOPS)
        .map(|client| {
            let (app, sweep_done, claims) = (
                Arc::clone(&app),
                Arc::clone(&sweep_done),
                Arc::clone(&claims),
            );
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                while !sweep_done.load(Ordering::SeqCst) {
                    let user = 1 + client as u64;
                    let started = Instant::now();
                    let answer = app
                        .pay(user, Some(&new_key()), "elec-1", &payment_body(500))
                        .await;
                    latencies.push(started.elapsed());
                    assert_eq!(
                        answer.status,
                        201,
                        "a claim during the sweep: {}",
                        String::from_utf8_lossy(&answer.bytes)
                    );
                    assert!(!answer.is_replay());
                    claims.fetch_add(1, Ordering::SeqCst);
                }
                latencies
            })
        })
        .collect();
    wait_for(
        "the clients to be paying",
        Duration::from_secs(10),
        async || claims.load(Ordering::SeqCst) >= CLAIM_LOOPS,
    )
    .await;
    let claims_before_sweep = claims.load(Ordering::SeqCst);

    let sweeping = Instant::now();
    let deleted = janitor::expire_all(&app.state, EXPIRY_BATCH_SIZE)
        .await
        .expect("the sweep runs");
    let swept_in = sweeping.elapsed();
    sweep_done.store(true, Ordering::SeqCst);
    let mut latencies = Vec::new();
    for client in clients {
        latencies.extend(
            client
                .await
                .expect("every claim during the sweep was a 201"),
        );
    }

    assert_eq!(
        deleted, EXPIRED_KEYS as u64,
        "every expired key, and only those"
    );
    let claimed = i64::try_from(latencies.len()).expect("small");
    assert_eq!(
        app.count("idempotency_keys").await,
        claimed,
        "only the new keys are left"
    );
    assert_eq!(
        app.count("payments").await,
        EXPIRED_KEYS + claimed,
        "payments are kept; only key rows expire"
    );
    assert_eq!(app.ledger().await.debits.len(), latencies.len());
    assert_eq!(
        app.metric("janitor_keys_expired_total").await,
        EXPIRED_KEYS as f64
    );

    latencies.sort();
    let slowest = latencies.last().copied().unwrap_or_default();
    let median = latencies[latencies.len() / 2];
    println!(
        "expiry: {EXPIRED_KEYS} expired keys (inserted in {inserted_in:?}) deleted in {} \
         batches of at most {EXPIRY_BATCH_SIZE} in {swept_in:?}; meanwhile {} claims by \
         {CLAIM_LOOPS} clients, all 201: median {median:?}, slowest {slowest:?}",
        (EXPIRED_KEYS + EXPIRY_BATCH_SIZE - 1) / EXPIRY_BATCH_SIZE,
        latencies.len() - claims_before_sweep,
    );
}

#[tokio::test]
async fn a_reused_expired_key_runs_as_new_and_an_unexpired_key_replays() {
    // The bank reference is `pay-{user}-{key}` (SPEC §7), so a deduplicating bank would answer
    // a reused key's call with its first outcome; with dedupe off the ledger shows whether the
    // backend really called the bank again.
    let app = TestApp::spawn_with(Options {
        knobs: Knobs {
            dedupe: false,
            ..Knobs::default()
        },
        ..Options::default()
    })
    .await;
    let user = 31;
    let body = payment_body(4_200);
    let (swept, unswept, kept) = (new_key(), new_key(), new_key());
    let mut first = Vec::new();
    for key in [&swept, &unswept, &kept] {
        let answer = app.pay(user, Some(key), "elec-1", &body).await;
        assert_eq!(answer.status, 201);
        first.push(answer);
    }
    let age = async |key: &str| {
        sqlx::query(
            "UPDATE idempotency_keys SET created_at = created_at - interval '49 hours', \
             claimed_at = claimed_at - interval '49 hours' WHERE key = $1::uuid",
        )
        .bind(key)
        .execute(app.state.store.pool())
        .await
        .expect("age the key");
    };
    // One key the janitor deletes; another that expires after the sweep, which the request
    // itself finds expired.
    age(&swept).await;
    let deleted = janitor::expire_all(&app.state, EXPIRY_BATCH_SIZE)
        .await
        .expect("the sweep runs");
    assert_eq!(deleted, 1, "only the expired key");
    assert_eq!(app.key_state(user, &swept).await, None);
    age(&unswept).await;

    for (key, before) in [(&swept, &first[0]), (&unswept, &first[1])] {
        let again = app.pay(user, Some(key), "elec-1", &body).await;
        assert_eq!(again.status, 201);
        assert!(!again.is_replay(), "an expired key is a new request");
        assert_ne!(again.json()["payment_id"], before.json()["payment_id"]);
        assert_eq!(app.key_state(user, key).await.as_deref(), Some("done"));
    }
    let replay = app.pay(user, Some(&kept), "elec-1", &body).await;
    assert_eq!(replay.status, 201);
    assert!(replay.is_replay(), "a key within its retention replays");
    assert_eq!(replay.bytes, first[2].bytes);

    assert_eq!(
        app.ledger().await.debits.len(),
        5,
        "three first debits, one for each reused expired key, none for the replay"
    );
    assert_eq!(app.count("payments").await, 5, "the old payments are kept");
    assert_eq!(app.count("idempotency_keys").await, 3);
}
