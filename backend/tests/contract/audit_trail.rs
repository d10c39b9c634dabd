//! The audit trail (SPEC §8) over HTTP against a real backend, bank simulator and database,
//! on both stores: each SPEC §4 row leaves its events in order, stamped with the request that
//! caused them; an event and its state change commit together or not at all (a database
//! trigger that refuses the event also undoes the change, and the bank is never called for a
//! claim that did not commit); and the trail outlives its key for the configured period only,
//! except that PostgreSQL keeps a payment's routine events (`claimed`, `bank_answered`) on the
//! payment's row, as long as the payment. Reads go through the view `key_trail`, which is
//! `key_events` and those routine events together.

use std::time::Duration;

use backend::janitor::{self, EXPIRY_BATCH_SIZE};
use backend::reconcile::{Step, try_reconcile_once};
use bank_simulator::Knobs;
use serde_json::json;

use crate::spec_rows::simulate_crash_after_claim;
use crate::support::{Options, StoreKind, TestApp, new_key, payment_body, send_pay, wait_for};

/// `POST /v1/bills/elec-1/pay` as `user` with `key` and `X-Request-Id: request_id`.
async fn pay_as(app: &TestApp, user: u64, key: &str, request_id: &str) -> reqwest::Response {
    app.http
        .post(format!("{}/v1/bills/elec-1/pay", app.url))
        .bearer_auth(TestApp::token(user))
        .header("Idempotency-Key", key)
        .header("X-Request-Id", request_id)
        .json(&payment_body(230_000))
        .send()
        .await
        .expect("the backend replies")
}

async fn a_payment_and_its_replay_are_claimed_replied_replayed_each_by_its_request(
    store: StoreKind,
) {
    let app = TestApp::spawn_on(store).await;
    let key = new_key();
    let first = pay_as(&app, 7, &key, "phone-attempt-1").await;
    assert_eq!(first.status(), 201);
    assert_eq!(
        first.headers()["x-request-id"],
        "phone-attempt-1",
        "the id is echoed"
    );
    let retry = pay_as(&app, 7, &key, "phone-attempt-2").await;
    assert_eq!(retry.status(), 201);

    let trail = app.trail_of_length(7, 3).await;
    assert_eq!(trail, ["claimed", "bank_answered", "replayed"]);
    assert_eq!(
        app.request_ids(7).await,
        ["phone-attempt-1", "phone-attempt-1", "phone-attempt-2"]
    );
    assert_eq!(
        app.texts("SELECT detail FROM key_trail WHERE event = 'bank_answered'")
            .await,
        ["succeeded"]
    );
    assert_eq!(
        app.scalar(
            "SELECT count(*) FROM key_trail e JOIN idempotency_keys k \
                    ON k.user_id = e.user_id AND k.resource_id = e.resource_id \
                    AND (e.key IS NULL OR e.key = k.key)"
        )
        .await,
        3,
        "every event names its claim, and the key where it names one"
    );
}

async fn a_missing_or_unprintable_request_id_is_replaced_by_a_fresh_one(store: StoreKind) {
    let app = TestApp::spawn_on(store).await;
    let reply = app
        .http
        .post(format!("{}/v1/bills/elec-1/pay", app.url))
        .bearer_auth(TestApp::token(3))
        .header("Idempotency-Key", new_key())
        .header("X-Request-Id", "x".repeat(65))
        .json(&payment_body(100))
        .send()
        .await
        .expect("replies");
    assert_eq!(reply.status(), 201);
    let minted = reply.headers()["x-request-id"]
        .to_str()
        .expect("visible ASCII")
        .to_owned();
    assert!(uuid::Uuid::parse_str(&minted).is_ok(), "{minted}");
    assert_eq!(app.request_ids(3).await, [minted.clone(), minted]);
}

async fn a_mismatch_and_a_decline_are_recorded_with_what_happened(store: StoreKind) {
    let app = TestApp::spawn_on(store).await;
    let key = new_key();
    let declined = json!({ "amount_paise": 10_000, "payer_vpa": "declined.asha@okbank" });
    assert_eq!(app.pay(4, Some(&key), "gas-1", &declined).await.status, 402);
    let changed = json!({ "amount_paise": 10_001, "payer_vpa": "declined.asha@okbank" });
    assert_eq!(app.pay(4, Some(&key), "gas-1", &changed).await.status, 422);

    let trail = app.trail_of_length(4, 3).await;
    assert_eq!(trail, ["claimed", "bank_answered", "mismatch_refused"]);
    assert_eq!(
        app.texts("SELECT detail FROM key_trail WHERE event = 'bank_answered'")
            .await,
        ["declined: insufficient_funds"]
    );
}

