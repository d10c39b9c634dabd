//! A key's life is decided once, at its claim (SPEC §4, "Expiry"): the expiry is written on the
//! key's row, so replicas whose policies differ (a rolling deploy that changes
//! `keep_keys_for_hours`) agree on every existing key, and every reply says when the key
//! expires (`Idempotency-Expires`). And a claim is claimed again only while it can still be
//! completed: a released claim whose last check voided its movement is never called at the bank
//! again, so no money moves under a `void` record, and its retry is a new claim under a new
//! reference. The bank simulator replies over HTTP; money is counted at its ledger.

use std::time::Duration;

use backend::reconcile::{Step, try_reconcile_once};
use backend::store::KeyRef;
use bank_simulator::Knobs;
use shared::{Decision, IdempotencyKey, Policy, UserId, decide};

use crate::support::{
    Options, Received, StoreKind, TestApp, new_key, payment_body, payment_fingerprint, send_pay,
};

const HOUR: Duration = Duration::from_secs(3600);

/// A policy keeping keys `hours`, as one replica of a rolling deploy would have it.
fn keeping_keys_for(hours: u64) -> Policy {
    Policy {
        keep_keys_for: HOUR * u32::try_from(hours).expect("small"),
        ..crate::support::test_policy()
    }
}

/// Pays as `user` with `key` at the backend `url` while the bank replies to every call with a 500
/// before it moves money: the claim is released at once (503, nothing charged). Then the bank
/// works again.
async fn pay_and_be_released(app: &TestApp, url: &str, user: u64, key: &str) {
    app.bank.simulator.set_knobs(Knobs {
        error_rate: 1.0,
        ..Knobs::default()
    });
    let reply = send_pay(
        &app.http,
        url,
        user,
        Some(key),
        "elec-1",
        &payment_body(700),
    )
    .await
    .expect("replies");
    reply.assert_problem(503, "service-unavailable");
    assert_eq!(app.key_state(user, key).await.as_deref(), Some("released"));
    app.bank.simulator.set_knobs(Knobs::default());
}

/// Every debit at the bank belongs to exactly one succeeded payment and every succeeded payment
/// has its debit: the promise, counted at the bank's ledger and in the table.
async fn assert_money_matches(app: &TestApp, what: &str) {
    let ledger = app.ledger().await;
    let mut debited: Vec<String> = ledger.debits.iter().map(|d| d.reference.clone()).collect();
    debited.sort();
    let mut succeeded = app
        .texts("SELECT bank_reference FROM payments WHERE CAST(status AS TEXT) = 'succeeded'")
        .await;
    succeeded.sort();
    assert_eq!(debited, succeeded, "{what}: debits and succeeded payments");
}

fn assert_not_5xx(reply: &Received, what: &str) {
    assert!(
        reply.status < 500,
        "{what}: {} {}",
        reply.status,
        String::from_utf8_lossy(&reply.bytes)
    );
}

