//! What an admitted request's steps share, from its first claim to its reply: owned, so that a
//! round can run in a task of its own (`super::path`). Each step module reads and fills it:
//! the claim holds the key here, the bank call leaves the bank's word here for the save, and
//! every step that renders a reply leaves it in [`ReplyParts`].

use std::time::Duration;

use shared::server_path::{Ending, Event, ServerPath};
use shared::{Fingerprint, Operation};

use super::claiming::Claiming;
use super::held_claim::HeldClaim;
use super::replies::{ReplyParts, refuse_mismatch};
use crate::domain::{Cause, Reply};
use crate::state::AppState;
use crate::store::{FinalOutcome, KeyRef, StoredKey};

/// An admitted request at work on its key.
pub(super) struct Work {
    /// The application's state.
    pub state: AppState,
    /// The key, with its user.
    pub key: KeyRef,
    /// What the request's writes are recorded against.
    pub cause: Cause,
    /// The request's fingerprint, which a claim stores and a re-claim must match.
    pub fingerprint: Fingerprint,
    /// What a claim writes with the key.
    pub claiming: Claiming,
    /// The key as last read, if it was stored already.
    pub stored: Option<StoredKey>,
    /// The claim this request holds, from its claim until the reply.
    pub held: Option<HeldClaim>,
    /// The bank's final word, from the call until the save.
    pub final_word: Option<FinalOutcome>,
    /// How long the bank call took (zero after a failed save): the first status check counts
    /// from its end.
    pub call_took: Duration,
    /// What the reply is made of.
    pub parts: ReplyParts,
}

impl Work {
    /// The work of the request `claiming` on `key`, with the `parts` its memory phase gathered.
    pub(super) fn new(
        state: &AppState,
        (key, cause): (KeyRef, Cause),
        (fingerprint, claiming): (Fingerprint, Claiming),
        parts: ReplyParts,
    ) -> Work {
        Work {
            state: state.clone(),
            key,
            cause,
            fingerprint,
            claiming,
            stored: None,
            held: None,
            final_word: None,
            call_took: Duration::ZERO,
            parts,
        }
    }

    /// The request's operation.
    pub(super) fn operation(&self) -> Operation {
        self.claiming.operation()
    }

    /// The reply for `ending`; a refused mismatch is counted and recorded in the trail.
    pub(super) fn reply(&mut self, ending: Ending, path: &ServerPath) -> Reply {
        if ending == Ending::Mismatch {
            let key = (self.key.clone(), self.parts.movement_id);
            refuse_mismatch(&self.state, key, self.operation(), &self.cause);
        }
        let amount_paise = Some(self.claiming.amount_paise());
        std::mem::take(&mut self.parts).reply(ending, path.expires_at(), amount_paise)
    }
}

/// The event for a step run without what an earlier step should have left (`what`: a claim,
/// the stored key): a bug in the interpreter, logged. It is one no step produces, so the path
/// gives up with a 500 rather than guess.
pub(super) fn out_of_order(what: &'static str) -> Event {
    tracing::error!(what, "a step of the request's path ran without its input");
    Event::Arrived
}