async fn a_duplicate_in_flight_is_refused_and_a_waiting_one_is_recorded_as_waited(
    store: StoreKind,
) {
    let app = TestApp::spawn_with(Options::slow_bank(store, 800)).await;
    let key = new_key();
    let first = tokio::spawn({
        let (http, url, key) = (app.http.clone(), app.url.clone(), key.clone());
        async move { send_pay(&http, &url, 7, Some(&key), "elec-1", &payment_body(230_000)).await }
    });
    for _ in 0..100 {
        if app.key_state(7, &key).await.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let refused = app
        .pay(7, Some(&key), "elec-1", &payment_body(230_000))
        .await;
    refused.assert_problem(409, "request-in-progress");
    let waited = app
        .http
        .post(format!("{}/v1/bills/elec-1/pay", app.url))
        .bearer_auth(TestApp::token(7))
        .header("Idempotency-Key", &key)
        .header("Prefer", "wait=5")
        .json(&payment_body(230_000))
        .send()
        .await
        .expect("replies");
    assert_eq!(waited.status(), 201);
    assert_eq!(first.await.expect("joins").expect("replies").status, 201);

    let trail = app.trail_of_length(7, 5).await;
    assert_eq!(
        trail,
        [
            "claimed",
            "in_progress_refused",
            "waited",
            "bank_answered",
            "replayed"
        ]
    );
    assert_eq!(app.ledger().await.debits.len(), 1);
}

async fn a_lost_bank_reply_is_unknown_then_resolved_by_the_reconciler(store: StoreKind) {
    let app = TestApp::spawn_with(Options::replies_lost_past_the_timeout(store)).await;
    let key = new_key();
    let first = app
        .pay(9, Some(&key), "elec-1", &payment_body(230_000))
        .await;
    first.assert_problem(503, "outcome-pending");
    assert_eq!(
        try_reconcile_once(&app.state).await.expect("step"),
        Step::Handled
    );
    assert_eq!(
        app.trail(9).await,
        ["claimed", "bank_answer_unknown", "resolved"]
    );
    let ids = app.request_ids(9).await;
    assert_eq!(
        ids[0], ids[1],
        "the unknown reply belongs to the claiming request"
    );
    assert_eq!(ids[2], "-", "the reconciler's own work has no request");
    assert_eq!(app.ledger().await.debits.len(), 1);
}

async fn a_release_and_the_retry_that_claims_again_are_recorded(store: StoreKind) {
    let app = TestApp::spawn_with(Options::bank_errors_before_debiting(store)).await;
    let key = new_key();
    let body = payment_body(100);
    app.pay(2, Some(&key), "elec-1", &body)
        .await
        .assert_problem(503, "service-unavailable");
    app.bank.simulator.set_knobs(Knobs::default());
    assert_eq!(app.pay(2, Some(&key), "elec-1", &body).await.status, 201);

    let trail = app.trail(2).await;
    assert_eq!(
        trail,
        ["claimed", "released", "claimed_again", "bank_answered"]
    );
    // The reply names the retry that recorded it, not the request that first claimed: on
    // PostgreSQL too, where a claimant's own reply would be kept on the payment's row, this one
    // is a `key_events` row of its own.
    let ids = app.request_ids(2).await;
    assert_ne!(ids[0], ids[3], "the first request did not record the reply");
    assert_eq!(ids[2], ids[3], "the retry that claimed again recorded it");
    assert_eq!(
        app.scalar(
            "SELECT count(*) FROM key_events WHERE user_id = '2' AND event = 'bank_answered'"
        )
        .await,
        1
    );
}

async fn an_expired_key_leaves_its_last_event_and_its_trail_goes_only_after_the_keeping_period(
    store: StoreKind,
) {
    let app = TestApp::spawn_on(store).await;
    let key = new_key();
    assert_eq!(
        app.pay(5, Some(&key), "elec-1", &payment_body(100))
            .await
            .status,
        201
    );
    app.age_keys(None, Duration::from_secs(49 * 3600)).await;
    assert_eq!(
        janitor::expire_all(&app.state, EXPIRY_BATCH_SIZE)
            .await
            .expect("sweep"),
        1
    );
    assert_eq!(app.count("idempotency_keys").await, 0);
    assert_eq!(app.trail(5).await, ["claimed", "bank_answered", "expired"]);

    // Past the key's retention and the trail's keeping period, the trail goes too, while the
    // trail of a key that still lives stays whatever its age.
    let living = new_key();
    assert_eq!(
        app.pay(6, Some(&living), "elec-1", &payment_body(100))
            .await
            .status,
        201
    );
    let keep = app.state.policy.keep_keys_for + app.state.trail_kept_after_key;
    let seconds = keep.as_secs() + 60;
    let older = match store {
        StoreKind::Postgres => {
            format!("UPDATE key_events SET at = at - make_interval(secs => {seconds})")
        }
        StoreKind::Sqlite => format!("UPDATE key_events SET at = at - {seconds}000000"),
    };
    app.execute(&older).await;
    janitor::expire_all(&app.state, EXPIRY_BATCH_SIZE)
        .await
        .expect("sweep");
    let kept_with_the_payment: &[&str] = match store {
        StoreKind::Postgres => &["claimed", "bank_answered"],
        StoreKind::Sqlite => &[],
    };
    assert_eq!(
        app.trail(5).await,
        kept_with_the_payment,
        "the expired key's trail in key_events is gone"
    );
    assert_eq!(app.trail(6).await, ["claimed", "bank_answered"]);
}

async fn a_refund_tells_its_own_story_beside_its_payments(store: StoreKind) {
    let app = TestApp::spawn_on(store).await;
    let paid = app
        .pay(6, Some(&new_key()), "elec-1", &payment_body(10_000))
        .await;
    let payment_id = paid.json()["payment_id"].as_str().expect("id").to_owned();
    let refunded = app.refund(6, &new_key(), &payment_id, 4_000).await;
    assert_eq!(refunded.status, 201);
    assert_eq!(
        app.trail(6).await,
        ["claimed", "bank_answered", "claimed", "bank_answered"]
    );
    let refund_id = refunded.json()["refund_id"]
        .as_str()
        .expect("id")
        .to_owned();
    assert_eq!(
        app.scalar(
            "SELECT count(*) FROM key_trail e JOIN refunds r \
                    ON r.user_id = e.user_id AND r.refund_id = e.resource_id"
        )
        .await,
        2,
        "the refund's two events name the refund {refund_id}"
    );
}

async fn a_crashed_claim_is_settled_inline_by_the_retry_and_recorded_as_resolved(store: StoreKind) {
    let app = TestApp::spawn_on(store).await;
    let body = payment_body(230_000);
    let (debited, never_sent) = (new_key(), new_key());
    simulate_crash_after_claim(&app, 5, &debited, &body, true).await;
    simulate_crash_after_claim(&app, 6, &never_sent, &body, false).await;

    let reply = app.pay(5, Some(&debited), "elec-1", &body).await;
    assert_eq!((reply.status, reply.is_replay()), (201, true));
    assert_eq!(app.trail(5).await, ["claimed", "resolved"]);
    let reply = app.pay(6, Some(&never_sent), "elec-1", &body).await;
    assert_eq!((reply.status, reply.is_replay()), (201, false));
    assert_eq!(
        app.trail(6).await,
        ["claimed", "released", "claimed_again", "bank_answered"]
    );
    assert_eq!(app.ledger().await.debits.len(), 2, "one debit each");
}

async fn a_key_reused_after_expiry_starts_a_second_story_under_the_same_key(store: StoreKind) {
    let app = TestApp::spawn_on(store).await;
    let key = new_key();
    assert_eq!(
        app.pay(7, Some(&key), "phone-nov", &payment_body(100))
            .await
            .status,
        201
    );
    app.age_keys(Some(&key), Duration::from_secs(49 * 3600))
        .await;
    let reused = app
        .pay(7, Some(&key), "big-bill", &payment_body(99_900))
        .await;
    assert_eq!((reused.status, reused.is_replay()), (201, false));
    assert_eq!(
        app.trail(7).await,
        [
            "claimed",
            "bank_answered",
            "expired",
            "claimed",
            "bank_answered"
        ]
    );
    assert_eq!(
        app.scalar("SELECT count(DISTINCT resource_id) FROM key_trail WHERE user_id = '7'")
            .await,
        2,
        "two claims, told apart by their payments"
    );
}

/// A trigger that makes the database refuse events named `event`, as a crash or a full disk
/// between the state change and its event would: the event's transaction must fail whole. On
/// PostgreSQL the routine events are written to the movement's row, so the row's write that
/// carries one (a payment's insert with its claim's event id, a movement's update with its
/// reply's) is refused too.
async fn refuse_events_named(app: &TestApp, store: StoreKind, event: &str) {
    let sql = match store {
        StoreKind::Postgres => {
            let on_the_row = match event {
                "claimed" => {
                    "CREATE TRIGGER refuse_routine BEFORE INSERT ON payments FOR EACH ROW \
                     WHEN (NEW.claim_event_id IS NOT NULL) EXECUTE FUNCTION refuse_event();"
                }
                "bank_answered" => {
                    "CREATE TRIGGER refuse_routine BEFORE UPDATE ON payments \
                     FOR EACH ROW WHEN (NEW.answer_event_id IS NOT NULL) \
                     EXECUTE FUNCTION refuse_event();"
                }
                _ => "",
            };
            format!(
                "CREATE FUNCTION refuse_event() RETURNS trigger LANGUAGE plpgsql AS $$ \
                 BEGIN RAISE EXCEPTION 'the trail refuses {event}'; END $$; \
                 CREATE TRIGGER refuse_event BEFORE INSERT ON key_events FOR EACH ROW \
                 WHEN (NEW.event = '{event}') EXECUTE FUNCTION refuse_event(); {on_the_row}"
            )
        }
        StoreKind::Sqlite => format!(
            "CREATE TRIGGER refuse_event BEFORE INSERT ON key_events \
             WHEN NEW.event = '{event}' BEGIN SELECT RAISE(ABORT, 'the trail refuses'); END;"
        ),
    };
    app.execute(&sql).await;
}

async fn a_claim_whose_event_cannot_be_written_is_not_made_and_the_bank_is_not_called(
    store: StoreKind,
) {
    let app = TestApp::spawn_on(store).await;
    refuse_events_named(&app, store, "claimed").await;
    let reply = app
        .pay(8, Some(&new_key()), "elec-1", &payment_body(100))
        .await;
    assert!(reply.status >= 500, "the claim failed: {}", reply.status);
    app.assert_nothing_written("a claim without its event")
        .await;
    assert!(app.trail(8).await.is_empty());
}

async fn an_outcome_whose_event_cannot_be_written_leaves_the_key_unfinished(store: StoreKind) {
    let app = TestApp::spawn_on(store).await;
    refuse_events_named(&app, store, "bank_answered").await;
    let key = new_key();
    let reply = app.pay(8, Some(&key), "elec-1", &payment_body(100)).await;
    assert!(reply.status >= 500, "the save failed: {}", reply.status);
    assert_ne!(
        app.key_state(8, &key).await.as_deref(),
        Some("done"),
        "no done key without its event"
    );
    assert_eq!(
        app.texts("SELECT CAST(status AS TEXT) FROM payments").await,
        ["pending"],
        "nor a saved outcome"
    );
    assert!(!app.trail(8).await.contains(&"bank_answered".to_owned()));
    assert_eq!(
        app.ledger().await.debits.len(),
        1,
        "the bank did debit once"
    );
}

/// A payment written before PostgreSQL kept its routine events on its row
/// (`migrations/20261207000001_routine_trail_on_movements.sql`) has them as `key_events` rows
/// and its row's event columns empty: the trail shows each of its events once, in the order
/// written, beside a payment written now.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_postgres_a_payment_from_before_the_trail_moved_shows_each_event_once() {
    let app = TestApp::spawn_on(StoreKind::Postgres).await;
    let (older, newer) = (new_key(), new_key());
    let body = payment_body(100);
    assert_eq!(app.pay(12, Some(&older), "elec-1", &body).await.status, 201);
    // The older payment as the backend wrote it before: its two events in `key_events`, under
    // the same ids, and nothing on its row.
    app.execute(
        "INSERT INTO key_events (event_id, user_id, key, resource_id, at, event, detail, \
                                 request_id, trace_id) OVERRIDING SYSTEM VALUE \
         SELECT event_id, e.user_id, k.key, e.resource_id, e.at, e.event, e.detail, \
                e.request_id, e.trace_id \
         FROM key_trail e JOIN idempotency_keys k \
           ON k.user_id = e.user_id AND k.resource_id = e.resource_id \
         WHERE e.user_id = '12'; \
         UPDATE payments SET claim_event_id = NULL, answer_event_id = NULL, \
                             claim_request_id = NULL, claim_trace_id = NULL \
         WHERE user_id = '12';",
    )
    .await;
    assert_eq!(app.scalar("SELECT count(*) FROM key_events").await, 2);
    assert_eq!(app.pay(12, Some(&newer), "gas-1", &body).await.status, 201);
    assert!(app.pay(12, Some(&older), "elec-1", &body).await.is_replay());

    assert_eq!(
        app.trail_of_length(12, 5).await,
        [
            "claimed",
            "bank_answered",
            "claimed",
            "bank_answered",
            "replayed"
        ]
    );
    assert_eq!(
        app.scalar("SELECT count(DISTINCT event_id) FROM key_trail WHERE user_id = '12'")
            .await,
        5,
        "no event twice, none without its id"
    );
}

