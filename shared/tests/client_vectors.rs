//! The client rules as test vectors: `shared/vectors/client-rules.json`, generated here from
//! [`ActionProgress`] and checked in, so that every client (the Rust `payments-client`, the
//! TypeScript package in `clients/typescript/`) runs the same cases and cannot drift from them.
//!
//! Each case gives the rules, the time since the action's first send when the run starts, the
//! client's first move, then for every request: what came back (a status, a `Retry-After` as
//! sent, a look-up's body; or nothing), the clock, the random unit for the jitter, and the move
//! the rules make next (send after how long, with which headers; look the key up; stop, and
//! whether the action stays saved). This test fails when the file differs from what the rules
//! produce now; `UPDATE_VECTORS=1 cargo test -p shared --test client_vectors` rewrites it, and
//! the difference is then a change of behaviour every client must follow.

use std::time::Duration;

use serde_json::{Value, json};
use shared::retry::{
    ActionProgress, ClientRules, Ending, KeyState, Next, RetrySchedule, Seen, Unsettled,
    parse_retry_after,
};

const VECTORS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/vectors/client-rules.json");
const SECOND: u64 = 1000;
const MINUTE: u64 = 60 * SECOND;
const DEADLINE: u64 = 10 * MINUTE;

/// What came back from one request, as on the wire.
#[derive(Clone)]
enum Wire {
    Nothing,
    Reply {
        status: u16,
        retry_after: Option<&'static str>,
        body: Option<String>,
    },
}

fn status(status: u16) -> Wire {
    Wire::Reply {
        status,
        retry_after: None,
        body: None,
    }
}

fn status_retry_after(status: u16, retry_after: &'static str) -> Wire {
    Wire::Reply {
        status,
        retry_after: Some(retry_after),
        body: None,
    }
}

/// A look-up's 200 with the key in `state` (`done` keys with `reply_status` and a body).
fn key_status(state: &str, reply_status: Option<u16>) -> Wire {
    let mut body = json!({
        "state": state,
        "operation": "pay_bill",
        "expires_at": "2026-12-05T10:00:00Z",
    });
    if let Some(reply_status) = reply_status {
        body["status"] = json!(reply_status);
        body["reply"] = if reply_status == 201 {
            json!({"payment_id": "pay-1", "bill_id": "elec-1", "amount_paise": 230000,
                   "status": "succeeded", "bank_reference": "BNK-1"})
        } else {
            json!({"type": "https://payments.example/problems/declined", "title": "Declined",
                   "status": reply_status})
        };
    }
    Wire::Reply {
        status: 200,
        retry_after: None,
        body: Some(body.to_string()),
    }
}

/// One case: a name, what it shows, its rules, when the run starts, and each request's
/// (what came back, at what time in ms since the first send, the jitter's unit).
struct Case {
    name: &'static str,
    shows: &'static str,
    rules: ClientRules,
    starts_at: u64,
    replies: Vec<(Wire, u64, f64)>,
}

fn case(name: &'static str, shows: &'static str, replies: Vec<(Wire, u64, f64)>) -> Case {
    Case {
        name,
        shows,
        rules: ClientRules::default(),
        starts_at: 0,
        replies,
    }
}

