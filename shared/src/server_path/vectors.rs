//! The server path's test vectors (`shared/vectors/server-path.json`), run against
//! [`ServerPath`]: natively, and under wasm32 through wasm-bindgen-test. Each case feeds its
//! events in order and checks every step by its [`Step::label`]; a last check makes sure the
//! vectors reach every step and every ending.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use std::collections::BTreeSet;

use serde::Deserialize;
use time::OffsetDateTime;
use time::macros::datetime;

use super::{Asked, BankSaid, Event, SaveEnd, SeenKey, ServerPath};
use crate::decision::{Attempt, KeyState, StoredRecord};
use crate::fingerprint::{BodyLimits, Fingerprint, fingerprint};
use crate::{IdempotencyKey, Operation, Policy};

const VECTORS: &str = include_str!("../../vectors/server-path.json");
const NOW: OffsetDateTime = datetime!(2026-12-06 12:00 UTC);
const KEPT: time::Duration = time::Duration::hours(48);

#[derive(Deserialize)]
struct Vectors {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    #[serde(default)]
    may_wait: bool,
    path: Vec<(VectorEvent, String)>,
}

/// A stored key as a vector writes it.
#[derive(Deserialize)]
struct VectorKey {
    state: KeyState,
    /// "A": the request's own body; "B": another.
    body: String,
    #[serde(default = "one")]
    claimed_seconds_ago: i64,
    #[serde(default = "a_day")]
    expires_in_seconds: i64,
    #[serde(default)]
    next_check_in_seconds: Option<i64>,
    #[serde(default)]
    settlement_due: bool,
}

fn one() -> i64 {
    1
}

