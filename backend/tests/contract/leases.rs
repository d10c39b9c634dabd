//! Reconciliation's lease, on each store: a reconciler takes a key by writing a lease on its
//! row, nobody else takes it while the lease holds (neither another reconciler nor a request
//! that would reconcile it inline), and a reconciler that stalled past its lease and was taken
//! over writes nothing. (That two reconcilers at once take each key exactly once is in
//! `reconciler.rs`.)

use std::time::Duration;

use crate::support::{StoreKind, TestApp, TestDb, new_key, payment_body};
use backend::domain::Cause;
use backend::store::{FinalOutcome, KeyRef, RECONCILE_LEASE, StoreError};
use shared::{IdempotencyKey, UserId};

/// Moves every lease `by` into the past, as if that much time had gone by.
async fn run_leases_out(app: &TestApp, by: Duration) {
    match &app.db {
        TestDb::Postgres(pool) => sqlx::query(
            "UPDATE idempotency_keys SET lease_until = lease_until - make_interval(secs => $1)",
        )
        .bind(by.as_secs_f64())
        .execute(pool)
        .await
        .map(drop),
        TestDb::Sqlite(pool) => {
            sqlx::query("UPDATE idempotency_keys SET lease_until = lease_until - ?1")
                .bind(i64::try_from(by.as_micros()).expect("fits"))
                .execute(pool)
                .await
                .map(drop)
        }
    }
    .expect("run the leases out");
}

async fn a_leased_key_goes_to_no_one_else_and_a_lost_lease_writes_nothing(store: StoreKind) {
    let app = TestApp::spawn_on(store).await;
    let stuck_after = app.state.policy.stuck_after;
    let key = new_key();
    app.claim_without_paying(5, &key, &payment_body(1_000))
        .await;
    app.age_keys(None, Duration::from_secs(6 * 60)).await;
    let key_ref = KeyRef::new(
        UserId::numbered(5),
        &IdempotencyKey::try_from(key.clone()).expect("valid"),
    );
    let store = &app.state.store;

    let first = store
        .lease_due(stuck_after, 10)
        .await
        .expect("a reconciler step")
        .pop()
        .expect("the stuck key is due")
        .expect("its row reads");
    assert!(
        store
            .lease_due(stuck_after, 10)
            .await
            .expect("step")
            .is_empty(),
        "a leased key is not due for another reconciler"
    );
    assert!(
        store
            .lease_key(key_ref, None)
            .await
            .expect("step")
            .is_none(),
        "nor for a request that would reconcile it inline"
    );

    // The first reconciler stalls past its lease; another takes the key over.
    run_leases_out(&app, RECONCILE_LEASE + Duration::from_secs(1)).await;
    let second = store
        .lease_due(stuck_after, 10)
        .await
        .expect("a reconciler step")
        .pop()
        .expect("a key whose lease ran out is due again")
        .expect("its row reads");

    let late = store
        .finish_leased(first, &FinalOutcome::Succeeded, &Cause::background())
        .await;
    assert!(
        matches!(late, Err(StoreError::LeaseLost)),
        "the stalled reconciler's write is refused: {late:?}"
    );
    assert_eq!(
        app.key_state(5, &key).await.as_deref(),
        Some("started"),
        "and it wrote nothing"
    );
    store
        .release_leased(second, stuck_after, &Cause::background())
        .await
        .expect("the new holder's write stands");
    assert_eq!(
        app.key_state(5, &key).await.as_deref(),
        Some("released"),
        "released, and kept"
    );
    assert_eq!(
        app.texts("SELECT CAST(status AS TEXT) FROM payments").await,
        ["pending"],
        "with its payment, which may still happen"
    );
    assert_eq!(
        app.scalar("SELECT count(*) FROM idempotency_keys WHERE lease_owner IS NULL")
            .await,
        1,
        "and the lease given back"
    );
}

for_each_store!(a_leased_key_goes_to_no_one_else_and_a_lost_lease_writes_nothing);