async fn two_replicas_with_different_policies_agree_on_a_keys_expiry(claimed_at_24h: bool) {
    // This backend keeps keys 24 h and runs the reconciler; the replica keeps them 48 h.
    let app = TestApp::spawn_with(Options {
        policy: keeping_keys_for(24),
        ..Options::default()
    })
    .await;
    let long_keeper = app
        .spawn_replica(&Options {
            policy: keeping_keys_for(48),
            ..Options::default()
        })
        .await;
    let key = new_key();
    let claiming = if claimed_at_24h {
        app.url.clone()
    } else {
        long_keeper.url.clone()
    };
    pay_and_be_released(&app, &claiming, 3, &key).await;
    app.age_keys(Some(&key), HOUR * 25).await;
    app.make_lookup_due(&key).await;
    assert_eq!(
        try_reconcile_once(&app.state).await.expect("a step"),
        Step::Handled
    );
    // The 24 h replica voided the claim only if the claim itself said 24 h.
    let movement = app.texts("SELECT CAST(status AS TEXT) FROM payments").await;
    assert_eq!(movement, [if claimed_at_24h { "void" } else { "pending" }]);

    let mut bodies = Vec::new();
    for attempt in ["retry", "repeat"] {
        let reply = send_pay(
            &app.http,
            &long_keeper.url,
            3,
            Some(&key),
            "elec-1",
            &payment_body(700),
        )
        .await
        .expect("replies");
        assert_not_5xx(&reply, attempt);
        assert_eq!(
            reply.status,
            201,
            "{attempt}: {}",
            String::from_utf8_lossy(&reply.bytes)
        );
        assert!(reply.header("idempotency-expires").is_some(), "{attempt}");
        bodies.push(reply.json());
    }
    assert_eq!(bodies[0], bodies[1], "the repeat replays the retry's reply");
    let ledger = app.ledger().await;
    assert_eq!(ledger.debits.len(), 1, "one debit for the one payment");
    let reference = bodies[0]["bank_reference"].as_str().expect("a reference");
    let references = app.texts("SELECT bank_reference FROM payments").await;
    if claimed_at_24h {
        assert_eq!(references.len(), 2, "the voided claim and the new one");
        assert!(
            !app.texts("SELECT bank_reference FROM payments WHERE CAST(status AS TEXT) = 'void'")
                .await
                .contains(&reference.to_owned()),
            "the retry of a voided key is a new claim under a new reference"
        );
    } else {
        assert_eq!(references, [reference], "the released claim, completed");
    }
    assert_money_matches(&app, "after both retries").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_key_claimed_under_24_hours_is_expired_for_a_48_hour_replica_too() {
    two_replicas_with_different_policies_agree_on_a_keys_expiry(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_key_claimed_under_48_hours_lives_48_hours_for_a_24_hour_replica_too() {
    two_replicas_with_different_policies_agree_on_a_keys_expiry(false).await;
}

/// The race in one process, step by step: a retry reads its released key just before expiry and
/// decides to claim it again; before it does, the reconciler's last check voids the movement;
/// then the retry's re-claim runs. It must find nothing to claim, and the customer's next retry
/// is a new claim under a new reference: one debit, and no money under a `void` record.
async fn a_claim_voided_between_the_decision_and_the_reclaim_is_never_claimed_again(
    store: StoreKind,
) {
    let app = TestApp::spawn_on(store).await;
    let keep = app.state.policy.keep_keys_for;
    let user = 4;
    for round in 0..8 {
        let key = new_key();
        pay_and_be_released(&app, &app.url, user, &key).await;
        // A minute before its expiry, by its row, the retry reads the key.
        app.age_keys(Some(&key), keep - Duration::from_secs(60))
            .await;
        let key_ref = KeyRef::new(
            UserId::numbered(user),
            &IdempotencyKey::try_from(key.clone()).expect("valid"),
        );
        let stored = app
            .state
            .store
            .load_key(key_ref.clone())
            .await
            .expect("read")
            .expect("stored");
        let fingerprint = payment_fingerprint(&payment_body(700));
        let attempt = shared::decision::Attempt {
            key: Ok(Some(IdempotencyKey::try_from(key.clone()).expect("valid"))),
            fingerprint,
        };
        let decision = decide(
            &app.state.policy,
            &attempt,
            Some(&stored.record),
            stored.read_at,
        );
        assert_eq!(decision, Decision::ClaimReleased, "round {round}");

        // Meanwhile the key expires and its last check finds nothing at the bank.
        app.age_keys(Some(&key), Duration::from_secs(120)).await;
        app.make_lookup_due(&key).await;
        assert_eq!(
            try_reconcile_once(&app.state).await.expect("a step"),
            Step::Handled
        );
        let voided = app
            .scalar("SELECT count(*) FROM payments WHERE CAST(status AS TEXT) = 'void'")
            .await;
        assert_eq!(voided, round + 1, "round {round}: the last check voided it");

        // The retry goes on with its decision: the re-claim finds nothing to claim.
        let reclaimed = app
            .state
            .store
            .reclaim_released(
                key_ref,
                &fingerprint,
                backend::store::ClaimToken::mint(),
                &backend::domain::Cause::background(),
            )
            .await
            .expect("the statement runs");
        assert_eq!(
            reclaimed, None,
            "round {round}: a voided claim is never claimed again"
        );

        // The customer's next retry: a new claim, a new reference, one debit.
        let retry = app
            .pay(user, Some(&key), "elec-1", &payment_body(700))
            .await;
        assert_eq!(
            retry.status,
            201,
            "round {round}: {}",
            String::from_utf8_lossy(&retry.bytes)
        );
        let replay = app
            .pay(user, Some(&key), "elec-1", &payment_body(700))
            .await;
        assert_eq!(replay.status, 201, "round {round}: the repeat replays");
        assert_eq!(replay.header("idempotent-replayed"), Some("true"));
        assert_eq!(replay.json(), retry.json());
    }
    assert_eq!(app.ledger().await.debits.len(), 8, "one debit per action");
    assert_money_matches(&app, "after every round").await;
}

/// Every reply to a request whose key is stored says when the key expires, as its row does;
/// the key status says the same.
async fn every_reply_about_a_stored_key_carries_its_expiry(store: StoreKind) {
    let app = TestApp::spawn_on(store).await;
    let key = new_key();
    let first = app.pay(5, Some(&key), "elec-1", &payment_body(900)).await;
    let expires = first
        .header("idempotency-expires")
        .expect("the first reply names the expiry")
        .to_owned();
    let at = shared::expiry::parse_http_date(&expires).expect("an HTTP date");
    let row = app.scalar(&expiry_seconds_of_every_key(store)).await;
    assert_eq!(
        at.unix_timestamp(),
        row,
        "the header is the row's expiry, to the second"
    );
    let created = app.scalar(&creation_seconds_of_every_key(store)).await;
    assert!(
        (row - created - 48 * 3600).abs() <= 1,
        "48 h from the claim, by the policy in force then"
    );
    let replay = app.pay(5, Some(&key), "elec-1", &payment_body(900)).await;
    let mismatch = app.pay(5, Some(&key), "elec-1", &payment_body(901)).await;
    mismatch.assert_problem(422, "idempotency-key-reused");
    for (what, reply) in [("replay", &replay), ("mismatch", &mismatch)] {
        assert_eq!(
            reply.header("idempotency-expires"),
            Some(expires.as_str()),
            "{what}"
        );
    }
    let status = app
        .http
        .get(format!("{}/v1/idempotency-keys/{key}", app.url))
        .bearer_auth(TestApp::token(5))
        .send()
        .await
        .expect("replies");
    let status = Received::from(status).await;
    assert_eq!(status.header("idempotency-expires"), Some(expires.as_str()));
    let in_body = time::OffsetDateTime::parse(
        status.json()["expires_at"].as_str().expect("expires_at"),
        &time::format_description::well_known::Rfc3339,
    )
    .expect("RFC 3339");
    assert_eq!(in_body.unix_timestamp(), row);
    // A request refused before its key is looked at names no expiry.
    let no_key = app.pay(5, None, "elec-1", &payment_body(900)).await;
    no_key.assert_problem(400, "idempotency-key-missing");
    assert_eq!(no_key.header("idempotency-expires"), None);
}

/// The one key's expiry in whole Unix seconds, read the same way on either store.
fn expiry_seconds_of_every_key(store: StoreKind) -> String {
    match store {
        StoreKind::Postgres => {
            "SELECT CAST(floor(extract(epoch FROM expires_at)) AS BIGINT) FROM idempotency_keys"
        }
        StoreKind::Sqlite => "SELECT expires_at / 1000000 FROM idempotency_keys",
    }
    .to_owned()
}

fn creation_seconds_of_every_key(store: StoreKind) -> String {
    expiry_seconds_of_every_key(store).replace("expires_at", "created_at")
}

crate::for_each_store!(
    a_claim_voided_between_the_decision_and_the_reclaim_is_never_claimed_again,
    every_reply_about_a_stored_key_carries_its_expiry,
);