/// The bank's reply is recorded when the payment moves, whether or not its key moves with it.
/// Here the key is deleted while the bank call is in flight (as a purge by hand would), so the
/// outcome finds the payment pending but no key to finish: the payment moves alone, and the
/// trail still says the bank replied, naming the claiming request.
async fn a_reply_is_recorded_when_the_payment_moves_though_its_key_is_gone(store: StoreKind) {
    let app = TestApp::spawn_with(Options::slow_bank(store, 1_500)).await;
    let key = new_key();
    let delete_the_key_once_claimed = async {
        wait_for("the claim", Duration::from_secs(10), async || {
            app.scalar("SELECT count(*) FROM payments WHERE user_id = '4'")
                .await
                == 1
        })
        .await;
        app.execute("DELETE FROM idempotency_keys WHERE user_id = '4'")
            .await;
    };
    let (paid, ()) = tokio::join!(
        pay_as(&app, 4, &key, "phone-attempt-1"),
        delete_the_key_once_claimed
    );
    assert!(
        paid.status().is_success(),
        "the client hears the bank's reply: {}",
        paid.status()
    );
    assert_eq!(app.ledger().await.debits.len(), 1);
    assert_eq!(
        app.texts("SELECT CAST(status AS TEXT) FROM payments WHERE user_id = '4'")
            .await,
        ["succeeded"]
    );
    assert_eq!(app.count("idempotency_keys").await, 0);
    // The key's deletion leaves its last event, as its expiry would.
    assert_eq!(app.trail(4).await, ["claimed", "expired", "bank_answered"]);
    let ids = app.request_ids(4).await;
    assert_eq!(
        [ids[0].as_str(), ids[2].as_str()],
        ["phone-attempt-1", "phone-attempt-1"],
        "the claiming request recorded the reply"
    );
}

for_each_store!(
    a_payment_and_its_replay_are_claimed_replied_replayed_each_by_its_request,
    a_missing_or_unprintable_request_id_is_replaced_by_a_fresh_one,
    a_mismatch_and_a_decline_are_recorded_with_what_happened,
    a_duplicate_in_flight_is_refused_and_a_waiting_one_is_recorded_as_waited,
    a_lost_bank_reply_is_unknown_then_resolved_by_the_reconciler,
    a_release_and_the_retry_that_claims_again_are_recorded,
    a_refund_tells_its_own_story_beside_its_payments,
    a_crashed_claim_is_settled_inline_by_the_retry_and_recorded_as_resolved,
    a_key_reused_after_expiry_starts_a_second_story_under_the_same_key,
    an_expired_key_leaves_its_last_event_and_its_trail_goes_only_after_the_keeping_period,
    a_claim_whose_event_cannot_be_written_is_not_made_and_the_bank_is_not_called,
    an_outcome_whose_event_cannot_be_written_leaves_the_key_unfinished,
    a_reply_is_recorded_when_the_payment_moves_though_its_key_is_gone,
);
