//! The record a Durable Object keeps for its (user, key), and the pure transitions of the
//! protocol: each takes the record as it stands and the time, and says what to reply and how
//! the record changes. Times are Unix milliseconds, as the runtime's clock gives them.

use serde::{Deserialize, Serialize};
use shared::Fingerprint;

use super::protocol::{BeginRequest, BeginVerdict, FinishReport};
use super::saved_reply::SavedReply;
use super::waiters::WaiterNews;

/// What an object remembers. No record means the key is free at the edge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case", try_from = "KeyRecordFields")]
pub enum KeyRecord {
    /// An attempt is being forwarded to the backend.
    InFlight {
        /// The attempt holding the mark.
        attempt_id: String,
        /// Its fingerprint.
        fingerprint: Fingerprint,
        /// When the mark lapses if the attempt never reports.
        mark_expires_at_ms: u64,
    },
    /// The backend gave a final reply: replayed until the key's expiry where it is kept; where
    /// replies are not kept (`EDGE_KEEPS_REPLIES=false`), only the fingerprint stays, so a
    /// changed body is still refused here and a repeat goes on to the backend, which replays.
    Finished {
        /// The fingerprint of the request the reply belongs to.
        fingerprint: Fingerprint,
        /// The reply, if replies are kept.
        #[serde(skip_serializing_if = "Option::is_none")]
        reply: Option<SavedReply>,
        /// When the key expires: the backend's `Idempotency-Expires`, the expiry written on the
        /// key's row at its claim.
        keep_until_ms: u64,
    },
}

/// A stored [`KeyRecord`] as read: the `state` tag and every variant's fields. The JSON is the
/// same; reading it through this flat struct, rather than serde's internally tagged enum (which
/// first copies the whole object into its generic `Content` tree), keeps that machinery out of
/// the Wasm module: about 11 KB gzipped, with the other tagged messages read the same way
/// (`BeginVerdict`, `WaitEnd`, `TakeVerdict`).
#[derive(Deserialize)]
struct KeyRecordFields {
    state: KeyRecordState,
    attempt_id: Option<String>,
    fingerprint: Fingerprint,
    mark_expires_at_ms: Option<u64>,
    /// Records stored before the rename say `answer`; they are read until they expire.
    #[serde(alias = "answer")]
    reply: Option<SavedReply>,
    keep_until_ms: Option<u64>,
}

/// The `state` tag of a stored [`KeyRecord`].
#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum KeyRecordState {
    InFlight,
    Finished,
}

impl TryFrom<KeyRecordFields> for KeyRecord {
    type Error = &'static str;

    fn try_from(fields: KeyRecordFields) -> Result<KeyRecord, Self::Error> {
        let fingerprint = fields.fingerprint;
        Ok(match fields.state {
            KeyRecordState::InFlight => KeyRecord::InFlight {
                attempt_id: fields.attempt_id.ok_or("missing field `attempt_id`")?,
                fingerprint,
                mark_expires_at_ms: fields
                    .mark_expires_at_ms
                    .ok_or("missing field `mark_expires_at_ms`")?,
            },
            KeyRecordState::Finished => KeyRecord::Finished {
                fingerprint,
                reply: fields.reply,
                keep_until_ms: fields
                    .keep_until_ms
                    .ok_or("missing field `keep_until_ms`")?,
            },
        })
    }
}

/// How a message changes the stored record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordChange {
    /// Leave it as it is.
    Unchanged,
    /// Store this record (and set the alarm to its end).
    Store(KeyRecord),
    /// Delete the record (and the alarm): the key is free at the edge.
    Clear,
}

/// What a finish report does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinishStep {
    /// How the record changes.
    pub change: RecordChange,
    /// What the attempts waiting on the key are handed, if the report ends their wait: it comes
    /// from the attempt they wait for, or it is final.
    pub tell_waiters: Option<WaiterNews>,
}

/// What the alarm does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlarmStep {
    /// How the record changes.
    pub change: RecordChange,
    /// When the alarm must fire next, if the record lives on.
    pub next_alarm_ms: Option<u64>,
}

