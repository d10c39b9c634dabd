//! What the phone prints: the saved actions, and each action's outcome with its exit code, as
//! sentences for a person or (`--json`) one JSON object per line for a program.

use payments_client::{ActionResult, Completion, KnownBy, SavedAction, Unsettled};
use serde_json::{Value, json};
use shared::Problem;
use time::format_description::well_known::Rfc3339;

/// Exit code: the server's final reply was a refusal or a decline.
pub const REFUSED: u8 = 3;
/// Exit code: the server never received the action; nothing was charged.
pub const NOT_RECEIVED: u8 = 4;
/// Exit code: the outcome is not settled yet; the action is kept. The highest, so that `resume`
/// (which exits with the highest code of its actions) says so if any action is still open.
pub const UNSETTLED: u8 = 5;

/// The exit codes, for `--help`.
pub const EXIT_CODES: &str = "Exit codes:
  0  paid or refunded (or nothing to do)
  1  an error of the phone itself (the store, the network set-up, a missing identity)
  2  a usage error (a flag missing or malformed)
  3  a final refusal or a bank decline (nothing to retry: the same request is refused again)
  4  never received: the server has no record of the action, nothing was charged
  5  not settled yet: the action is kept; `phone resume` later learns its outcome
     (`resume` exits with the highest code of its actions)";

/// How the phone prints.
#[derive(Debug, Clone, Copy)]
pub enum Format {
    /// Sentences.
    Text,
    /// One JSON object per line (`--json`).
    Json,
}

/// Lists saved actions, oldest first.
pub fn pending(actions: &[SavedAction], format: Format) {
    if let Format::Json = format {
        let listed: Vec<Value> = actions.iter().map(saved_json).collect();
        println!("{}", json!({ "pending": listed }));
        return;
    }
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
            started_at(saved),
            action.operation().name(),
            action.path(),
            String::from_utf8_lossy(action.body()),
        );
    }
}

fn started_at(saved: &SavedAction) -> String {
    saved
        .started_at()
        .replace_nanosecond(0)
        .unwrap_or(saved.started_at())
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

fn saved_json(saved: &SavedAction) -> Value {
    let action = saved.action();
    json!({
        "key": saved.key().to_string(),
        "user": saved.user().as_str(),
        "started_at": started_at(saved),
        "operation": action.operation().name(),
        "path": action.path(),
        "body": String::from_utf8_lossy(action.body()),
    })
}

/// Prints an outcome on stdout and returns its exit code.
pub fn result(completion: &Completion, format: Format) -> u8 {
    let (word, code) = verdict(&completion.result);
    match format {
        Format::Text => println!("{}", sentence(completion)),
        Format::Json => {
            let mut line = json!({
                "key": completion.key.to_string(),
                "result": word,
                "attempts": completion.attempts,
                "exit_code": code,
            });
            match &completion.result {
                ActionResult::Replied(reply) => {
                    line["status"] = json!(reply.status);
                    line["body"] = reply.body.clone();
                    line["replayed"] = json!(reply.replayed);
                    line["from_status_look_up"] = json!(reply.from_status_look_up);
                    line["waited_for_first_attempt"] = json!(reply.waited_for_first_attempt);
                }
                ActionResult::Unsettled(why) => {
                    line["why"] = json!(unsettled_word(*why));
                    line["known_by"] = known_by_fields(completion.known_by);
                }
                _ => {}
            }
            println!("{line}");
        }
    }
    code
}

/// The outcome's one word (as the TypeScript client names its results) and exit code.
fn verdict(result: &ActionResult) -> (&'static str, u8) {
    match result {
        ActionResult::Replied(reply) if reply.succeeded() => ("paid", 0),
        ActionResult::Replied(reply) if reply.status == 402 => ("declined", REFUSED),
        ActionResult::Replied(_) => ("refused", REFUSED),
        ActionResult::NotReceived => ("not_received", NOT_RECEIVED),
        ActionResult::SignInRequired => ("sign_in_required", UNSETTLED),
        // Unsettled, and whatever a later version of the library adds: kept, ask later.
        _ => ("pending", UNSETTLED),
    }
}

fn unsettled_word(why: Unsettled) -> &'static str {
    match why {
        Unsettled::Started => "started",
        Unsettled::Unknown => "unknown",
        Unsettled::Unreachable => "unreachable",
        Unsettled::Released => "released",
        _ => "not_known",
    }
}

fn sentence(completion: &Completion) -> String {
    let key = &completion.key;
    match &completion.result {
        ActionResult::Replied(reply) => {
            let how = match (
                reply.from_status_look_up,
                reply.waited_for_first_attempt,
                reply.replayed,
            ) {
                (true, _, _) => " (from the status look-up)",
                (false, true, _) => " (the first attempt's reply, after waiting for it)",
                (false, false, true) => " (replayed)",
                (false, false, false) => "",
            };
            let verdict = match reply.status {
                200..=299 => "done",
                402 => "declined by the bank",
                _ => "refused",
            };
            format!(
                "{key}: {verdict}, {}{how} after {} attempt(s)\n{}",
                reply.status,
                completion.attempts,
                serde_json::to_string_pretty(&reply.body).unwrap_or_default()
            )
        }
        ActionResult::NotReceived => format!(
            "{key}: the server never received this action; nothing was charged. \
             Pay again if you still want to (that is a new action)."
        ),
        ActionResult::SignInRequired => format!(
            "{key}: the server refused the token. Sign in again and run `phone resume`: \
             an earlier attempt may have gone through, so do not pay afresh."
        ),
        unsettled => {
            let reason = match unsettled {
                ActionResult::Unsettled(Unsettled::Started) => "the server is still working on it",
                ActionResult::Unsettled(Unsettled::Unknown) => {
                    "the server is asking the bank what happened"
                }
                ActionResult::Unsettled(Unsettled::Unreachable) => "the server could not be asked",
                ActionResult::Unsettled(Unsettled::Released) => {
                    "the bank never received it and nothing was charged; resume to send it again"
                }
                _ => "its outcome is not known yet",
            };
            let known_by = match completion.known_by {
                Some(KnownBy::NextStatusCheck(at)) => {
                    format!(" The bank is asked again at {}.", rfc3339(at))
                }
                Some(KnownBy::Settlement(at)) => {
                    format!(
                        " The bank's settlement file, due at {}, will say.",
                        rfc3339(at)
                    )
                }
                None => String::new(),
            };
            format!(
                "{key}: not settled yet ({reason}).{known_by} You will not be charged twice; \
                 run `phone resume` later to learn the outcome."
            )
        }
    }
}

/// The time a JSON line names for an unsettled outcome, in RFC 3339.
fn known_by_fields(known_by: Option<KnownBy>) -> serde_json::Value {
    match known_by {
        Some(KnownBy::NextStatusCheck(at)) => json!({"next_check_at": rfc3339(at)}),
        Some(KnownBy::Settlement(at)) => json!({"settlement_due_at": rfc3339(at)}),
        None => json!({}),
    }
}

fn rfc3339(at: time::OffsetDateTime) -> String {
    at.format(&Rfc3339).unwrap_or_default()
}

/// A request the phone refuses to send, as an error naming the field.
pub fn refused(problem: Problem) -> anyhow::Error {
    let field = problem.field.as_deref().unwrap_or("request");
    anyhow::anyhow!(
        "{field}: {}",
        problem.detail.as_deref().unwrap_or(&problem.title)
    )
}
