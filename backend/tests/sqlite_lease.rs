//! The embedded SQLite store's stand-in for `FOR UPDATE SKIP LOCKED`: a reconciler takes a key
//! by setting a lease on its row, nobody else takes it while the lease holds, and a reconciler
//! that stalled past its lease and was taken over writes nothing. (That two reconcilers at once
//! take each key exactly once is in the shared contract suite, `reconciler.rs`.)

mod support;

use std::time::Duration;

use backend::store::sqlite::RECONCILE_LEASE;
use backend::store::{KeyRef, MovementResult, Store, StoreError};
use shared::{IdempotencyKey, UserId};
use support::{StoreKind, TestApp, new_key, payment_body};

#[tokio::test]
async fn a_leased_key_goes_to_no_one_else_and_a_lost_lease_writes_nothing() {
    let app = TestApp::spawn_on(StoreKind::Sqlite).await;
    let stuck_after = app.state.policy.stuck_after;
    let key = new_key();
    app.claim_without_paying(5, &key, &payment_body(1_000))
        .await;
    app.age_keys(None, Duration::from_secs(6 * 60)).await;
    let key_ref = KeyRef::new(
        UserId::new(5).expect("positive"),
        &IdempotencyKey::try_from(key.clone()).expect("valid"),
    );
    let store = &app.state.store;

    let first = store
        .lock_next_due(stuck_after)
        .await
        .expect("a reconciler step")
        .expect("the stuck key is due");
    assert!(
        store
            .lock_next_due(stuck_after)
            .await
            .expect("step")
            .is_none(),
        "a leased key is not due for another reconciler"
    );
    assert!(
        store
            .lock_unfinished(key_ref)
            .await
            .expect("step")
            .is_none(),
        "nor for a request that would reconcile it inline"
    );

    // The first reconciler stalls past its lease; another takes the key over.
    let Store::Sqlite(sqlite) = store else {
        panic!("a SQLite app")
    };
    sqlx::query("UPDATE idempotency_keys SET lease_until = lease_until - ?1")
        .bind(i64::try_from((RECONCILE_LEASE + Duration::from_secs(1)).as_micros()).expect("fits"))
        .execute(sqlite.pool())
        .await
        .expect("run the lease out");
    let second = store
        .lock_next_due(stuck_after)
        .await
        .expect("a reconciler step")
        .expect("a key whose lease ran out is due again");

    let late = first.finish(&MovementResult::Succeeded).await;
    assert!(
        matches!(late, Err(StoreError::LeaseLost)),
        "the stalled reconciler's write is refused: {late:?}"
    );
    assert_eq!(
        app.key_state(5, &key).await.as_deref(),
        Some("started"),
        "and it wrote nothing"
    );
    second
        .release(stuck_after)
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
}
