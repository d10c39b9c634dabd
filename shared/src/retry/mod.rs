//! The client's half of the contract (SPEC §6), as code any client can run, natively or in Wasm.
//!
//! One user action is one [`PendingAction`]: a freshly minted key and the exact body bytes, kept
//! together and saved before the first send, then sent unchanged on every retry. Retries are paced
//! by [`RetrySchedule`] (exponential backoff with full jitter, a cap, `Retry-After` honoured) and
//! stop at a deadline, after which the client asks for the outcome instead of paying again.
//! [`ActionProgress`] puts them together under [`ClientRules`]: the whole client behaviour as a
//! pure state machine, exported as test vectors (`shared/vectors/client-rules.json`) that every
//! client runs.

mod pending;
mod progress;
mod rules;
mod schedule;

pub use pending::PendingAction;
pub use progress::{
    ActionProgress, Ending, KeyState, LONGEST_RETRY_AFTER_SECONDS, Next, Seen, Unsettled,
    parse_retry_after,
};
pub use rules::{ClientRules, PREFER_WAIT_MARGIN};
pub use schedule::{NextStep, ReplyClass, RetrySchedule, classify_status, random_unit};