fn cases() -> Vec<Case> {
    let late = DEADLINE + MINUTE;
    vec![
        case(
            "paid at once",
            "a 201 ends the action; it is deleted",
            vec![(status(201), 800, 0.5)],
        ),
        case(
            "declined",
            "a 402 is a final reply, like a success",
            vec![(status(402), 900, 0.5)],
        ),
        case(
            "refused by a final 4xx",
            "400, 404 and 422 are final: the same bytes would be refused again",
            vec![(status(422), 100, 0.5)],
        ),
        case(
            "token refused",
            "a 401 stops sending but keeps the action: an earlier attempt may have paid",
            vec![(status(503), 500, 0.5), (status(401), 1_000, 0.5)],
        ),
        case(
            "replies lost, then the replay",
            "no reply (a timeout or a cut connection) is retried with the same key after a jittered wait",
            vec![
                (Wire::Nothing, 15 * SECOND, 0.5),
                (Wire::Nothing, 30_250, 0.25),
                (status(201), 31_000, 0.5),
            ],
        ),
        case(
            "409 while the first attempt runs",
            "a 409 is retried; its Retry-After is a floor under the jittered wait",
            vec![
                (status_retry_after(409, "1"), 10_100, 0.1),
                (status(201), 11_300, 0.5),
            ],
        ),
        case(
            "429 with a long Retry-After",
            "Retry-After above the jittered wait decides the wait",
            vec![
                (status_retry_after(429, "5"), 50, 0.9),
                (status(201), 5_100, 0.5),
            ],
        ),
        case(
            "429 with a short Retry-After",
            "the jittered wait above Retry-After decides the wait",
            vec![
                (Wire::Nothing, 15 * SECOND, 0.9),
                (Wire::Nothing, 30_500, 0.9),
                (Wire::Nothing, 47_000, 0.9),
                (status_retry_after(429, "1"), 51_000, 0.9),
                (status(201), 59_000, 0.5),
            ],
        ),
        case(
            "Retry-After not in seconds",
            "an HTTP-date, a signed or a fractional Retry-After reads as none",
            vec![
                (
                    status_retry_after(503, "Wed, 21 Oct 2026 07:28:00 GMT"),
                    100,
                    0.5,
                ),
                (status_retry_after(503, "-1"), 500, 0.5),
                (status_retry_after(503, "1.5"), 1_000, 0.5),
                (status(201), 2_000, 0.5),
            ],
        ),
        case(
            "server errors",
            "500, 502, 503, 504 and 599 are retried with the same key",
            vec![
                (status(500), 100, 0.0),
                (status(502), 200, 0.0),
                (status(503), 300, 0.0),
                (status(504), 400, 0.0),
                (status(599), 500, 0.0),
                (status(201), 600, 0.0),
            ],
        ),
        case(
            "backoff doubles to its cap",
            "ceilings 0.5, 1, 2, 4, 8, 16, 30, 30 s; the wait is the unit's share of the ceiling",
            vec![
                (Wire::Nothing, 15 * SECOND, 0.999),
                (Wire::Nothing, 30_500, 0.999),
                (Wire::Nothing, 46_500, 0.999),
                (Wire::Nothing, 63_500, 0.999),
                (Wire::Nothing, 82_500, 0.999),
                (Wire::Nothing, 105_500, 0.999),
                (Wire::Nothing, 136_500, 0.999),
                (Wire::Nothing, 181_500, 0.999),
                (status(201), 212_000, 0.5),
            ],
        ),
        case(
            "deadline, then the saved reply",
            "once the next wait would cross the deadline, the key is looked up instead of paying again",
            vec![
                (Wire::Nothing, DEADLINE - 200, 0.9),
                (key_status("done", Some(201)), DEADLINE + SECOND, 0.5),
            ],
        ),
        case(
            "deadline, then a saved decline",
            "a look-up's done key ends the action with the saved status",
            vec![
                (status(503), DEADLINE - 200, 0.5),
                (key_status("done", Some(402)), DEADLINE, 0.5),
            ],
        ),
        case(
            "deadline, first attempt still running",
            "a started key stops the run and keeps the action",
            vec![
                (status(409), DEADLINE - 100, 0.5),
                (key_status("started", None), DEADLINE, 0.5),
            ],
        ),
        case(
            "deadline, bank reply unknown",
            "an unknown key keeps the action; the server is asking the bank",
            vec![
                (Wire::Nothing, DEADLINE - 5, 0.5),
                (key_status("unknown", None), DEADLINE, 0.5),
            ],
        ),
        case(
            "deadline, key released",
            "a released key (nothing charged) keeps the action for a resume with the same key",
            vec![
                (Wire::Nothing, DEADLINE - 5, 0.5),
                (key_status("released", None), DEADLINE, 0.5),
            ],
        ),
        case(
            "deadline, never received",
            "a 404 look-up: nothing arrived, nothing charged; the action is deleted",
            vec![
                (Wire::Nothing, DEADLINE - 5, 0.5),
                (status(404), DEADLINE, 0.5),
            ],
        ),
        case(
            "deadline, look-up refused the token",
            "a 401 look-up keeps the action",
            vec![
                (Wire::Nothing, DEADLINE - 5, 0.5),
                (status(401), DEADLINE, 0.5),
            ],
        ),
        case(
            "look-ups that tell nothing",
            "an error, no reply and an unreadable 200 are asked again, three look-ups in all, then unreachable",
            vec![
                (Wire::Nothing, DEADLINE - 5, 0.5),
                (status_retry_after(503, "2"), DEADLINE, 0.5),
                (Wire::Nothing, DEADLINE + 20 * SECOND, 0.5),
                (
                    Wire::Reply {
                        status: 200,
                        retry_after: None,
                        body: Some("<html>captive portal</html>".into()),
                    },
                    DEADLINE + 40 * SECOND,
                    0.5,
                ),
            ],
        ),
        case(
            "Retry-After past the deadline",
            "a floor that would cross the deadline turns the retry into a look-up",
            vec![
                (status_retry_after(503, "30"), DEADLINE - 20 * SECOND, 0.0),
                (key_status("done", Some(201)), DEADLINE, 0.5),
            ],
        ),
        case(
            "an absurd Retry-After",
            "a value beyond 999,999,999 s is read as that, far past any deadline",
            vec![
                (status_retry_after(503, "99999999999999999999"), 100, 0.0),
                (key_status("started", None), 300, 0.5),
            ],
        ),
        Case {
            starts_at: late,
            ..case(
                "resumed after the deadline",
                "an action resumed past its deadline is looked up, never sent",
                vec![(key_status("done", Some(201)), late + 300, 0.5)],
            )
        },
        Case {
            starts_at: 4 * MINUTE,
            ..case(
                "resumed before the deadline",
                "an action resumed in time is sent again with its key and bytes",
                vec![(status(201), 4 * MINUTE + 700, 0.5)],
            )
        },
        Case {
            rules: ClientRules {
                max_attempts: 3,
                ..ClientRules::default()
            },
            ..case(
                "attempts bounded",
                "after max_attempts failures the key is looked up after the last wait",
                vec![
                    (status(503), 100, 0.5),
                    (status(503), 500, 0.5),
                    (status(503), 1_100, 0.5),
                    (key_status("unknown", None), 2_200, 0.5),
                ],
            )
        },
        Case {
            rules: ClientRules {
                attempt_timeout: Duration::from_secs(6),
                prefer_wait: ClientRules::default_prefer_wait(Duration::from_secs(6)),
                ..ClientRules::default()
            },
            ..case(
                "a short attempt timeout",
                "Prefer: wait stays below the attempt timeout (6 s asks wait=1)",
                vec![
                    (Wire::Nothing, 6 * SECOND, 0.5),
                    (status(201), 7 * SECOND, 0.5),
                ],
            )
        },
        Case {
            rules: ClientRules {
                attempt_timeout: Duration::from_secs(5),
                prefer_wait: ClientRules::default_prefer_wait(Duration::from_secs(5)),
                ..ClientRules::default()
            },
            ..case(
                "no room to wait",
                "with a 5 s attempt timeout no Prefer header is sent",
                vec![
                    (status(409), 5 * SECOND, 0.5),
                    (status(201), 6 * SECOND, 0.5),
                ],
            )
        },
        Case {
            rules: ClientRules {
                schedule: RetrySchedule {
                    base: Duration::from_millis(100),
                    cap: Duration::from_millis(400),
                    deadline: Duration::from_secs(2),
                },
                status_look_ups: 0,
                ..ClientRules::default()
            },
            ..case(
                "no look-ups allowed",
                "with status_look_ups 0, the deadline ends the run unreachable (a quick schedule)",
                vec![
                    (Wire::Nothing, 500, 0.999),
                    (Wire::Nothing, 1_200, 0.999),
                    (Wire::Nothing, 1_900, 0.999),
                ],
            )
        },
    ]
}

