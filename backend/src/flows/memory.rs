//! The steps before any write: admission, and the replay cache. A repeat that sends the very
//! bytes of one already replayed from memory is looked up before its body is parsed
//! ([`Memory::recall_same_bytes`]: the same bytes pass the same checks and fingerprint the same,
//! `replay_cache`, "The same bytes again"); any other request is admitted, then looked up
//! ([`Memory::recall`]). What is remembered is judged by the path like a database read; a replay
//! from here is the saved reply, byte for byte.

use std::sync::Arc;

use shared::Operation;
use shared::decision::Attempt;
use shared::fingerprint::SentBytes;
use shared::server_path::{Ending, Event, SeenKey, ServerPath};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::Caller;
use super::admit::{Submitted, admit};
use super::claiming::Claiming;
use super::replies::{ReplyParts, refuse_mismatch};
use super::work::{Work, out_of_order};
use crate::domain::{Cause, EventKind, Reply};
use crate::metrics::Metrics;
use crate::replay_cache::Remembered;
use crate::state::AppState;
use crate::store::KeyRef;
use crate::telemetry::traces;

/// The trail's word for a replay from the replay cache.
const REPLAYED_FROM_MEMORY: &str = "from memory (the replay cache)";

/// The memory phase of one request: what it has learnt so far.
pub(super) struct Memory<'r> {
    state: &'r AppState,
    caller: &'r Caller,
    operation: Operation,
    submitted: &'r Submitted<'r>,
    /// The key, once parsed (or minted, for an operation that needs none).
    key: Option<KeyRef>,
    /// The admitted request's fingerprint, what it claims, and its bytes for the replay cache.
    admitted: Option<(Attempt, Claiming, SentBytes)>,
    /// The entry recalled, if any.
    remembered: Option<Arc<Remembered>>,
}

