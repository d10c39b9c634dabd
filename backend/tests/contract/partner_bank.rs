//! The partner bank as it is outside our simulator (issue 45): down, failing, behind a gateway
//! that replies for it, or replying what a bank would not. Each test counts debits at the
//! bank simulator's ledger (dedupe off where a second call would show), rows in the tables and
//! replies on the wire, on both stores.
//!
//! - An outage with few bank calls allowed (`MAX_BANK_CALLS=2`): later payments are never
//!   refused "at capacity" once the bank is back (a money call's place was once held while its
//!   look-up waited for a second place, for ever).
//! - A gateway's 503 after it forwarded the call: never read as "nothing moved".
//! - A leftover release of a claim whose reply was lost: never releases the key claimed again.
//! - The breaker: claims, bank calls and `unknown` keys during an outage, with and without it.
//! - A redirect, a 10 MB reply, a reply naming another reference: none believed.
//! - A bank that refuses a repeated reference (409) instead of replaying it: the claim lost
//!   with the database, remade under its first reference, is asked about, not believed either way.

use std::time::Duration;

use backend::bank::BreakerSettings;
use backend::config::{BankConfig, Limits};
use backend::reconcile::{Step, try_reconcile_once};
use backend::store::{CLAIM_LEASE, ClaimToken, KeyRef};
use bank_simulator::BankSimulator;
use bank_simulator::Knobs;
use futures_util::future::join_all;
use shared::{IdempotencyKey, UserId};
use test_harness::GatewayMode;

use crate::support::process::{BackendEnv, BackendProcess};
use crate::support::{
    BankGateway, Options, Received, StoreKind, TestApp, new_key, payment_body, send_pay, wait_for,
};

/// Rounds of each reproduction: one lucky round proves nothing.
const ROUNDS: usize = 4;

/// A backend allowed two bank calls at once, with no breaker (so an outage reaches the bank),
/// in front of a bank with dedupe off (a second call under one reference would show).
fn two_bank_calls(store: StoreKind, knobs: Knobs) -> Options {
    Options {
        store,
        knobs: Knobs {
            dedupe: false,
            ..knobs
        },
        limits: Limits {
            max_bank_calls: 2,
            ..Limits::default()
        },
        bank: BankConfig {
            breaker: None,
            ..BankConfig::default()
        },
        behind_gateway: true,
        ..Options::default()
    }
}

/// Runs reconciler steps until no key is due.
async fn reconcile_all(app: &TestApp) {
    for _ in 0..1_000 {
        let step = try_reconcile_once(&app.state).await.expect("a step");
        if step == Step::NothingDue {
            return;
        }
    }
    panic!("keys stayed due after 1,000 steps");
}

