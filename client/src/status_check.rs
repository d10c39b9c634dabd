//! After the deadline: ask the server for the key's outcome (`GET /v1/idempotency-keys/{key}`)
//! instead of paying again. A finished key gives the saved answer and ends the action; a key
//! still `started` or `unknown`, a `released` one (nothing charged, safe to resume with the same
//! key), or a server that cannot be asked, leaves the action saved for a later resume; a key the
//! server never received ends the action unpaid.
//!
//! A look-up carries the attempts' `Prefer: wait=N` too, so a key still `started` may be
//! answered `done` once its first attempt finishes within the wait.

use std::time::Duration;

use serde_json::Value;
use shared::api::{KeyProgress, KeyStatusResponse};

use crate::action_result::{ActionResult, Completion, FinalReply, Unsettled};
use crate::action_store::SavedAction;
use crate::clock::{Clock, within};
use crate::events::{Event, Report};
use crate::jitter::Jitter;
use crate::payments_client::PaymentsClient;
use crate::transport::{Reply, Transport};

/// What one look-up said.
enum LookedUp {
    /// The outcome is settled (or will not be learned by asking again now).
    Settled(ActionResult),
    /// No usable answer; ask again after `Retry-After`, if given.
    AskAgain(Option<Duration>),
}

impl<T: Transport, C: Clock, J: Jitter> PaymentsClient<T, C, J> {
    /// Looks the key up, a bounded number of times, and ends or keeps the action accordingly.
    pub(crate) async fn check_status(
        &self,
        saved: &SavedAction,
        attempts: u32,
        report: &Report,
    ) -> Completion {
        let look_ups = self.config.status_look_ups;
        let prefer_wait = self.config.wait_to_ask();
        for check in 1..=look_ups {
            report(&Event::CheckingStatus { check });
            let answer = within(
                &self.clock,
                self.config.attempt_timeout,
                self.transport.look_up(saved.key(), prefer_wait),
            )
            .await;
            let retry_after = match answer {
                Some(Ok(reply)) => match interpret(reply, check, report) {
                    LookedUp::Settled(ActionResult::Answered(answer)) => {
                        return self.finish(saved, attempts, answer, report).await;
                    }
                    LookedUp::Settled(ActionResult::NotReceived) => {
                        self.forget(saved, report).await;
                        return self.completion(saved, attempts, ActionResult::NotReceived);
                    }
                    LookedUp::Settled(kept) => return self.completion(saved, attempts, kept),
                    LookedUp::AskAgain(retry_after) => retry_after,
                },
                Some(Err(error)) => {
                    report(&Event::StatusUnavailable {
                        check,
                        reason: error.to_string(),
                    });
                    None
                }
                None => {
                    report(&Event::StatusUnavailable {
                        check,
                        reason: "no answer in time".to_owned(),
                    });
                    None
                }
            };
            if check < look_ups {
                let jittered = self
                    .config
                    .schedule
                    .ceiling(check)
                    .mul_f64(self.jitter.unit());
                let wait = retry_after.map_or(jittered, |floor| jittered.max(floor));
                report(&Event::Waiting { wait, retry_after });
                self.clock.sleep(wait).await;
            }
        }
        self.completion(
            saved,
            attempts,
            ActionResult::Unsettled(Unsettled::Unreachable),
        )
    }
}

fn interpret(reply: Reply, check: u32, report: &Report) -> LookedUp {
    match reply.status {
        200 => match read_key_status(&reply.body, reply.wait_applied) {
            Ok(outcome) => LookedUp::Settled(outcome),
            Err(error) => {
                report(&Event::StatusUnavailable {
                    check,
                    reason: format!("unreadable status: {error}"),
                });
                LookedUp::AskAgain(None)
            }
        },
        404 => LookedUp::Settled(ActionResult::NotReceived),
        401 => LookedUp::Settled(ActionResult::SignInRequired),
        status => {
            report(&Event::StatusUnavailable {
                check,
                reason: format!("answered {status}"),
            });
            LookedUp::AskAgain(reply.retry_after)
        }
    }
}

/// The outcome a key's status (a 200 look-up's body) tells. The status keeps a `done` key's
/// answer as raw JSON, which only JSON text can fill (not a parsed [`Value`]), so the body is
/// read from its text.
fn read_key_status(
    body: &Value,
    wait_applied: Option<Duration>,
) -> serde_json::Result<ActionResult> {
    let status: KeyStatusResponse = serde_json::from_str(&body.to_string())?;
    Ok(match status.progress {
        KeyProgress::Done { status, answer } => ActionResult::Answered(FinalReply {
            status,
            body: serde_json::from_str(answer.get())?,
            replayed: true,
            from_status_look_up: true,
            waited_for_first_attempt: wait_applied.is_some(),
        }),
        KeyProgress::Started => ActionResult::Unsettled(Unsettled::Started),
        KeyProgress::Unknown => ActionResult::Unsettled(Unsettled::Unknown),
        KeyProgress::Released => ActionResult::Unsettled(Unsettled::Released),
    })
}
