//! Expiry (SPEC §4 "same key after keep_keys_for_hours", §5 invariant 6), on each store: the
//! janitor deletes a backlog of expired keys (100,000 on PostgreSQL, 10,000 on SQLite) in bounded
//! batches while new payments keep being claimed and get 201 (the slowest claim during the sweep is printed, never asserted on); payments
//! are kept, only key rows go; a key reused after expiry is a new request, whether or not the
//! janitor got to it first, and a key still within its retention replays.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::support::{StoreKind, TestApp, TestDb, new_key, payment_body, wait_for};
use backend::janitor::{self, EXPIRY_BATCH_SIZE};

/// Clients paying with new keys while the janitor sweeps.
const CLAIM_LOOPS: usize = 4;
/// How far past `keep_keys_for_hours: 48` the backlog is.
const BACKLOG_AGE: Duration = Duration::from_secs(50 * 3600);

/// Writes `count` finished keys, each with its succeeded payment, all 50 hours old (past
/// `keep_keys_for_hours: 48`), in one or two statements.
async fn insert_expired_backlog(app: &TestApp, count: i64) {
    match &app.db {
        TestDb::Postgres(pool) => sqlx::query(
            "WITH old AS ( \
                 SELECT g, 1000 + g % 100 AS user_id, gen_random_uuid() AS key, \
                        gen_random_uuid() AS payment_id, now() - make_interval(secs => $2) AS at \
                 FROM generate_series(1, $1) AS g), \
             paid AS ( \
                 INSERT INTO payments (payment_id, user_id, bill_id, amount_paise, payer_vpa, \
                                       status, bank_reference, created_at, finished_at) \
                 SELECT payment_id, user_id, 'old-' || g, 1000, 'asha@okbank', 'succeeded', \
                        'pay-' || payment_id, at, at FROM old) \
             INSERT INTO idempotency_keys (user_id, key, operation, state, fingerprint, \
                                           resource_id, created_at, claimed_at, expires_at) \
             SELECT user_id, key, 'pay_bill', 'done', sha256(key::text::bytea), payment_id, at, \
                    at, at + interval '48 hours' \
             FROM old",
        )
        .bind(count)
        .bind(BACKLOG_AGE.as_secs_f64())
        .execute(pool)
        .await
        .map(drop),
        TestDb::Sqlite(pool) => {
            let at = time::OffsetDateTime::now_utc() - BACKLOG_AGE;
            let at = i64::try_from(at.unix_timestamp_nanos() / 1_000).expect("fits");
            let mut tx = pool.begin().await.expect("begin");
            sqlx::query(
                "WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ?1) \
                 INSERT INTO idempotency_keys (user_id, key, operation, state, fingerprint, \
                                               resource_id, created_at, claimed_at, expires_at) \
                 SELECT 1000 + n % 100, randomblob(16), 'pay_bill', 'done', randomblob(32), \
                        randomblob(16), ?2, ?2, ?2 + 48 * 3600 * 1000000 FROM g",
            )
            .bind(count)
            .bind(at)
            .execute(&mut *tx)
            .await
            .expect("insert the expired keys");
            sqlx::query(
                "INSERT INTO payments (payment_id, user_id, bill_id, amount_paise, payer_vpa, \
                                       status, bank_reference, created_at, finished_at) \
                 SELECT resource_id, user_id, 'old-' || rowid, 1000, 'asha@okbank', 'succeeded', \
                        'pay-' || lower(hex(resource_id)), created_at, created_at \
                 FROM idempotency_keys",
            )
            .execute(&mut *tx)
            .await
            .expect("insert their payments");
            tx.commit().await.map(drop)
        }
    }
    .expect("insert the expired backlog");
}

async fn a_backlog_of_expired_keys_is_deleted_in_batches_while_new_claims_keep_succeeding(
    store: StoreKind,
) {
    let expired_keys: i64 = match store {
        StoreKind::Postgres => 100_000,
        StoreKind::Sqlite => 10_000,
    };
    let app = Arc::new(TestApp::spawn_on(store).await);
    let inserting = Instant::now();
    insert_expired_backlog(&app, expired_keys).await;
    let inserted_in = inserting.elapsed();
    assert_eq!(app.count("idempotency_keys").await, expired_keys);

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
                    let reply = app
                        .pay(user, Some(&new_key()), "elec-1", &payment_body(500))
                        .await;
                    latencies.push(started.elapsed());
                    assert_eq!(
                        reply.status,
                        201,
                        "a claim during the sweep: {}",
                        String::from_utf8_lossy(&reply.bytes)
                    );
                    assert!(!reply.is_replay());
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
        deleted, expired_keys as u64,
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
        expired_keys + claimed,
        "payments are kept; only key rows expire"
    );
    assert_eq!(app.ledger().await.debits.len(), latencies.len());
    assert_eq!(
        app.metric("payments_janitor_keys_expired_total").await,
        expired_keys as f64
    );

    latencies.sort();
    let slowest = latencies.last().copied().unwrap_or_default();
    let median = latencies[latencies.len() / 2];
    println!(
        "expiry on {store:?}: {expired_keys} expired keys (inserted in {inserted_in:?}) deleted in {} \
         batches of at most {EXPIRY_BATCH_SIZE} in {swept_in:?}; meanwhile {} claims by \
         {CLAIM_LOOPS} clients, all 201: median {median:?}, slowest {slowest:?}",
        (expired_keys + EXPIRY_BATCH_SIZE - 1) / EXPIRY_BATCH_SIZE,
        latencies.len() - claims_before_sweep,
    );
}

async fn a_reused_expired_key_runs_as_new_and_an_unexpired_key_replays(store: StoreKind) {
    // A deduplicating bank (the default): a reused key's claim has a reference of its own
    // (SPEC §7), so the bank moves money again rather than reply with the first outcome.
    let app = TestApp::spawn_on(store).await;
    let user = 31;
    let body = payment_body(4_200);
    let (swept, unswept, kept) = (new_key(), new_key(), new_key());
    let mut first = Vec::new();
    for key in [&swept, &unswept, &kept] {
        let reply = app.pay(user, Some(key), "elec-1", &body).await;
        assert_eq!(reply.status, 201);
        first.push(reply);
    }
    let age = async |key: &str| {
        app.age_keys(Some(key), Duration::from_secs(49 * 3600))
            .await
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

for_each_store!(
    a_backlog_of_expired_keys_is_deleted_in_batches_while_new_claims_keep_succeeding,
    a_reused_expired_key_runs_as_new_and_an_unexpired_key_replays,
);