impl<'r> Memory<'r> {
    /// The memory phase of `caller`'s `operation` request, as `submitted`.
    pub(super) fn new(
        state: &'r AppState,
        caller: &'r Caller,
        operation: Operation,
        submitted: &'r Submitted<'r>,
    ) -> Memory<'r> {
        Memory {
            state,
            caller,
            operation,
            submitted,
            key: None,
            admitted: None,
            remembered: None,
        }
    }

    /// The entry of a key whose last replay from memory had these very bytes, to the same
    /// operation and path, judged on the remembered fingerprint before the body is parsed. The
    /// key header is parsed as admission parses it.
    pub(super) fn recall_same_bytes(&mut self) -> Event {
        let (state, submitted) = (self.state, self.submitted);
        if submitted.body.len() > state.body_limits.max_bytes {
            return Event::RecalledSameBytes(None);
        }
        let header_values = submitted.key_header_values.iter().copied();
        let Ok(Some(key)) = state.policy.parse_key_header(self.operation, header_values) else {
            return Event::RecalledSameBytes(None);
        };
        let key_ref = KeyRef::new(self.caller.user.clone(), &key);
        let Some(remembered) = state.replay_cache.recall(key_ref.clone()) else {
            return Event::RecalledSameBytes(None);
        };
        let sent = SentBytes::of(self.operation, submitted.path_parameter, submitted.body);
        if !remembered.replayed_bytes_are(sent) {
            return Event::RecalledSameBytes(None);
        }
        tracing::Span::current().record("key", tracing::field::display(&key));
        let attempt = Attempt {
            key: Ok(Some(key)),
            fingerprint: remembered.record.fingerprint,
        };
        let seen = seen_in_memory(&remembered);
        (self.key, self.remembered) = (Some(key_ref), Some(remembered));
        Event::RecalledSameBytes(Some((seen, attempt)))
    }

    /// The checks before any database work ([`admit`]); a refusal's reply goes into `parts`.
    pub(super) fn admit(&mut self, parts: &mut ReplyParts) -> Event {
        let (state, submitted) = (self.state, self.submitted);
        let admitted = admit(state, self.operation, submitted).map_err(Reply::problem);
        let claiming = admitted.and_then(|(admitted, fields)| {
            let claiming = Claiming::of(fields, submitted.path_parameter)?;
            Ok((admitted, claiming))
        });
        match claiming {
            Ok((admitted, claiming)) => {
                self.key = Some(KeyRef::new(self.caller.user.clone(), &admitted.key));
                let event = Event::Admitted(admitted.attempt.clone());
                self.admitted = Some((admitted.attempt, claiming, admitted.sent));
                event
            }
            Err(refused) => {
                parts.not_admitted = Some(refused);
                Event::Refused
            }
        }
    }

    /// The admitted key's entry in the replay cache, if any.
    pub(super) fn recall(&mut self, parts: &mut ReplyParts) -> Event {
        let remembered = self
            .key
            .clone()
            .and_then(|key| self.state.replay_cache.recall(key));
        self.remembered = remembered;
        let seen = self.remembered.as_deref().map(|remembered| {
            parts.movement_id = Some(remembered.movement_id);
            seen_in_memory(remembered)
        });
        Event::Recalled(seen)
    }

    /// Drops the key's entry: the database decides.
    pub(super) fn forget(&mut self) -> Event {
        if let Some(key) = self.key.clone() {
            self.state.replay_cache.forget(key);
        }
        self.remembered = None;
        Event::Forgotten
    }

    /// The remembered reply, replayed; counted, and recorded in the trail. A repeat replayed
    /// after its full checks has its bytes kept with the entry, for [`Memory::recall_same_bytes`].
    pub(super) fn replay(&mut self, parts: &mut ReplyParts) -> Event {
        let (Some(key), Some(remembered)) = (self.key.clone(), self.remembered.as_deref()) else {
            return out_of_order("a remembered key");
        };
        if let Some((_, _, sent)) = &self.admitted {
            remembered.note_replayed_bytes(*sent);
        }
        let operation = remembered.operation.name();
        Metrics::count(&self.state.metrics.replays, operation);
        Metrics::count(&self.state.metrics.replays_from_memory, operation);
        let replayed = (EventKind::Replayed, REPLAYED_FROM_MEMORY);
        let movement = Some(remembered.movement_id);
        self.state
            .trail
            .observe_key(key, movement, replayed, &self.cause());
        replied_from("memory");
        parts.rendered = Some(remembered.reply.clone().replayed());
        Event::Rendered
    }

    /// The reply that ends the request before any write: a replay, a refused mismatch, or the
    /// admission's refusal.
    pub(super) fn reply(self, ending: Ending, path: &ServerPath, parts: ReplyParts) -> Reply {
        if ending == Ending::Mismatch
            && let Some(key) = self.key.clone()
        {
            let movement = parts.movement_id;
            refuse_mismatch(self.state, (key, movement), self.operation, &self.cause());
        }
        parts.reply(ending, path.expires_at(), None)
    }

    /// The admitted request's work, for the rounds; `None` if it was not admitted.
    pub(super) fn into_work(self, parts: ReplyParts) -> Option<Work> {
        let cause = self.cause();
        let (attempt, claiming, _) = self.admitted?;
        let key = self.key?;
        Some(Work::new(
            self.state,
            (key, cause),
            (attempt.fingerprint, claiming),
            parts,
        ))
    }

    fn cause(&self) -> Cause {
        self.caller.cause()
    }
}

/// A remembered key as the path sees it: finished, read at the database's estimated clock.
fn seen_in_memory(remembered: &Remembered) -> SeenKey {
    SeenKey {
        record: remembered.record.clone(),
        read_at: remembered.estimated_now(),
        next_check_at: None,
        settlement_due_at: None,
    }
}

/// Marks the operation's span, in the trace, with where its replay came from: `memory` (the
/// replay cache) or `database`.
pub(super) fn replied_from(place: &'static str) {
    if traces::exporting() {
        tracing::Span::current().set_attribute("replay.replied_from", place);
    }
}
