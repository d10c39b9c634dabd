//! `Prefer: wait=N` (SPEC §4, the "concurrent attempt sends `Prefer: wait=N`" row), over HTTP
//! against a real bank simulator, on both stores:
//! - twenty simultaneous attempts with one key against a 2 s bank all get the first attempt's
//!   201, nineteen of them as replays after waiting, none a 409, and the bank debits once; on
//!   PostgreSQL also with the attempts split across two replicas, which hear of the reply only
//!   through `LISTEN/NOTIFY`;
//! - a key's change is announced to the other replicas (`NOTIFY`) only when a request waits on
//!   it: thirty payments nobody retries announce nothing, three whose retry waits announce one
//!   each;
//! - a wait that runs out is the usual 409 with `Retry-After`;
//! - a bank timeout ends every wait with the usual 503 outcome pending;
//! - a waiter whose client hangs up leaves nothing behind (no watch, no waiting place);
//! - past `MAX_WAITING_REQUESTS` a retry gets the 409 at once;
//! - the key status look-up waits too (and replies `started` when its wait runs out), and its
//!   `reply` is the replay's body byte for byte.

use std::time::{Duration, Instant};

use backend::config::Limits;
use backend::store::{ClaimToken, KeyRef};
use futures_util::future::join_all;
use serde_json::Value;
use shared::{IdempotencyKey, UserId};
use sqlx::PgPool;
use sqlx::postgres::PgListener;

use crate::support::{Options, Received, StoreKind, TestApp, new_key, payment_body, wait_for};

const BILL: &str = "elec-42";

/// `POST /v1/bills/{BILL}/pay` with `key` and, when given, `Prefer: {prefer}`, to `base_url`.
async fn pay(
    http: &reqwest::Client,
    base_url: &str,
    key: &str,
    prefer: Option<&str>,
) -> reqwest::Result<Received> {
    let mut request = http
        .post(format!("{base_url}/v1/bills/{BILL}/pay"))
        .bearer_auth(TestApp::token(7))
        .header("Idempotency-Key", key)
        .json(&payment_body(230_000));
    if let Some(prefer) = prefer {
        request = request.header("Prefer", prefer);
    }
    Ok(Received::from(request.send().await?).await)
}

/// Sends the first attempt with `key` (no wait) and returns once its key is claimed, so the
/// attempts sent after find it in flight.
async fn first_attempt_in_flight(
    app: &TestApp,
    key: &str,
) -> tokio::task::JoinHandle<reqwest::Result<Received>> {
    let first = tokio::spawn({
        let (http, url, key) = (app.http.clone(), app.url.clone(), key.to_owned());
        async move { pay(&http, &url, &key, None).await }
    });
    wait_for(
        "the first attempt's claim",
        Duration::from_secs(5),
        async || app.key_state(7, key).await.is_some(),
    )
    .await;
    first
}

/// Asserts twenty replies are one first 201 and nineteen identical replays given after a wait,
/// and one debit for the key at the bank.
async fn assert_one_reply_for_all(what: &str, app: &TestApp, replies: &[Received]) {
    let first: Vec<&Received> = replies.iter().filter(|a| !a.is_replay()).collect();
    assert_eq!(first.len(), 1, "{what}: one attempt did the work");
    let first = first[0];
    assert_eq!(first.status, 201, "{what}: {}", first.json());
    for reply in replies {
        assert_eq!(reply.status, 201, "{what}: no 409, no error");
        assert_eq!(reply.bytes, first.bytes, "{what}: the same body");
        assert_eq!(reply.header("location"), first.header("location"), "{what}");
    }
    let replays: Vec<&Received> = replies.iter().filter(|a| a.is_replay()).collect();
    assert_eq!(replays.len(), 19, "{what}: nineteen replays");
    for replay in replays {
        assert_eq!(
            replay.header("preference-applied"),
            Some("wait=10"),
            "{what}"
        );
    }
    let reference = first.json()["bank_reference"].clone();
    let debits = app.ledger().await.debits;
    let for_key = debits
        .iter()
        .filter(|debit| debit.reference == reference.as_str().unwrap_or_default())
        .count();
    assert_eq!(for_key, 1, "{what}: one debit at the bank");
}

