//! The steps before any write: admission ([`Memory::admit`]), and the replay cache. A repeat that sends the very
//! bytes of one already replayed from memory is looked up before its body is parsed
//! ([`Memory::recall_same_bytes`]: the same bytes pass the same checks and fingerprint the same,
//! `replay_cache`, "The same bytes again"); any other request is admitted, then looked up
//! ([`Memory::recall`]). What is remembered is judged by the path like a database read; a replay
//! from here is the saved reply, byte for byte.

use std::sync::Arc;

use shared::admission::Admission;
use shared::decision::Attempt;
use shared::fingerprint::SentBytes;
use shared::server_path::{Ending, Event, SeenKey, ServerPath};
use shared::{IdempotencyKey, Operation};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::Caller;
use super::replies::{ReplyParts, refuse_mismatch};
use super::work::{Claiming, Work, out_of_order};
use crate::domain::{Cause, EventKind, Reply};
use crate::metrics::Metrics;
use crate::replay_cache::Remembered;
use crate::state::AppState;
use crate::store::KeyRef;
use crate::telemetry::traces;

/// A payment or refund request as it arrived, unchecked: the values of its key header, its
/// path parameter (the bill, or the payment refunded) and its body.
pub struct Submitted<'a> {
    /// Every value of the policy's key header, raw (a repeated header is refused).
    pub key_header_values: Vec<&'a [u8]>,
    /// The path parameter, percent-decoded.
    pub path_parameter: &'a str,
    /// The body, as sent.
    pub body: &'a [u8],
}

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

    /// The checks before any database work, in the order [`shared::admission::admit`] keeps
    /// for the edge and the backend alike: the body's size, depth and JSON syntax (413/400),
    /// the key (400), the fields (422), then a refund's payment id (404). A refusal's reply goes
    /// into `parts`. The checks run in a span of their own (`checks`) when traces are exported:
    /// no log line is written in it, and on a replay every span is a measurable share of the
    /// work (docs/figures.md). Records the key on the operation's span once known.
    pub(super) fn admit(&mut self, parts: &mut ReplyParts) -> Event {
        let operation_span = tracing::Span::current();
        let checked = {
            let _checks = traces::exporting().then(|| tracing::info_span!("checks").entered());
            self.check()
        };
        match checked {
            Ok((attempt, key, claiming)) => {
                operation_span.record("key", tracing::field::display(&key));
                self.key = Some(KeyRef::new(self.caller.user.clone(), &key));
                let submitted = self.submitted;
                let sent = SentBytes::of(self.operation, submitted.path_parameter, submitted.body);
                self.admitted = Some((attempt.clone(), claiming, sent));
                Event::Admitted(attempt)
            }
            Err(refused) => {
                parts.not_admitted = Some(refused);
                Event::Refused
            }
        }
    }

    /// The checks themselves: the attempt, its key, and what it claims; or the refusal. The key
    /// is the client's, or one minted here when the policy does not require a key and none was
    /// sent (so the work is still claimed and crash-safe, just not replayable).
    fn check(&self) -> Result<(Attempt, IdempotencyKey, Claiming), Reply> {
        let submitted = self.submitted;
        let Admission {
            key,
            fingerprint,
            fields,
        } = shared::admission::admit(
            (&self.state.policy, self.state.body_limits),
            (self.operation, submitted.path_parameter),
            submitted.key_header_values.iter().copied(),
            submitted.body,
        )
        .map_err(Reply::problem)?;
        let claiming = Claiming::of(fields, submitted.path_parameter)?;
        let attempt = Attempt {
            key: Ok(key.clone()),
            fingerprint,
        };
        Ok((attempt, key.unwrap_or_else(IdempotencyKey::mint), claiming))
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