fn a_day() -> i64 {
    86_400
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum VectorEvent {
    Arrived,
    RecalledSameBytes(Option<(VectorKey, String)>),
    Admitted(String),
    Refused,
    Recalled(Option<VectorKey>),
    Forgotten,
    Claimed,
    Found(VectorKey),
    NotFound,
    Vanished,
    BreakerRefused,
    PaymentNotFound,
    ExceedsRemaining,
    Reclaimed,
    NotReclaimed,
    BankSaid(String),
    SaveEnded(String),
    MarkedUnknown(bool),
    Released(bool),
    Asked(String),
    Deleted(bool),
    Rendered,
    Waited(bool),
}

fn body_fingerprint(body: &str) -> Fingerprint {
    let amount = if body == "A" { 100 } else { 200 };
    let json = format!(r#"{{"amount_paise":{amount}}}"#);
    let limits = BodyLimits::default();
    fingerprint(Operation::PayBill, "bill-1", json.as_bytes(), limits)
        .expect("a valid body")
        .fingerprint
}

fn attempt(body: &str) -> Attempt {
    Attempt {
        key: Ok(Some(IdempotencyKey::mint())),
        fingerprint: body_fingerprint(body),
    }
}

fn seen(key: VectorKey) -> SeenKey {
    let seconds = time::Duration::seconds;
    let claimed_at = NOW - seconds(key.claimed_seconds_ago);
    let expires_at = NOW + seconds(key.expires_in_seconds);
    SeenKey {
        record: StoredRecord {
            fingerprint: body_fingerprint(&key.body),
            state: key.state,
            created_at: expires_at - KEPT,
            expires_at,
            claimed_at,
        },
        read_at: NOW,
        next_check_at: key.next_check_in_seconds.map(|s| NOW + seconds(s)),
        settlement_due_at: key.settlement_due.then_some(NOW + time::Duration::days(1)),
    }
}

fn event(event: VectorEvent) -> Event {
    let later = NOW + time::Duration::minutes(2);
    match event {
        VectorEvent::Arrived => Event::Arrived,
        VectorEvent::RecalledSameBytes(remembered) => {
            Event::RecalledSameBytes(remembered.map(|(key, body)| (seen(key), attempt(&body))))
        }
        VectorEvent::Admitted(body) => Event::Admitted(attempt(&body)),
        VectorEvent::Refused => Event::Refused,
        VectorEvent::Recalled(remembered) => Event::Recalled(remembered.map(seen)),
        VectorEvent::Forgotten => Event::Forgotten,
        VectorEvent::Claimed => Event::Claimed {
            expires_at: NOW + KEPT,
        },
        VectorEvent::Found(key) => Event::Found(seen(key)),
        VectorEvent::NotFound => Event::NotFound,
        VectorEvent::Vanished => Event::Vanished,
        VectorEvent::BreakerRefused => Event::BreakerRefused,
        VectorEvent::PaymentNotFound => Event::PaymentNotFound,
        VectorEvent::ExceedsRemaining => Event::ExceedsRemaining {
            remaining_paise: 50,
        },
        VectorEvent::Reclaimed => Event::Reclaimed,
        VectorEvent::NotReclaimed => Event::NotReclaimed,
        VectorEvent::BankSaid(said) => Event::BankSaid(match said.as_str() {
            "final" => BankSaid::Final,
            "not_executed" => BankSaid::NotExecuted,
            "may_be_in_flight" => BankSaid::MayBeInFlight,
            "no_place" => BankSaid::NoPlace,
            other => panic!("no bank word {other}"),
        }),
        VectorEvent::SaveEnded(end) => Event::SaveEnded(match end.as_str() {
            "saved" => SaveEnd::Saved,
            "movement_vanished" => SaveEnd::MovementVanished,
            "failed" => SaveEnd::Failed,
            other => panic!("no save end {other}"),
        }),
        VectorEvent::MarkedUnknown(marked) => Event::MarkedUnknown(marked.then_some(later)),
        VectorEvent::Released(released) => Event::Released(released),
        VectorEvent::Asked(asked) => Event::Asked(match asked.as_str() {
            "finished" => Asked::Finished,
            "released" => Asked::Released,
            "voided" => Asked::Voided,
            "not_yet" => Asked::NotYet {
                next_check_at: later,
            },
            "awaiting_settlement" => Asked::AwaitingSettlement { due_at: later },
            "busy" => Asked::Busy,
            other => panic!("no asked {other}"),
        }),
        VectorEvent::Deleted(deleted) => Event::Deleted(deleted),
        VectorEvent::Rendered => Event::Rendered,
        VectorEvent::Waited(waited) => Event::Waited(waited),
    }
}

/// Every case's steps, as labels, in order.
fn walk(case: Case) -> (String, Vec<(String, String)>) {
    let policy = Policy::default_policy();
    let mut path = ServerPath::new(case.may_wait);
    let steps = case
        .path
        .into_iter()
        .map(|(happened, expected)| (path.next(&policy, event(happened)).label(), expected))
        .collect();
    (case.name, steps)
}

#[test]
fn every_vector_takes_the_steps_it_names() {
    let vectors: Vectors = serde_json::from_str(VECTORS).expect("the vectors parse");
    assert!(vectors.cases.len() >= 30, "the vectors were cut");
    for case in vectors.cases {
        let (name, steps) = walk(case);
        for (index, (took, expected)) in steps.iter().enumerate() {
            assert_eq!(took, expected, "{name}: step {index}");
        }
    }
}

#[test]
fn the_vectors_reach_every_step_and_every_ending() {
    let vectors: Vectors = serde_json::from_str(VECTORS).expect("the vectors parse");
    let reached: BTreeSet<String> = vectors
        .cases
        .into_iter()
        .flat_map(|case| walk(case).1.into_iter().map(|(took, _)| took))
        .collect();
    let every = [
        "recall_same_bytes",
        "admit",
        "recall",
        "forget",
        "replay_from_memory",
        "claim",
        "read",
        "replay_from_database",
        "reclaim",
        "call_bank",
        "save",
        "mark_unknown",
        "release not_executed",
        "release no_place",
        "ask_bank",
        "delete_expired",
        "wait",
        "give_up",
        "reply rendered",
        "reply not_admitted",
        "reply mismatch",
        "reply in_progress",
        "reply outcome_pending",
        "reply outcome_pending known_by",
        "reply awaiting_settlement",
        "reply bank_unavailable",
        "reply nothing_charged not_executed",
        "reply nothing_charged no_place",
        "reply payment_not_found",
        "reply exceeds_remaining",
    ];
    let missing: Vec<_> = every
        .iter()
        .filter(|label| !reached.contains(**label))
        .collect();
    assert!(missing.is_empty(), "no vector reaches {missing:?}");
}

#[test]
fn a_wrong_expectation_fails_the_walk() {
    let wrong = r#"{"name": "x", "path": [["arrived", "admit"]]}"#;
    let (_, steps) = walk(serde_json::from_str(wrong).expect("parses"));
    assert_ne!(steps[0].0, steps[0].1);
}