impl KeyRecord {
    /// When this record stops counting: the mark's end or the key's expiry.
    pub fn ends_at_ms(&self) -> u64 {
        match self {
            KeyRecord::InFlight {
                mark_expires_at_ms, ..
            } => *mark_expires_at_ms,
            KeyRecord::Finished { keep_until_ms, .. } => *keep_until_ms,
        }
    }

    /// Whether the record still counts at `now_ms`.
    pub fn is_live_at(&self, now_ms: u64) -> bool {
        now_ms < self.ends_at_ms()
    }

    fn fingerprint(&self) -> &Fingerprint {
        match self {
            KeyRecord::InFlight { fingerprint, .. } | KeyRecord::Finished { fingerprint, .. } => {
                fingerprint
            }
        }
    }
}

/// An attempt asks to be forwarded. The fingerprint is compared before the state, as the
/// backend does, so a changed body is a 422 even while the first attempt runs.
pub fn begin(
    current: Option<&KeyRecord>,
    request: &BeginRequest,
    now_ms: u64,
) -> (BeginVerdict, RecordChange) {
    let Some(live) = current.filter(|record| record.is_live_at(now_ms)) else {
        let mark = KeyRecord::InFlight {
            attempt_id: request.attempt_id.clone(),
            fingerprint: request.fingerprint,
            mark_expires_at_ms: now_ms.saturating_add(request.mark_for_ms),
        };
        return (BeginVerdict::Forward, RecordChange::Store(mark));
    };
    if *live.fingerprint() != request.fingerprint {
        return (BeginVerdict::Mismatch, RecordChange::Unchanged);
    }
    let verdict = match live {
        KeyRecord::InFlight { .. } => BeginVerdict::InProgress,
        KeyRecord::Finished {
            reply: Some(reply), ..
        } => BeginVerdict::Replay {
            reply: reply.clone(),
        },
        KeyRecord::Finished { reply: None, .. } => BeginVerdict::Forward,
    };
    (verdict, RecordChange::Unchanged)
}

/// Until when (Unix milliseconds) an attempt that got [`BeginVerdict::InProgress`] waits for the
/// first attempt's reply: its own wait, never past the end of the in-flight mark (a Worker
/// that died mid-forward never reports); `None` if it does not wait.
pub fn wait_until(current: Option<&KeyRecord>, request: &BeginRequest, now_ms: u64) -> Option<u64> {
    match current {
        Some(KeyRecord::InFlight {
            mark_expires_at_ms, ..
        }) if request.wait_ms > 0 && now_ms < *mark_expires_at_ms => Some(
            now_ms
                .saturating_add(request.wait_ms)
                .min(*mark_expires_at_ms),
        ),
        _ => None,
    }
}

/// An attempt's forward ended. A final reply is kept (or, where the report says replies are not
/// kept, only its fingerprint) until its key's expiry as the backend's
/// `Idempotency-Expires` names it, never longer (unless one is kept already: the first stays,
/// and the backend gives the same one to every attempt anyway); a final reply without a
/// readable expiry, or already past it, is not kept. Any other reply clears the mark of the
/// attempt that reports, and only that attempt's. The attempts waiting on the key are handed a
/// final reply, or whatever the attempt holding the mark got.
pub fn finish(current: Option<&KeyRecord>, report: &FinishReport, now_ms: u64) -> FinishStep {
    let live = current.filter(|record| record.is_live_at(now_ms));
    let final_reply = report.reply.as_ref().filter(|reply| reply.is_final());
    let holds_the_mark = matches!(live, Some(KeyRecord::InFlight { attempt_id, .. })
        if *attempt_id == report.attempt_id);
    let change = match (final_reply, live) {
        (Some(_), Some(KeyRecord::Finished { .. })) => RecordChange::Unchanged,
        (Some(reply), _) => match reply.key_expires_at_ms() {
            Some(keep_until_ms) if keep_until_ms > now_ms => {
                RecordChange::Store(KeyRecord::Finished {
                    fingerprint: report.fingerprint,
                    reply: report.keep_reply.then(|| reply.clone()),
                    keep_until_ms,
                })
            }
            _ if holds_the_mark => RecordChange::Clear,
            _ => RecordChange::Unchanged,
        },
        (None, _) if holds_the_mark => RecordChange::Clear,
        (None, _) => RecordChange::Unchanged,
    };
    let tell_waiters = (final_reply.is_some() || holds_the_mark).then(|| report.reply.clone());
    FinishStep {
        change,
        tell_waiters,
    }
}

