//! How an action ended, as far as this client can tell. Only [`ActionResult::Answered`] and
//! [`ActionResult::NotReceived`] end the action; the others keep it saved, because money may have
//! moved and a later resume must ask about the same key rather than pay again.

use serde_json::Value;
use shared::IdempotencyKey;
pub use shared::retry::Unsettled;

/// The end of one run of an action.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// The action's key.
    pub key: IdempotencyKey,
    /// Attempts sent in this run (status look-ups not counted).
    pub attempts: u32,
    /// What became of it.
    pub outcome: ActionResult,
}

/// What became of an action.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ActionResult {
    /// The server's final answer: 2xx, a 402 decline, or another 4xx. The action is over and
    /// deleted from the store.
    Answered(FinalReply),
    /// The deadline passed and the outcome is not settled yet. The action stays saved: show a
    /// status screen, resume later, never pay again in the meantime.
    Unsettled(Unsettled),
    /// The deadline passed and the server has no record of the key: no attempt arrived (or the
    /// key expired long ago). Nothing was charged; the action is deleted, and paying after all
    /// is a new action with a new key.
    NotReceived,
    /// The server refused the token (401). The action stays saved: an earlier attempt may have
    /// gone through, so sign in again and resume it, never start it afresh.
    SignInRequired,
}

impl ActionResult {
    /// Whether the action stays saved for a later resume (its outcome is not known to be final).
    pub fn keeps_action(&self) -> bool {
        matches!(
            self,
            ActionResult::Unsettled(_) | ActionResult::SignInRequired
        )
    }
}

/// A final answer from the server.
#[derive(Debug, Clone, PartialEq)]
pub struct FinalReply {
    /// The status: 201, 402, or another final code.
    pub status: u16,
    /// The body: the payment or refund, or a problem.
    pub body: Value,
    /// Whether it was a replay of an answer the server had saved.
    pub replayed: bool,
    /// Whether it came from the status look-up after the deadline rather than an attempt.
    pub from_status_look_up: bool,
    /// Whether the server held the request until the key's first attempt finished and answered
    /// with that attempt's answer (`Prefer: wait` honoured, `Preference-Applied` sent).
    pub waited_for_first_attempt: bool,
}

impl FinalReply {
    /// Whether the action succeeded (2xx).
    pub fn succeeded(&self) -> bool {
        (200..300).contains(&self.status)
    }
}
