//! What the phone prints: the saved actions, and each action's outcome with its exit code.

use client::{ActionResult, Completion, SavedAction, Unsettled};
use shared::Problem;

/// Exit code: the server's final answer was a refusal or a decline.
const REFUSED: u8 = 3;
/// Exit code: the server never received the action; nothing was charged.
const NOT_RECEIVED: u8 = 4;
/// Exit code: the outcome is not settled yet; the action is kept. The highest, so that `resume`
/// (which exits with the highest code of its actions) says so if any action is still open.
const UNSETTLED: u8 = 5;

/// Lists saved actions, oldest first.
pub fn pending(actions: &[SavedAction]) {
    if actions.is_empty() {
        println!("no pending actions");
        return;
    }
    println!(
        "{:<36}  {:<8}  {:<20}  {:<14}  request",
        "key", "user", "started", "operation"
    );
    for saved in actions {
        let action = saved.action();
        println!(
            "{:<36}  {:<8}  {:<20}  {:<14}  {} {}",
            saved.key(),
            saved.user(),
            saved
                .started_at()
                .replace_nanosecond(0)
                .unwrap_or(saved.started_at())
                .format(&time::format_description::well_known::Rfc3339)
                .unwrap_or_default(),
            action.operation().name(),
            action.path(),
            String::from_utf8_lossy(action.body()),
        );
    }
}

/// Prints an outcome on stdout and returns its exit code.
pub fn outcome(completion: &Completion) -> u8 {
    let key = &completion.key;
    match &completion.outcome {
        ActionResult::Answered(answer) => {
            let how = match (
                answer.from_status_look_up,
                answer.waited_for_first_attempt,
                answer.replayed,
            ) {
                (true, _, _) => " (from the status look-up)",
                (false, true, _) => " (the first attempt's answer, after waiting for it)",
                (false, false, true) => " (replayed)",
                (false, false, false) => "",
            };
            let verdict = match answer.status {
                200..=299 => "done",
                402 => "declined by the bank",
                _ => "refused",
            };
            println!(
                "{key}: {verdict}, {}{how} after {} attempt(s)\n{}",
                answer.status,
                completion.attempts,
                serde_json::to_string_pretty(&answer.body).unwrap_or_default()
            );
            if answer.succeeded() { 0 } else { REFUSED }
        }
        ActionResult::Unsettled(why) => {
            let reason = match why {
                Unsettled::Started => "the server is still working on it",
                Unsettled::Unknown => "the server is asking the bank what happened",
                Unsettled::Unreachable => "the server could not be asked",
                Unsettled::Released => {
                    "the bank never received it and nothing was charged; resume to send it again"
                }
                _ => "its outcome is not known yet",
            };
            println!(
                "{key}: not settled yet ({reason}). You will not be charged twice; \
                 run `phone resume` later to learn the outcome."
            );
            UNSETTLED
        }
        ActionResult::NotReceived => {
            println!(
                "{key}: the server never received this action; nothing was charged. \
                 Pay again if you still want to (that is a new action)."
            );
            NOT_RECEIVED
        }
        ActionResult::SignInRequired => {
            println!(
                "{key}: the server refused the token. Sign in again and run `phone resume`: \
                 an earlier attempt may have gone through, so do not pay afresh."
            );
            UNSETTLED
        }
    }
}

/// A request the phone refuses to send, as an error naming the field.
pub fn refused(problem: Problem) -> anyhow::Error {
    let field = problem.field.as_deref().unwrap_or("request");
    anyhow::anyhow!(
        "{field}: {}",
        problem.detail.as_deref().unwrap_or(&problem.title)
    )
}