/// The object's alarm fired: drop a record whose time is up, or fire again when it is.
pub fn on_alarm(current: Option<&KeyRecord>, now_ms: u64) -> AlarmStep {
    match current {
        Some(record) if record.is_live_at(now_ms) => AlarmStep {
            change: RecordChange::Unchanged,
            next_alarm_ms: Some(record.ends_at_ms()),
        },
        Some(_) => AlarmStep {
            change: RecordChange::Clear,
            next_alarm_ms: None,
        },
        None => AlarmStep {
            change: RecordChange::Unchanged,
            next_alarm_ms: None,
        },
    }
}

#[cfg(test)]
mod tests {
    // Under wasm32 the same tests run in Node through wasm-bindgen-test (`.cargo/config.toml`).
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use shared::Operation;
    use shared::fingerprint::{BodyLimits, fingerprint};

    use super::*;

    const NOW: u64 = 1_800_000_000_000;
    const MARK_MS: u64 = 20_000;
    const KEEP_MS: u64 = 48 * 3_600_000;
    const KEEP: time::Duration = time::Duration::hours(48);

    fn fp(amount: u64) -> Fingerprint {
        let body = format!(r#"{{"amount_paise":{amount},"payer_vpa":"asha@okbank"}}"#);
        fingerprint(
            Operation::PayBill,
            "b",
            body.as_bytes(),
            BodyLimits::default(),
        )
        .expect("valid")
        .fingerprint
    }

    fn begin_request(attempt: &str, amount: u64) -> BeginRequest {
        BeginRequest {
            attempt_id: attempt.to_owned(),
            fingerprint: fp(amount),
            mark_for_ms: MARK_MS,
            wait_ms: 0,
        }
    }

    fn created() -> SavedReply {
        SavedReply {
            status: 201,
            content_type: Some("application/json".to_owned()),
            location: Some("/v1/payments/p".to_owned()),
            retry_after: None,
            expires: Some(shared::expiry::format_http_date(expiry())),
            body: r#"{"payment_id":"p"}"#.to_owned(),
        }
    }

    fn outcome_pending() -> SavedReply {
        SavedReply {
            status: 503,
            content_type: Some("application/problem+json".to_owned()),
            location: None,
            retry_after: Some("5".to_owned()),
            expires: None,
            body: r#"{"type":"/problems/outcome-pending"}"#.to_owned(),
        }
    }

    /// The key's expiry as the backend's `Idempotency-Expires` names it: `KEEP_MS` after
    /// `NOW` (a whole second, as HTTP dates are).
    fn expiry() -> time::OffsetDateTime {
        let at_ms = i128::from(NOW + KEEP_MS) * 1_000_000;
        time::OffsetDateTime::from_unix_timestamp_nanos(at_ms).expect("in range")
    }

    fn report(attempt: &str, amount: u64, reply: Option<SavedReply>) -> FinishReport {
        FinishReport {
            attempt_id: attempt.to_owned(),
            fingerprint: fp(amount),
            reply,
            keep_reply: true,
        }
    }

    fn stored(change: RecordChange) -> KeyRecord {
        match change {
            RecordChange::Store(record) => record,
            other => panic!("expected a stored record, got {other:?}"),
        }
    }

    /// Runs begin and applies its change, as the object does.
    fn begin_and_apply(
        record: &mut Option<KeyRecord>,
        request: &BeginRequest,
        now: u64,
    ) -> BeginVerdict {
        let (verdict, change) = begin(record.as_ref(), request, now);
        apply(record, change);
        verdict
    }

    /// Runs finish and applies its change.
    fn finish_and_apply(record: &mut Option<KeyRecord>, report: &FinishReport, now: u64) {
        let step = finish(record.as_ref(), report, now);
        apply(record, step.change);
    }

    fn apply(record: &mut Option<KeyRecord>, change: RecordChange) {
        match change {
            RecordChange::Unchanged => {}
            RecordChange::Store(new) => *record = Some(new),
            RecordChange::Clear => *record = None,
        }
    }

    #[test]
    fn the_first_attempt_is_forwarded_and_marks_the_key_in_flight() {
        let (verdict, change) = begin(None, &begin_request("a", 1), NOW);
        assert_eq!(verdict, BeginVerdict::Forward);
        assert_eq!(
            stored(change),
            KeyRecord::InFlight {
                attempt_id: "a".to_owned(),
                fingerprint: fp(1),
                mark_expires_at_ms: NOW + MARK_MS,
            }
        );
    }

    #[test]
    fn concurrent_attempts_get_in_progress_or_mismatch_while_one_is_in_flight() {
        let mut record = None;
        assert_eq!(
            begin_and_apply(&mut record, &begin_request("a", 1), NOW),
            BeginVerdict::Forward
        );
        for n in 0..19 {
            let attempt = format!("b{n}");
            assert_eq!(
                begin_and_apply(&mut record, &begin_request(&attempt, 1), NOW + 1),
                BeginVerdict::InProgress
            );
        }
        assert_eq!(
            begin_and_apply(&mut record, &begin_request("c", 2), NOW + 1),
            BeginVerdict::Mismatch
        );
    }

    #[test]
    fn a_final_reply_is_replayed_until_the_key_expires() {
        let mut record = None;
        begin_and_apply(&mut record, &begin_request("a", 1), NOW);
        finish_and_apply(&mut record, &report("a", 1, Some(created())), NOW + 5);
        assert_eq!(
            begin_and_apply(&mut record, &begin_request("b", 1), NOW + 10),
            BeginVerdict::Replay { reply: created() }
        );
        assert_eq!(
            begin_and_apply(&mut record, &begin_request("c", 2), NOW + 10),
            BeginVerdict::Mismatch
        );
        // Kept until the backend's expiry, and not a moment longer.
        assert_eq!(
            begin_and_apply(&mut record, &begin_request("d", 1), NOW + KEEP_MS - 1),
            BeginVerdict::Replay { reply: created() }
        );
        assert_eq!(
            begin_and_apply(&mut record, &begin_request("e", 1), NOW + KEEP_MS),
            BeginVerdict::Forward
        );
    }

    #[test]
    fn a_report_long_after_its_attempt_began_keeps_the_reply_only_until_the_backends_expiry() {
        // The first forward timed out; a retry an hour later got the reply. The key expires
        // when the backend says, not an hour later.
        let mut record = None;
        let hour = 3_600_000;
        begin_and_apply(&mut record, &begin_request("a", 1), NOW + hour);
        finish_and_apply(
            &mut record,
            &report("a", 1, Some(created())),
            NOW + hour + 5,
        );
        assert!(matches!(
            &record,
            Some(KeyRecord::Finished { keep_until_ms, .. }) if *keep_until_ms == NOW + KEEP_MS
        ));
    }

    #[test]
    fn a_final_reply_without_a_readable_expiry_or_past_it_is_not_kept() {
        for expires in [None, Some("soon".to_owned())] {
            let mut record = None;
            begin_and_apply(&mut record, &begin_request("a", 1), NOW);
            let reply = SavedReply {
                expires,
                ..created()
            };
            finish_and_apply(&mut record, &report("a", 1, Some(reply)), NOW + 5);
            assert_eq!(record, None, "the mark is cleared, nothing kept");
        }
        let mut record = None;
        begin_and_apply(&mut record, &begin_request("a", 1), NOW);
        let already_expired = SavedReply {
            expires: Some(shared::expiry::format_http_date(expiry() - KEEP)),
            ..created()
        };
        let step = finish(
            record.as_ref(),
            &report("a", 1, Some(already_expired)),
            NOW + 5,
        );
        assert_eq!(step.change, RecordChange::Clear);
        assert!(step.tell_waiters.is_some(), "waiters still get the reply");
    }

    #[test]
    fn a_non_final_reply_frees_the_key_for_the_next_attempt() {
        let mut record = None;
        begin_and_apply(&mut record, &begin_request("a", 1), NOW);
        finish_and_apply(&mut record, &report("a", 1, None), NOW + 5);
        assert_eq!(record, None);
        assert_eq!(
            begin_and_apply(&mut record, &begin_request("b", 1), NOW + 6),
            BeginVerdict::Forward
        );
    }

    #[test]
    fn only_the_attempt_holding_the_mark_clears_it() {
        let mut record = None;
        begin_and_apply(&mut record, &begin_request("a", 1), NOW);
        // A stale attempt whose own mark lapsed reports late: the new mark stays, and the
        // attempts waiting on the new one go on waiting.
        assert_eq!(
            finish(
                record.as_ref(),
                &report("old", 1, Some(outcome_pending())),
                NOW + 5
            ),
            FinishStep {
                change: RecordChange::Unchanged,
                tell_waiters: None,
            }
        );
    }

    #[test]
    fn where_replies_are_not_kept_only_the_fingerprint_stays_and_repeats_go_on() {
        let mut record = None;
        begin_and_apply(&mut record, &begin_request("a", 1), NOW);
        let not_kept = FinishReport {
            keep_reply: false,
            ..report("a", 1, Some(created()))
        };
        let step = finish(record.as_ref(), &not_kept, NOW + 5);
        assert_eq!(
            step.tell_waiters,
            Some(Some(created())),
            "waiters still get the reply, from memory"
        );
        apply(&mut record, step.change);
        assert_eq!(
            record,
            Some(KeyRecord::Finished {
                fingerprint: fp(1),
                reply: None,
                keep_until_ms: NOW + KEEP_MS,
            })
        );
        let json = serde_json::to_string(&record).expect("serialises");
        assert!(!json.contains("reply"), "{json}");
        // A repeat goes on to the backend and leaves the record be; a changed body is still
        // refused here; the backend's replay to the repeat changes nothing.
        for attempt in ["b", "c"] {
            assert_eq!(
                begin_and_apply(&mut record, &begin_request(attempt, 1), NOW + 10),
                BeginVerdict::Forward
            );
        }
        assert_eq!(
            begin_and_apply(&mut record, &begin_request("d", 2), NOW + 10),
            BeginVerdict::Mismatch
        );
        let replayed = FinishReport {
            keep_reply: false,
            ..report("b", 1, Some(created()))
        };
        finish_and_apply(&mut record, &replayed, NOW + 20);
        assert!(matches!(
            &record,
            Some(KeyRecord::Finished { reply: None, .. })
        ));
        let json = format!(
            r#"{{"state":"finished","fingerprint":{},"keep_until_ms":7}}"#,
            serde_json::to_string(&fp(1)).expect("serialises")
        );
        assert!(serde_json::from_str::<KeyRecord>(&json).is_ok(), "{json}");
    }

    #[test]
    fn a_late_final_reply_is_kept_even_after_the_mark_lapsed() {
        let mut record = None;
        begin_and_apply(&mut record, &begin_request("a", 1), NOW);
        let late = NOW + MARK_MS + 1;
        let step = finish(record.as_ref(), &report("a", 1, Some(created())), late);
        assert!(matches!(stored(step.change), KeyRecord::Finished { .. }));
    }

    #[test]
    fn the_first_final_reply_stays() {
        let mut record = None;
        begin_and_apply(&mut record, &begin_request("a", 1), NOW);
        finish_and_apply(&mut record, &report("a", 1, Some(created())), NOW + 5);
        let other = SavedReply {
            status: 402,
            ..created()
        };
        assert_eq!(
            finish(record.as_ref(), &report("b", 1, Some(other)), NOW + 6).change,
            RecordChange::Unchanged
        );
    }

    #[test]
    fn a_dead_attempt_never_blocks_the_key_past_its_mark() {
        let mut record = None;
        begin_and_apply(&mut record, &begin_request("dead", 1), NOW);
        assert_eq!(
            begin_and_apply(&mut record, &begin_request("b", 1), NOW + MARK_MS - 1),
            BeginVerdict::InProgress
        );
        assert_eq!(
            begin_and_apply(&mut record, &begin_request("c", 1), NOW + MARK_MS),
            BeginVerdict::Forward
        );
    }

    #[test]
    fn the_alarm_clears_a_lapsed_mark_and_rearms_for_a_live_record() {
        let (_, change) = begin(None, &begin_request("a", 1), NOW);
        let mark = stored(change);
        assert_eq!(
            on_alarm(Some(&mark), NOW + 1),
            AlarmStep {
                change: RecordChange::Unchanged,
                next_alarm_ms: Some(NOW + MARK_MS),
            }
        );
        assert_eq!(
            on_alarm(Some(&mark), NOW + MARK_MS),
            AlarmStep {
                change: RecordChange::Clear,
                next_alarm_ms: None,
            }
        );
        assert_eq!(
            on_alarm(None, NOW),
            AlarmStep {
                change: RecordChange::Unchanged,
                next_alarm_ms: None,
            }
        );
    }

    #[test]
    fn records_survive_a_round_trip_through_storage_json() {
        let (_, change) = begin(None, &begin_request("a", 1), NOW);
        let mark = stored(change);
        let finished = KeyRecord::Finished {
            fingerprint: fp(1),
            reply: Some(created()),
            keep_until_ms: NOW + KEEP_MS,
        };
        for record in [mark, finished.clone()] {
            let json = serde_json::to_string(&record).expect("serialises");
            assert_eq!(
                serde_json::from_str::<KeyRecord>(&json).expect("parses"),
                record
            );
        }
        // A record stored by the edge before `answer` was renamed `reply` still reads.
        let json = serde_json::to_string(&finished).expect("serialises");
        let stored_before = json.replace(r#""reply":"#, r#""answer":"#);
        assert_ne!(stored_before, json);
        assert_eq!(
            serde_json::from_str::<KeyRecord>(&stored_before).expect("parses"),
            finished
        );
    }

    #[test]
    fn records_read_back_with_the_state_anywhere_and_refused_without_their_fields() {
        let fingerprint = serde_json::to_string(&fp(1)).expect("serialises");
        let in_flight = format!(
            r#"{{"attempt_id":"a","mark_expires_at_ms":7,"fingerprint":{fingerprint},"state":"in_flight","extra":1}}"#
        );
        assert_eq!(
            serde_json::from_str::<KeyRecord>(&in_flight).expect("parses"),
            KeyRecord::InFlight {
                attempt_id: "a".to_owned(),
                fingerprint: fp(1),
                mark_expires_at_ms: 7,
            }
        );
        for broken in [
            format!(r#"{{"state":"in_flight","attempt_id":"a","fingerprint":{fingerprint}}}"#),
            format!(r#"{{"state":"finished","fingerprint":{fingerprint},"reply":null}}"#),
            format!(r#"{{"state":"lost","fingerprint":{fingerprint}}}"#),
            format!(r#"{{"attempt_id":"a","mark_expires_at_ms":7,"fingerprint":{fingerprint}}}"#),
        ] {
            assert!(
                serde_json::from_str::<KeyRecord>(&broken).is_err(),
                "{broken}"
            );
        }
    }

    #[test]
    fn the_waiters_get_the_reply_of_the_attempt_they_wait_for() {
        let mut record = None;
        begin_and_apply(&mut record, &begin_request("a", 1), NOW);
        let done = finish(record.as_ref(), &report("a", 1, Some(created())), NOW + 5);
        assert_eq!(done.tell_waiters, Some(Some(created())));

        // An outcome still pending is passed on to them as well, and frees the key.
        let mut record = None;
        begin_and_apply(&mut record, &begin_request("a", 1), NOW);
        let pending = finish(
            record.as_ref(),
            &report("a", 1, Some(outcome_pending())),
            NOW + 5,
        );
        assert_eq!(pending.change, RecordChange::Clear);
        assert_eq!(pending.tell_waiters, Some(Some(outcome_pending())));
    }

    #[test]
    fn a_wait_ends_with_its_own_time_or_the_in_flight_mark() {
        let mut record = None;
        begin_and_apply(&mut record, &begin_request("a", 1), NOW);
        let waiting = |wait_ms| BeginRequest {
            wait_ms,
            ..begin_request("b", 1)
        };
        assert_eq!(
            wait_until(record.as_ref(), &waiting(10_000), NOW + 1),
            Some(NOW + 10_001)
        );
        assert_eq!(
            wait_until(record.as_ref(), &waiting(60_000), NOW + 1),
            Some(NOW + MARK_MS),
            "never past the mark"
        );
        assert_eq!(wait_until(record.as_ref(), &waiting(0), NOW + 1), None);
        assert_eq!(
            wait_until(record.as_ref(), &waiting(10_000), NOW + MARK_MS),
            None,
            "a lapsed mark"
        );
        assert_eq!(wait_until(None, &waiting(10_000), NOW), None);
    }
}
