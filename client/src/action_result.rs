//! How an action ended, as far as this client can tell. Only [`ActionResult::Replied`] and
//! [`ActionResult::NotReceived`] end the action; the others keep it saved, because money may have
//! moved and a later resume must ask about the same key rather than pay again.

use serde_json::Value;
use shared::IdempotencyKey;
pub use shared::retry::Unsettled;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// The end of one run of an action.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// The action's key.
    pub key: IdempotencyKey,
    /// Attempts sent in this run (status look-ups not counted).
    pub attempts: u32,
    /// What became of it.
    pub result: ActionResult,
    /// For an unsettled action, when the server expects to know its outcome, as its last reply
    /// said: what a status screen shows as "we will know by …".
    pub known_by: Option<KnownBy>,
}

/// When the server expects to know an unsettled action's outcome (SPEC §4: an
/// `outcome-pending` problem and an `unknown` key's status name `next_check_at`; an
/// `outcome-awaiting-settlement` problem and the key's status name `settlement_due_at`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KnownBy {
    /// The rail's rules let the bank be asked about it then.
    NextStatusCheck(OffsetDateTime),
    /// Every status check the rail allows was made; the bank's settlement file, due then, says.
    Settlement(OffsetDateTime),
}

impl KnownBy {
    /// What a reply's body (a problem or a key status) names, the settlement first; `None`
    /// when it names neither or a time that does not parse.
    pub fn named_in(body: &Value) -> Option<KnownBy> {
        let time_of = |field: &str| {
            let text = body.get(field)?.as_str()?;
            OffsetDateTime::parse(text, &Rfc3339).ok()
        };
        time_of("settlement_due_at")
            .map(KnownBy::Settlement)
            .or_else(|| time_of("next_check_at").map(KnownBy::NextStatusCheck))
    }
}

/// What became of an action.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ActionResult {
    /// The server's final reply: 2xx, a 402 decline, or another 4xx. The action is over and
    /// deleted from the store.
    Replied(FinalReply),
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

/// A final reply from the server.
#[derive(Debug, Clone, PartialEq)]
pub struct FinalReply {
    /// The status: 201, 402, or another final code.
    pub status: u16,
    /// The body: the payment or refund, or a problem.
    pub body: Value,
    /// Whether it was a replay of a reply the server had saved.
    pub replayed: bool,
    /// Whether it came from the status look-up after the deadline rather than an attempt.
    pub from_status_look_up: bool,
    /// Whether the server held the request until the key's first attempt finished and replied
    /// with that attempt's reply (`Prefer: wait` honoured, `Preference-Applied` sent).
    pub waited_for_first_attempt: bool,
}

impl FinalReply {
    /// Whether the action succeeded (2xx).
    pub fn succeeded(&self) -> bool {
        (200..300).contains(&self.status)
    }
}
