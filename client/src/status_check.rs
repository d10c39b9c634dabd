//! After the deadline: ask the server for the key's outcome (`GET /v1/idempotency-keys/{key}`)
//! instead of paying again. A finished key gives the saved reply and ends the action; a key
//! still `started` or `unknown`, a `released` one (nothing charged, safe to resume with the same
//! key), or a server that cannot be asked, leaves the action saved for a later resume; a key the
//! server never received ends the action unpaid.
//!
//! A look-up carries the attempts' `Prefer: wait=N` too, so a key still `started` may be
//! replied `done` once its first attempt finishes within the wait.

use std::time::Duration;

use shared::api::{KeyProgress, KeyStatusResponse};
use shared::retry::{KeyState, Seen};
use shared::trace_context::TraceId;

use crate::action_result::FinalReply;
use crate::action_store::SavedAction;
use crate::clock::{Clock, within};
use crate::events::{Event, Report};
use crate::jitter::Jitter;
use crate::payments_client::PaymentsClient;
use crate::transport::{Reply, Transport};

impl<T: Transport, C: Clock, J: Jitter> PaymentsClient<T, C, J> {
    /// Look-up number `check`, in the run's `trace`: asks for the key's status and says what
    /// came back, reporting a reply that tells nothing.
    pub(crate) async fn look_up(
        &self,
        saved: &SavedAction,
        check: u32,
        prefer_wait: Option<Duration>,
        trace: TraceId,
        report: &Report,
    ) -> (Seen, Option<Reply>) {
        report(&Event::CheckingStatus { check });
        let received = within(
            &self.clock,
            self.config.attempt_timeout,
            self.transport.look_up(saved.key(), prefer_wait, trace),
        )
        .await;
        let reply = match received {
            Some(Ok(reply)) => reply,
            Some(Err(error)) => {
                report(&Event::StatusUnavailable {
                    check,
                    reason: error.to_string(),
                });
                return (Seen::Nothing, None);
            }
            None => {
                report(&Event::StatusUnavailable {
                    check,
                    reason: "no reply in time".to_owned(),
                });
                return (Seen::Nothing, None);
            }
        };
        let key_state = (reply.status == 200)
            .then(|| KeyState::from_body(&reply.body.to_string()))
            .flatten();
        match (reply.status, key_state) {
            (200, None) => report(&Event::StatusUnavailable {
                check,
                reason: "unreadable status".to_owned(),
            }),
            (200 | 401 | 404, _) => {}
            (status, _) => report(&Event::StatusUnavailable {
                check,
                reason: format!("replied {status}"),
            }),
        }
        let seen = Seen::Reply {
            status: reply.status,
            retry_after: reply.retry_after,
            key_state,
        };
        (seen, Some(reply))
    }
}

/// The saved reply a `done` key's status carries, as the final reply; `None` when the body is
/// not a finished key's status.
pub(crate) fn saved_reply(reply: &Reply) -> Option<FinalReply> {
    // The status keeps a `done` key's reply as raw JSON, which only JSON text can fill (not a
    // parsed value), so the body is read from its text.
    let status: KeyStatusResponse = serde_json::from_str(&reply.body.to_string()).ok()?;
    let KeyProgress::Done {
        status,
        reply: saved,
    } = status.progress
    else {
        return None;
    };
    Some(FinalReply {
        status,
        body: serde_json::from_str(saved.get()).ok()?,
        replayed: true,
        from_status_look_up: true,
        waited_for_first_attempt: reply.wait_applied.is_some(),
    })
}