/// Pays `body` with `key` until 201, ageing the key past `stuck_after` and reconciling between
/// attempts, as time and the reconciler would, and waiting out a refusal by the breaker;
/// panics after a bounded number of attempts.
async fn pay_until_paid(app: &TestApp, user: u64, key: &str, body: &serde_json::Value) -> Received {
    for _ in 0..20 {
        let reply = app.pay(user, Some(key), "elec-1", body).await;
        if reply.status == 201 {
            return reply;
        }
        assert_eq!(
            reply.status,
            503,
            "{}",
            String::from_utf8_lossy(&reply.bytes)
        );
        if reply.problem_type() == "/problems/bank-unavailable" {
            // The breaker admits a probe after Retry-After; a client waits that long.
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        app.age_keys(Some(key), Duration::from_secs(6 * 60)).await;
        app.make_lookup_due(key).await;
        reconcile_all(app).await;
    }
    let state = app.key_state(user, key).await;
    let last = app.pay(user, Some(key), "elec-1", body).await;
    panic!("key {key} was never paid: {state:?}, {last:?}");
}

/// Each key's payment was debited exactly once, under its own reference.
async fn assert_one_debit_each(app: &TestApp, paid: &[Received]) {
    let ledger = app.ledger().await;
    assert_eq!(
        ledger.debits.len(),
        paid.len(),
        "one debit per key: {ledger:?}"
    );
    for reply in paid {
        let reference = reply.json()["bank_reference"].clone();
        let debited = ledger
            .debits
            .iter()
            .filter(|debit| debit.reference == reference.as_str().expect("a reference"))
            .count();
        assert_eq!(debited, 1, "{reference} debited once");
    }
    let unresolved = app
        .scalar("SELECT count(*) FROM idempotency_keys WHERE state <> 'done'")
        .await;
    assert_eq!(unresolved, 0, "every key resolved");
}

async fn a_bank_failing_every_call_never_stops_later_payments(store: StoreKind) {
    // The bank's own "not executed" (503 naming the reference) is looked up at once: with two
    // places, the look-ups once waited for places their own calls held.
    let app = TestApp::spawn_with(two_bank_calls(store, Knobs::default())).await;
    let mut paid = Vec::new();
    for round in 0..ROUNDS {
        app.bank.simulator.set_knobs(Knobs {
            error_rate: 1.0,
            dedupe: false,
            ..Knobs::default()
        });
        let keys: Vec<String> = (0..6).map(|_| new_key()).collect();
        let body = payment_body(1_000 + round as u64);
        let replies = join_all(
            keys.iter()
                .map(|key| app.pay(11, Some(key), "elec-1", &body)),
        )
        .await;
        for reply in &replies {
            reply.assert_problem(503, "service-unavailable");
        }
        assert!(
            app.ledger().await.debits.len() == paid.len(),
            "round {round}: nothing moved"
        );

        app.bank.simulator.set_knobs(Knobs {
            dedupe: false,
            ..Knobs::default()
        });
        let next = app.pay(11, Some(&new_key()), "elec-1", &body).await;
        assert_eq!(
            next.status, 201,
            "round {round}: the bank is back: {next:?}"
        );
        paid.push(next);
        for key in &keys {
            let retried = app.pay(11, Some(key), "elec-1", &body).await;
            assert_eq!(
                retried.status, 201,
                "round {round}: the released key pays on retry"
            );
            paid.push(retried);
        }
    }
    assert_one_debit_each(&app, &paid).await;
}

async fn a_gateway_down_for_everything_then_back_loses_and_doubles_nothing(store: StoreKind) {
    let app = TestApp::spawn_with(two_bank_calls(store, Knobs::default())).await;
    let mut paid = Vec::new();
    for round in 0..ROUNDS {
        app.gateway().set_mode(GatewayMode::Unavailable);
        let keys: Vec<String> = (0..6).map(|_| new_key()).collect();
        let body = payment_body(2_000 + round as u64);
        let replies = join_all(
            keys.iter()
                .map(|key| app.pay(12, Some(key), "elec-1", &body)),
        )
        .await;
        for reply in &replies {
            // A gateway's 503 may have been forwarded: the outcome is unknown, not "nothing".
            reply.assert_problem(503, "outcome-pending");
        }
        reconcile_all(&app).await;

        app.gateway().set_mode(GatewayMode::PassThrough);
        let next = app.pay(12, Some(&new_key()), "elec-1", &body).await;
        assert_eq!(
            next.status, 201,
            "round {round}: the bank is back: {next:?}"
        );
        paid.push(next);
        for key in &keys {
            paid.push(pay_until_paid(&app, 12, key, &body).await);
        }
    }
    assert_one_debit_each(&app, &paid).await;
}

async fn a_gateway_503_after_forwarding_is_never_read_as_nothing_moved(store: StoreKind) {
    // The bank takes 300 ms; the gateway replies 503 at once, before the debit lands.
    let app = TestApp::spawn_with(two_bank_calls(
        store,
        Knobs {
            latency_ms: 300,
            ..Knobs::default()
        },
    ))
    .await;
    app.gateway()
        .set_mode(GatewayMode::UnavailableAfterForwarding);
    let mut paid = Vec::new();
    for round in 0..ROUNDS {
        let (key, body) = (new_key(), payment_body(3_000 + round as u64));
        let first = app.pay(13, Some(&key), "elec-1", &body).await;
        first.assert_problem(503, "outcome-pending");
        let retry = app.pay(13, Some(&key), "elec-1", &body).await;
        retry.assert_problem(503, "outcome-pending");
        wait_for(
            "the forwarded debit landed",
            Duration::from_secs(10),
            async || app.ledger().await.debits.len() == round + 1,
        )
        .await;
        // Its next status check comes at its time under the rail's rules (scaled to seconds).
        wait_for(
            "a status check to find the debit",
            Duration::from_secs(20),
            async || {
                reconcile_all(&app).await;
                app.key_state(13, &key).await.as_deref() == Some("done")
            },
        )
        .await;
        let replayed = app.pay(13, Some(&key), "elec-1", &body).await;
        assert_eq!(replayed.status, 201, "round {round}: {replayed:?}");
        assert_eq!(replayed.header("idempotent-replayed"), Some("true"));
        paid.push(replayed);
    }
    assert_eq!(app.gateway().calls_forwarded(), ROUNDS, "one call per key");
    assert_one_debit_each(&app, &paid).await;
}

/// A claim of `key` by user 14 whose reply was lost, as the store has it: its token, its
/// payment's id and its bank reference. No call was made for it.
async fn lost_claim(
    app: &TestApp,
    key: &str,
    body: &serde_json::Value,
) -> (ClaimToken, uuid::Uuid, String) {
    let lost = ClaimToken::mint();
    let reference = app.claim_without_paying_as(lost, (14, key), body).await;
    let payment_id = reference
        .strip_prefix("pay-")
        .and_then(|id| id.parse().ok())
        .expect("a payment reference");
    (lost, payment_id, reference)
}

/// The release the claimant of `claim` sends once its link to the database is back.
async fn release_late(app: &TestApp, key: &str, (payment_id, claim): (uuid::Uuid, ClaimToken)) {
    let key_ref = KeyRef::new(
        UserId::numbered(14),
        &IdempotencyKey::try_from(key.to_owned()).expect("valid"),
    );
    let stuck_after = app.state.policy.stuck_after;
    let cause = backend::domain::Cause::background();
    app.state
        .store
        .release_unsent(key_ref, (payment_id, claim), stuck_after, &cause)
        .await
        .expect("the statement runs");
}

async fn a_leftover_release_never_releases_a_key_claimed_again(store: StoreKind) {
    let app = TestApp::spawn_with(Options {
        store,
        knobs: Knobs {
            dedupe: false,
            ..Knobs::default()
        },
        ..Options::default()
    })
    .await;
    let stuck_after = app.state.policy.stuck_after;
    for round in 0..ROUNDS {
        let (key, body) = (new_key(), payment_body(4_000 + round as u64));
        let (lost, payment_id, reference) = lost_claim(&app, &key, &body).await;
        // Past `stuck_after`, another replica's reconciler finds it never seen and releases it.
        app.age_keys(Some(&key), stuck_after + Duration::from_secs(60))
            .await;
        reconcile_all(&app).await;
        assert_eq!(app.key_state(14, &key).await.as_deref(), Some("released"));

        // The retry claims it again and calls the (slow) bank under the same reference…
        app.bank.simulator.set_knobs(Knobs {
            latency_ms: 1_500,
            dedupe: false,
            ..Knobs::default()
        });
        let retry = {
            let (http, app_url) = (app.http.clone(), app.url.clone());
            let (key, body) = (key.clone(), body.clone());
            tokio::spawn(
                async move { send_pay(&http, &app_url, 14, Some(&key), "elec-1", &body).await },
            )
        };
        wait_for("the re-claim", Duration::from_secs(10), async || {
            app.key_state(14, &key).await.as_deref() == Some("started")
        })
        .await;
        // …while the cut-off replica's release of its own claim finally reaches the database.
        release_late(&app, &key, (payment_id, lost)).await;
        assert_eq!(
            app.key_state(14, &key).await.as_deref(),
            Some("started"),
            "round {round}: the release was of another claim"
        );
        let meanwhile = app.pay(14, Some(&key), "elec-1", &body).await;
        meanwhile.assert_problem(409, "request-in-progress");
        let paid = retry.await.expect("the retry ran").expect("a reply");
        assert_eq!(paid.status, 201, "round {round}: {paid:?}");
        app.bank.simulator.set_knobs(Knobs {
            dedupe: false,
            ..Knobs::default()
        });
        let debits = app.ledger().await.debits;
        assert_eq!(
            debits
                .iter()
                .filter(|debit| debit.reference == reference)
                .count(),
            1,
            "round {round}: one call under the reference: {debits:?}"
        );
    }
}

async fn a_claimants_late_release_finds_its_claim_after_a_reconciler_took_the_lease(
    store: StoreKind,
) {
    let app = TestApp::spawn_on(store).await;
    // The claimant is cut off past its claim's lease: a reconciler took the key meanwhile,
    // found it too young to release and let go. The claimant's release, once its link is back,
    // still finds its own claim (the token is not the lease).
    let (key, body) = (new_key(), payment_body(4_998));
    let (own, payment_id, _) = lost_claim(&app, &key, &body).await;
    app.age_keys(Some(&key), CLAIM_LEASE + Duration::from_secs(1))
        .await;
    reconcile_all(&app).await;
    assert_eq!(app.key_state(14, &key).await.as_deref(), Some("started"));
    let taken_over = app
        .scalar(
            "SELECT count(*) FROM idempotency_keys \
             WHERE state = 'started' AND next_lookup_at IS NOT NULL",
        )
        .await;
    assert_eq!(
        taken_over, 1,
        "a reconciler asked the bank and will ask again"
    );
    release_late(&app, &key, (payment_id, own)).await;
    assert_eq!(app.key_state(14, &key).await.as_deref(), Some("released"));
}

async fn a_claim_older_than_stuck_after_is_not_its_claimants_to_release(store: StoreKind) {
    let app = TestApp::spawn_on(store).await;
    // By its row's `claimed_at`, on the database's clock: reconciliation's from then on.
    let (key, body) = (new_key(), payment_body(4_999));
    let (own, payment_id, _) = lost_claim(&app, &key, &body).await;
    let stuck_after = app.state.policy.stuck_after;
    app.age_keys(Some(&key), stuck_after + Duration::from_secs(1))
        .await;
    release_late(&app, &key, (payment_id, own)).await;
    assert_eq!(app.key_state(14, &key).await.as_deref(), Some("started"));
}

/// What one outage did: rows claimed, calls that reached the bank's front door, keys left
/// `unknown`, payments refused before their claim.
#[derive(Debug, PartialEq, Eq)]
struct OutageCounts {
    claims: i64,
    bank_calls: usize,
    unknown_keys: i64,
    refused_before_claim: usize,
}

/// A steady stream of 30 payments (one every 100 ms) while the bank's gateway replies 503 to
/// everything, then the bank back and every payment retried until paid.
async fn outage_under_a_stream(store: StoreKind, breaker: Option<BreakerSettings>) -> OutageCounts {
    let app = TestApp::spawn_with(Options {
        bank: BankConfig {
            breaker,
            ..BankConfig::default()
        },
        ..two_bank_calls(store, Knobs::default())
    })
    .await;
    let (paid_before, paid_body) = (new_key(), payment_body(4_900));
    let first_reply = app.pay(15, Some(&paid_before), "elec-1", &paid_body).await;
    assert_eq!(first_reply.status, 201);
    app.gateway().set_mode(GatewayMode::Unavailable);
    let (mut keys, mut refused) = (Vec::new(), 0);
    for payment in 0..30u64 {
        let (key, body) = (new_key(), payment_body(5_000 + payment));
        let reply = app.pay(15, Some(&key), "elec-1", &body).await;
        if reply.problem_type() == "/problems/bank-unavailable" {
            assert!(reply.header("retry-after").is_some());
            assert_eq!(app.key_state(15, &key).await, None, "nothing claimed");
            refused += 1;
        } else {
            reply.assert_problem(503, "outcome-pending");
        }
        keys.push((key, body));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let counts = OutageCounts {
        claims: app.count("payments").await - 1,
        bank_calls: app.gateway().replied_itself(),
        unknown_keys: app
            .scalar("SELECT count(*) FROM idempotency_keys WHERE state = 'unknown'")
            .await,
        refused_before_claim: refused,
    };
    // Stored keys are replied to as ever, the breaker open or not: the replay, outcome pending
    // (a retry whose status check is due asks the bank through the failing gateway: after the
    // counts, which count the payments' own calls).
    let replayed = app.pay(15, Some(&paid_before), "elec-1", &paid_body).await;
    assert_eq!((replayed.status, replayed.is_replay()), (201, true));
    let (first_key, first_body) = &keys[0];
    let pending = app.pay(15, Some(first_key), "elec-1", first_body).await;
    pending.assert_problem(503, "outcome-pending");

    app.gateway().set_mode(GatewayMode::PassThrough);
    let mut paid = Vec::new();
    for (key, body) in &keys {
        paid.push(pay_until_paid(&app, 15, key, body).await);
    }
    paid.push(first_reply);
    assert_one_debit_each(&app, &paid).await;
    if breaker.is_some() {
        assert!(
            app.metric(r#"payments_bank_breaker_transitions_total{to="open"}"#)
                .await
                >= 1.0
        );
        assert_eq!(
            app.metric("payments_bank_breaker_state").await,
            0.0,
            "closed again"
        );
    }
    counts
}

async fn the_breaker_refuses_new_payments_before_their_claim_while_the_bank_fails(
    store: StoreKind,
) {
    let breaker = BreakerSettings {
        min_calls: 4,
        open_for: Duration::from_secs(2),
        probes_to_close: 1,
        ..BreakerSettings::default()
    };
    let without = outage_under_a_stream(store, None).await;
    let with = outage_under_a_stream(store, Some(breaker)).await;
    println!(
        "a 3-second outage under 30 payments ({store:?}): without the breaker {without:?}; with it {with:?}"
    );
    assert_eq!(without.claims, 30, "without: every payment claimed");
    assert_eq!(without.bank_calls, 30, "without: every payment sent");
    assert_eq!(without.unknown_keys, 30, "without: every key unknown");
    assert_eq!(without.refused_before_claim, 0);
    // Four calls open it; then one probe every two seconds of the stream's three or more.
    assert!(
        with.refused_before_claim >= 15,
        "with: most refused at once: {with:?}"
    );
    assert_eq!(with.claims + with.refused_before_claim as i64, 30);
    assert_eq!(
        with.bank_calls as i64, with.claims,
        "a refused payment sends nothing"
    );
}

async fn replies_a_bank_would_not_give_are_looked_up_not_believed(store: StoreKind) {
    let app = TestApp::spawn_with(two_bank_calls(store, Knobs::default())).await;
    let modes = [
        GatewayMode::RedirectsCalls {
            location: "http://127.0.0.1:9/debits".to_owned(),
        },
        GatewayMode::HugeReplies {
            bytes: 10 * 1024 * 1024,
        },
        GatewayMode::NamesAnotherReference,
    ];
    let mut paid = Vec::new();
    for (round, mode) in modes.into_iter().enumerate() {
        let (key, body) = (new_key(), payment_body(6_000 + round as u64));
        app.gateway().set_mode(mode.clone());
        let first = app.pay(16, Some(&key), "elec-1", &body).await;
        first.assert_problem(503, "outcome-pending");
        assert_eq!(
            app.key_state(16, &key).await.as_deref(),
            Some("unknown"),
            "{mode:?}"
        );
        let statuses = app
            .texts(&format!(
                "SELECT CAST(status AS TEXT) FROM payments WHERE amount_paise = {}",
                6_000 + round
            ))
            .await;
        assert_eq!(statuses, ["pending"], "{mode:?}: nothing saved as final");
        app.gateway().set_mode(GatewayMode::PassThrough);
        paid.push(pay_until_paid(&app, 16, &key, &body).await);
    }
    assert_eq!(
        app.gateway().calls_forwarded(),
        3,
        "the redirect sent nothing; its retry one call; the others one call each"
    );
    assert_one_debit_each(&app, &paid).await;
}

async fn a_bank_refusing_a_repeated_reference_is_asked_and_the_payment_stands_once(
    store: StoreKind,
) {
    let app = TestApp::spawn_with(Options {
        store,
        knobs: Knobs {
            refuse_repeats: true,
            ..Knobs::default()
        },
        ..Options::default()
    })
    .await;
    let mut paid = Vec::new();
    for round in 0..ROUNDS {
        let (key, body) = (new_key(), payment_body(7_000 + round as u64));
        let first = app.pay(17, Some(&key), "elec-1", &body).await;
        assert_eq!(first.status, 201, "{first:?}");
        // The database loses the claim, as a promoted asynchronous copy would (SPEC §7, "Bank
        // references identify one claim"); the retry meets a process that never saw it.
        for table in ["key_events", "idempotency_keys", "payments"] {
            app.execute(&format!("DELETE FROM {table}")).await;
        }
        app.state.replay_cache.forget_all();
        let retry = app.pay(17, Some(&key), "elec-1", &body).await;
        retry.assert_problem(503, "outcome-pending");
        assert_eq!(
            app.key_state(17, &key).await.as_deref(),
            Some("unknown"),
            "the bank's 409 is neither a debit nor a decline"
        );
        let settled = pay_until_paid(&app, 17, &key, &body).await;
        for field in ["payment_id", "bank_reference", "amount_paise", "status"] {
            assert_eq!(settled.json()[field], first.json()[field], "{field}");
        }
        paid.push(settled);
    }
    assert_one_debit_each(&app, &paid).await;
}

/// The backend binary on its embedded store, with `extra` settings, paying once through
/// whatever bank route those settings give it: the reply's status.
async fn pay_once_from_a_process(bank_url: &str, extra: &[(&str, String)]) -> u16 {
    let working_dir = tempfile::tempdir().expect("a temporary directory");
    let backend = BackendProcess::start(&BackendEnv {
        database_url: None,
        working_dir: Some(working_dir.path().to_owned()),
        bank_timeout_ms: 2_000,
        extra: extra
            .iter()
            .map(|(name, value)| ((*name).to_owned(), value.clone()))
            .collect(),
        ..BackendEnv::new("unused", bank_url)
    })
    .await;
    let http = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    let paid = send_pay(
        &http,
        &backend.url,
        17,
        Some(&new_key()),
        "elec-1",
        &payment_body(700),
    )
    .await
    .expect("the backend replies");
    paid.status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_bank_is_reached_through_a_proxy_only_when_bank_proxy_url_names_one() {
    let bank = BankSimulator::spawn(Knobs::default())
        .await
        .expect("bank starts");
    // A proxy that replies 503 to everything: a bank call that went through it would fail.
    let environment_proxy = BankGateway::start(&bank.url).await;
    environment_proxy.set_mode(GatewayMode::Unavailable);
    let proxy_url = environment_proxy.url();
    let from_the_environment = [
        ("HTTP_PROXY", proxy_url.clone()),
        ("HTTPS_PROXY", proxy_url.clone()),
        ("ALL_PROXY", proxy_url.clone()),
        ("http_proxy", proxy_url.clone()),
    ];
    let status = pay_once_from_a_process(&bank.url, &from_the_environment).await;
    assert_eq!(status, 201, "the environment's proxy is not the bank's");
    assert_eq!(
        environment_proxy.replied_itself(),
        0,
        "nothing went through it"
    );

    // The proxy the bank's settings name carries every bank call.
    let named_proxy = BankGateway::start(&bank.url).await;
    let status = pay_once_from_a_process(&bank.url, &[("BANK_PROXY_URL", named_proxy.url())]).await;
    assert_eq!(status, 201);
    assert_eq!(
        named_proxy.calls_forwarded(),
        1,
        "the debit went through the named proxy"
    );
    assert_eq!(bank.simulator.ledger().debits.len(), 2);
}

for_each_store!(
    a_bank_failing_every_call_never_stops_later_payments,
    a_gateway_down_for_everything_then_back_loses_and_doubles_nothing,
    a_gateway_503_after_forwarding_is_never_read_as_nothing_moved,
    a_leftover_release_never_releases_a_key_claimed_again,
    a_claimants_late_release_finds_its_claim_after_a_reconciler_took_the_lease,
    a_claim_older_than_stuck_after_is_not_its_claimants_to_release,
    the_breaker_refuses_new_payments_before_their_claim_while_the_bank_fails,
    replies_a_bank_would_not_give_are_looked_up_not_believed,
    a_bank_refusing_a_repeated_reference_is_asked_and_the_payment_stands_once,
);