fn rules_json(rules: &ClientRules) -> Value {
    json!({
        "base_ms": millis(rules.schedule.base),
        "cap_ms": millis(rules.schedule.cap),
        "deadline_ms": millis(rules.schedule.deadline),
        "attempt_timeout_ms": millis(rules.attempt_timeout),
        "prefer_wait_ms": rules.prefer_wait.map(millis),
        "max_attempts": rules.max_attempts,
        "status_look_ups": rules.status_look_ups,
    })
}

fn wire_json(wire: &Wire) -> Value {
    match wire {
        Wire::Nothing => json!({"no_reply": true}),
        Wire::Reply {
            status,
            retry_after,
            body,
        } => {
            let mut seen = json!({"status": status});
            if let Some(retry_after) = retry_after {
                seen["retry_after"] = json!(retry_after);
            }
            if let Some(body) = body {
                seen["body"] = json!(body);
            }
            seen
        }
    }
}

/// What the rules see of a reply: its `Retry-After` parsed, a 200's body read as a key status.
fn seen(wire: &Wire) -> Seen {
    match wire {
        Wire::Nothing => Seen::Nothing,
        Wire::Reply {
            status,
            retry_after,
            body,
        } => Seen::Reply {
            status: *status,
            retry_after: retry_after.and_then(parse_retry_after),
            key_state: body
                .as_deref()
                .filter(|_| *status == 200)
                .and_then(KeyState::from_body),
        },
    }
}