async fn twenty_waiting_attempts_get_the_first_reply_and_one_debit(store: StoreKind) {
    let app = TestApp::spawn_with(Options::slow_bank(store, 2_000)).await;
    const ROUNDS: usize = 3;
    for round in 1..=ROUNDS {
        let key = new_key();
        let started = Instant::now();
        let attempts = (0..20).map(|_| async {
            let reply = pay(&app.http, &app.url, &key, Some("wait=10"))
                .await
                .expect("replies");
            (reply, started.elapsed())
        });
        let timed: Vec<(Received, Duration)> = join_all(attempts).await;
        let first_took = timed.iter().find(|(a, _)| !a.is_replay()).map(|(_, t)| *t);
        let slowest_replay = timed
            .iter()
            .filter(|(a, _)| a.is_replay())
            .map(|(_, t)| *t)
            .max();
        eprintln!(
            "{store:?} round {round}: first attempt {first_took:?}, slowest waited replay {slowest_replay:?}"
        );
        let replies: Vec<Received> = timed.into_iter().map(|(reply, _)| reply).collect();
        assert_one_reply_for_all(&format!("round {round}"), &app, &replies).await;
    }
    assert_eq!(app.ledger().await.debits.len(), ROUNDS);
    assert_eq!(
        app.metric("payments_idempotency_waits_started_total").await,
        57.0
    );
    assert_eq!(
        app.metric("payments_idempotency_waits_replied_total").await,
        57.0
    );
    assert_eq!(
        app.metric("payments_idempotency_waits_timed_out_total")
            .await,
        0.0
    );
    assert_eq!(
        app.metric("payments_idempotency_waiting_requests").await,
        0.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn waiters_on_another_replica_hear_of_the_reply_through_postgres() {
    let options = Options::slow_bank(StoreKind::Postgres, 2_000);
    let app = TestApp::spawn_with(Options::slow_bank(StoreKind::Postgres, 2_000)).await;
    let replica = app.spawn_replica(&options).await;
    let replica_url = replica.url.clone();
    for round in 1..=3 {
        let key = new_key();
        // The first attempt on this replica; the other nineteen split between both.
        let first = pay(&app.http, &app.url, &key, Some("wait=10"));
        let (app, key) = (&app, &key);
        let others = (0..19).map(|n| {
            let url = if n % 2 == 0 { &replica_url } else { &app.url };
            async move {
                tokio::time::sleep(Duration::from_millis(300)).await;
                pay(&app.http, url, key, Some("wait=10")).await
            }
        });
        let (first, others) = tokio::join!(first, join_all(others));
        let mut replies = vec![first.expect("replies")];
        replies.extend(others.into_iter().map(|reply| reply.expect("replies")));
        assert_one_reply_for_all(&format!("round {round}"), app, &replies).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_change_committed_on_one_replica_wakes_the_watchers_on_another() {
    let app = TestApp::spawn().await;
    let other_replica = backend::store::connect(&app.database_url, 2, Duration::from_secs(3))
        .await
        .expect("the second replica connects");
    // Its listener wakes every watcher once it listens (anything before may have been missed):
    // seeing that wake-up proves it is listening, and nothing else wakes a watch but a change.
    let key = new_key();
    let key_ref = KeyRef::new(
        UserId::numbered(7),
        &IdempotencyKey::try_from(key.clone()).expect("valid"),
    );
    let mut before = other_replica.key_changes().watch(key_ref.clone());
    assert!(
        before.changed_within(Duration::from_secs(10)).await,
        "the listener started"
    );
    let mut watch = other_replica.key_changes().watch(key_ref.clone());
    let claim = ClaimToken::mint();
    let reference = app
        .claim_without_paying_as(claim, (7, &key), &payment_body(230_000))
        .await;
    // A request on the second replica waits on the key: only a key marked so is announced.
    other_replica
        .mark_awaited(key_ref.clone())
        .await
        .expect("the key is marked");
    let payment_id = reference.strip_prefix("pay-").expect("a payment reference");
    app.state
        .store
        .release_unsent(
            key_ref,
            (payment_id.parse().expect("uuid"), claim),
            Duration::from_secs(60),
            &backend::domain::Cause::background(),
        )
        .await
        .expect("released");
    assert!(
        watch.changed_within(Duration::from_secs(10)).await,
        "the NOTIFY of the first replica's write reached the second"
    );
    assert_eq!(other_replica.key_changes().watching(), 0);
}

/// The channel the backend announces key changes on, and its payload for user 7's `key`
/// (docs/design.md, "Waiting for the first attempt").
const KEY_CHANGES: &str = "idempotency_key_changed";

/// The announcements on [`KEY_CHANGES`] that `listener` receives before a sentinel sent now:
/// PostgreSQL delivers notifications in commit order, so these are every announcement of the
/// writes committed before, with no timed wait for ones that might still come.
async fn announcements_so_far(pool: &PgPool, listener: &mut PgListener) -> Vec<String> {
    let sentinel = format!("sentinel {}", new_key());
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(KEY_CHANGES)
        .bind(&sentinel)
        .execute(pool)
        .await
        .expect("the sentinel is sent");
    let mut announced = Vec::new();
    loop {
        let notification = tokio::time::timeout(Duration::from_secs(30), listener.recv())
            .await
            .expect("the sentinel arrives")
            .expect("still listening");
        if notification.payload() == sentinel {
            return announced;
        }
        announced.push(notification.payload().to_owned());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn only_a_key_a_request_waits_on_is_announced_to_the_other_replicas() {
    let app = TestApp::spawn_with(Options::slow_bank(StoreKind::Postgres, 1_500)).await;
    let mut listener = PgListener::connect(&app.database_url)
        .await
        .expect("connects");
    listener.listen(KEY_CHANGES).await.expect("listens");
    let sentinels = PgPool::connect(&app.database_url).await.expect("connects");
    for round in 1..=3 {
        // Ten payments with `Prefer: wait` that nobody retries: nothing is announced.
        let alone = join_all((0..10).map(|_| async {
            let key = new_key();
            pay(&app.http, &app.url, &key, Some("wait=10")).await
        }))
        .await;
        for reply in alone {
            assert_eq!(reply.expect("replies").status, 201, "round {round}");
        }
        let announced = announcements_so_far(&sentinels, &mut listener).await;
        assert_eq!(
            announced,
            Vec::<String>::new(),
            "round {round}: no waiter, no NOTIFY"
        );

        // A payment whose retry waits on it: its reply is announced, once.
        let key = new_key();
        let first = first_attempt_in_flight(&app, &key).await;
        let waited = pay(&app.http, &app.url, &key, Some("wait=10"))
            .await
            .expect("replies");
        let first = first.await.expect("joins").expect("replies");
        assert_eq!((first.status, waited.status), (201, 201), "round {round}");
        assert!(
            waited.is_replay(),
            "round {round}: the retry waited for the reply"
        );
        let announced = announcements_so_far(&sentinels, &mut listener).await;
        assert_eq!(announced, vec![format!("7 {key}")], "round {round}");
    }
    assert_eq!(app.ledger().await.debits.len(), 33, "one debit per payment");
}

async fn a_wait_that_runs_out_gets_409_with_retry_after(store: StoreKind) {
    let app = TestApp::spawn_with(Options::slow_bank(store, 3_000)).await;
    let key = new_key();
    let first = first_attempt_in_flight(&app, &key).await;
    let waited = pay(&app.http, &app.url, &key, Some("wait=1"))
        .await
        .expect("replies");
    waited.assert_problem(409, "request-in-progress");
    assert_eq!(waited.header("retry-after"), Some("1"));
    assert_eq!(waited.header("preference-applied"), Some("wait=1"));
    // Without the header: 409 at once, no Preference-Applied, as before.
    let plain = pay(&app.http, &app.url, &key, None).await.expect("replies");
    plain.assert_problem(409, "request-in-progress");
    assert_eq!(plain.header("preference-applied"), None);
    // A wait over the policy's cap is cut to it; a wait of 0 does not wait.
    let zero = pay(&app.http, &app.url, &key, Some("wait=0"))
        .await
        .expect("replies");
    zero.assert_problem(409, "request-in-progress");
    assert_eq!(zero.header("preference-applied"), None);

    let first = first.await.expect("task").expect("replies");
    assert_eq!(first.status, 201);
    assert_eq!(
        app.metric("payments_idempotency_waits_timed_out_total")
            .await,
        1.0
    );
    assert_eq!(app.ledger().await.debits.len(), 1);
}

async fn a_bank_timeout_ends_every_wait_with_503_outcome_pending(store: StoreKind) {
    let app = TestApp::spawn_with(Options {
        bank_timeout: Duration::from_millis(1_000),
        ..Options::slow_bank(store, 3_000)
    })
    .await;
    let key = new_key();
    let attempts = (0..6).map(|n| {
        let key = &key;
        let app = &app;
        async move {
            tokio::time::sleep(Duration::from_millis(if n == 0 { 0 } else { 200 })).await;
            pay(&app.http, &app.url, key, Some("wait=10"))
                .await
                .expect("replies")
        }
    });
    let replies = join_all(attempts).await;
    for reply in &replies {
        reply.assert_problem(503, "outcome-pending");
        assert_eq!(reply.header("retry-after"), Some("5"));
    }
    let waited = replies
        .iter()
        .filter(|reply| reply.header("preference-applied") == Some("wait=10"))
        .count();
    assert_eq!(waited, 5, "every waiter got the outcome as it stood");
    assert_eq!(app.key_state(7, &key).await.as_deref(), Some("unknown"));
}

async fn a_waiter_that_hangs_up_leaves_nothing_behind(store: StoreKind) {
    let app = TestApp::spawn_with(Options::slow_bank(store, 2_000)).await;
    let key = new_key();
    let first = first_attempt_in_flight(&app, &key).await;
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .expect("client");
    let gave_up = join_all((0..10).map(|_| pay(&impatient, &app.url, &key, Some("wait=10")))).await;
    assert!(gave_up.iter().all(Result::is_err), "every waiter hung up");
    wait_for(
        "the waiters to be gone",
        Duration::from_secs(5),
        async || {
            app.metric("payments_idempotency_waiting_requests").await == 0.0
                && app.state.store.key_changes().watching() == 0
        },
    )
    .await;
    assert_eq!(
        app.metric("payments_idempotency_waits_started_total").await,
        10.0
    );
    let first = first.await.expect("task").expect("replies");
    assert_eq!(first.status, 201, "the first attempt was not disturbed");
    assert_eq!(app.ledger().await.debits.len(), 1);
}

/// `GET /v1/idempotency-keys/{key}` as user 7 with `Prefer: {prefer}`.
async fn key_status(app: &TestApp, key: &str, prefer: &str) -> Received {
    let response = app
        .http
        .get(format!("{}/v1/idempotency-keys/{key}", app.url))
        .bearer_auth(TestApp::token(7))
        .header("Prefer", prefer)
        .send()
        .await
        .expect("replies");
    Received::from(response).await
}

async fn past_max_waiting_requests_a_retry_gets_409_at_once(store: StoreKind) {
    let app = TestApp::spawn_with(Options {
        limits: Limits {
            max_waiting_requests: 2,
            ..Limits::default()
        },
        ..Options::slow_bank(store, 2_000)
    })
    .await;
    let key = new_key();
    let first = first_attempt_in_flight(&app, &key).await;
    let retries = join_all((0..5).map(|_| pay(&app.http, &app.url, &key, Some("wait=10")))).await;
    let retries: Vec<Received> = retries.into_iter().map(|a| a.expect("replies")).collect();
    let waited = retries.iter().filter(|a| a.status == 201).count();
    let refused: Vec<&Received> = retries.iter().filter(|a| a.status == 409).collect();
    assert_eq!((waited, refused.len()), (2, 3), "two places to wait in");
    for reply in refused {
        reply.assert_problem(409, "request-in-progress");
        assert_eq!(reply.header("preference-applied"), None, "it did not wait");
    }
    assert_eq!(
        app.metric("payments_idempotency_waits_refused_total").await,
        3.0
    );
    assert_eq!(first.await.expect("task").expect("replies").status, 201);
    assert_eq!(app.ledger().await.debits.len(), 1);
}

async fn key_status_waits_and_replies_with_the_replay_body_byte_for_byte(store: StoreKind) {
    let app = TestApp::spawn_with(Options::slow_bank(store, 1_500)).await;
    let key = new_key();
    let first = first_attempt_in_flight(&app, &key).await;
    // A wait shorter than the bank: it runs out, and the key is still `started`.
    let ran_out = key_status(&app, &key, "wait=1").await;
    assert_eq!(ran_out.status, 200);
    assert_eq!(ran_out.json()["state"], "started");
    assert_eq!(ran_out.header("retry-after"), Some("1"));
    assert_eq!(ran_out.header("preference-applied"), Some("wait=1"));
    let status = key_status(&app, &key, "wait=10").await;
    assert_eq!(status.status, 200);
    assert_eq!(status.header("preference-applied"), Some("wait=10"));
    let body: Value = status.json();
    assert_eq!(body["state"], "done", "{body}");
    let first = first.await.expect("task").expect("replies");
    let text = String::from_utf8(status.bytes.clone()).expect("UTF-8");
    let replay_body = String::from_utf8(first.bytes.clone()).expect("UTF-8");
    assert!(
        text.contains(&format!("\"reply\":{replay_body},")),
        "the reply is the replay's bytes: {text} vs {replay_body}"
    );
    let expires_at = time::OffsetDateTime::parse(
        body["expires_at"].as_str().expect("expires_at"),
        &time::format_description::well_known::Rfc3339,
    )
    .expect("RFC 3339");
    let in_48_hours = time::OffsetDateTime::now_utc() + time::Duration::hours(48);
    assert!(
        (in_48_hours - expires_at).abs() < time::Duration::minutes(1),
        "expires 48 h after the claim: {expires_at}"
    );
}

for_each_store!(
    twenty_waiting_attempts_get_the_first_reply_and_one_debit,
    a_wait_that_runs_out_gets_409_with_retry_after,
    a_bank_timeout_ends_every_wait_with_503_outcome_pending,
    a_waiter_that_hangs_up_leaves_nothing_behind,
    key_status_waits_and_replies_with_the_replay_body_byte_for_byte,
    past_max_waiting_requests_a_retry_gets_409_at_once,
);