fn next_json(next: Next) -> Value {
    let headers = |prefer_wait: Option<u64>| match prefer_wait {
        Some(seconds) => json!({"Prefer": format!("wait={seconds}")}),
        None => json!({}),
    };
    match next {
        Next::Send { after, prefer_wait } => {
            json!({"send": {"after_ms": millis(after), "headers": headers(prefer_wait)}})
        }
        Next::LookUp { after, prefer_wait } => {
            json!({"look_up": {"after_ms": millis(after), "headers": headers(prefer_wait)}})
        }
        Next::Stop(ending) => {
            let mut stop = match ending {
                Ending::Replied {
                    status,
                    from_look_up,
                } => json!({"ending": "replied", "status": status, "from_look_up": from_look_up}),
                Ending::NotReceived => json!({"ending": "not_received"}),
                Ending::SignInRequired => json!({"ending": "sign_in_required"}),
                Ending::Unsettled(why) => {
                    json!({"ending": "unsettled", "why": unsettled_word(why)})
                }
            };
            stop["keep_action"] = json!(ending.keeps_action());
            json!({"stop": stop})
        }
    }
}

fn unsettled_word(why: Unsettled) -> &'static str {
    match why {
        Unsettled::Started => "started",
        Unsettled::Unknown => "unknown",
        Unsettled::Released => "released",
        Unsettled::Unreachable => "unreachable",
        other => panic!("a new Unsettled needs a word in the vectors: {other:?}"),
    }
}

/// Milliseconds, to the microsecond (runners compare within a microsecond).
fn millis(duration: Duration) -> f64 {
    (duration.as_nanos() as f64 / 1_000.0).round() / 1_000.0
}

fn run(case: &Case) -> Value {
    let (mut progress, first) =
        ActionProgress::start(case.rules, Duration::from_millis(case.starts_at));
    let steps: Vec<Value> = case
        .replies
        .iter()
        .map(|(wire, at, unit)| {
            let next = progress.next(seen(wire), Duration::from_millis(*at), *unit);
            json!({"seen": wire_json(wire), "at_ms": at, "unit": unit, "next": next_json(next)})
        })
        .collect();
    let last = &steps.last().expect("every case has a reply")["next"];
    assert!(
        last.get("stop").is_some(),
        "{}: every case runs to a stop",
        case.name
    );
    let stops = steps
        .iter()
        .filter(|step| step["next"].get("stop").is_some());
    assert_eq!(stops.count(), 1, "{}: only the last step stops", case.name);
    json!({
        "name": case.name,
        "shows": case.shows,
        "rules": rules_json(&case.rules),
        "starts_at_ms": case.starts_at,
        "first": next_json(first),
        "steps": steps,
    })
}

fn retry_after_cases() -> Value {
    let values = [
        "5",
        " 12\t",
        "0",
        "120",
        "999999999",
        "1000000000",
        "99999999999999999999",
        "",
        " ",
        "+5",
        "-1",
        "1.5",
        "5s",
        "0x10",
        "Wed, 21 Oct 2026 07:28:00 GMT",
    ];
    values
        .iter()
        .map(|value| {
            json!({"value": value, "seconds": parse_retry_after(value).map(|wait| wait.as_secs())})
        })
        .collect()
}

fn vectors() -> String {
    let cases: Vec<Value> = cases().iter().map(run).collect();
    let document = json!({
        "about": "The client rules of SPEC §6 as test vectors, generated by shared/tests/client_vectors.rs from shared::retry::ActionProgress. Every client runs every case: start the run at starts_at_ms (the time since the action's first send) and compare the first move; then for each step, read what came back (no_reply, or a status with its Retry-After as sent and a look-up's body), call the rules with at_ms and unit, and compare the move: send or look_up after after_ms (within 0.001 ms) with exactly these headers, or stop with this ending and keep_action. retry_after lists how Retry-After values read (seconds, or null for none).",
        "cases": cases,
        "retry_after": retry_after_cases(),
    });
    serde_json::to_string_pretty(&document).expect("serialises") + "\n"
}

#[test]
fn the_checked_in_vectors_are_what_the_rules_produce() {
    let produced = vectors();
    if std::env::var_os("UPDATE_VECTORS").is_some() {
        std::fs::write(VECTORS, &produced).expect("writes the vectors");
    }
    let checked_in = std::fs::read_to_string(VECTORS).unwrap_or_default();
    assert!(
        checked_in == produced,
        "{VECTORS} differs from what the rules produce: if the change of behaviour is meant, \
         run UPDATE_VECTORS=1 cargo test -p shared --test client_vectors and commit the file"
    );
}
