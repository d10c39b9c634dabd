//! A request's path carried out, for [`pay_bill`] and [`refund_payment`] alike: the pure
//! [`ServerPath`] in `shared` says every step, and this module does each one (through the step
//! modules, which share a `Work`) and feeds back what came of it. No rule of
//! the path is written here: which step follows which is the state machine's, and its test
//! vectors (`shared/vectors/server-path.json`) walk every path.
//!
//! The steps before admission and the replays from memory run in the request's own future: they
//! write nothing. From the first claim or read on, the steps run in *rounds*, each in a task of
//! its own ([`run_to_completion`]), so a client that hangs up never cuts claimed work short (the
//! bank call and its save). A round ends where the machine says to wait or to reply. The wait
//! happens in the request's future (a client that hangs up drops it at once), with a watch on
//! the key taken before the round read it, so a change committed in between still wakes it.

use shared::server_path::{Ending, Event, ServerPath, Step};
use shared::{Operation, Policy};
use tracing::Instrument;

use super::memory::{Memory, Submitted};
use super::replies::ReplyParts;
use super::waiting::Waiting;
use super::work::Work;
use super::{Caller, bank_call, claim, stored_key};
use crate::domain::{EventKind, Reply};
use crate::error::{Error, Result};
use crate::metrics::Metrics;
use crate::state::AppState;

/// Pays `bill_id` for the caller once per key; a repeat of a key still in progress waits up to
/// the caller's wait for its reply (`Prefer: wait`).
#[tracing::instrument(skip_all, fields(user_id = %caller.user, bill_id = bill.path_parameter, key))]
pub async fn pay_bill(state: &AppState, caller: &Caller, bill: Submitted<'_>) -> Result<Reply> {
    carry_out(state, caller, Operation::PayBill, bill).await
}

/// Refunds part of `payment_id` for the caller once per key; a repeat of a key still in
/// progress waits up to the caller's wait for its reply (`Prefer: wait`).
#[tracing::instrument(skip_all, fields(user_id = %caller.user, payment_id = refund.path_parameter, key))]
pub async fn refund_payment(
    state: &AppState,
    caller: &Caller,
    refund: Submitted<'_>,
) -> Result<Reply> {
    carry_out(state, caller, Operation::RefundPayment, refund).await
}

/// Carries out `operation` for `caller` on the `submitted` request, step by step as
/// [`ServerPath`] says, to its reply.
async fn carry_out(
    state: &AppState,
    caller: &Caller,
    operation: Operation,
    submitted: Submitted<'_>,
) -> Result<Reply> {
    let policy = &state.policy;
    let mut path = ServerPath::new(caller.wait.is_some());
    let mut memory = Memory::new(state, caller, operation, &submitted);
    let mut step = next(&mut path, policy, Event::Arrived);
    let mut parts = ReplyParts::default();
    // Before any write: admission and the replay cache.
    let first_round = loop {
        let event = match step {
            Step::RecallSameBytes => memory.recall_same_bytes(),
            Step::Admit => memory.admit(&mut parts),
            Step::Recall => memory.recall(&mut parts),
            Step::Forget => memory.forget(),
            Step::ReplayFromMemory => memory.replay(&mut parts),
            Step::Reply(ending) => return Ok(memory.reply(ending, &path, parts)),
            round_step => break round_step,
        };
        step = next(&mut path, policy, event);
    };
    let Some(work) = memory.into_work(parts) else {
        return Err(Error::PathGaveUp);
    };
    in_rounds(state, caller.wait, (path, work), first_round).await
}

/// The rounds of an admitted request, from `step` (its first claim) to its reply, with waits
/// between them while the key is at work and the request may wait.
async fn in_rounds(
    state: &AppState,
    wait: Option<std::time::Duration>,
    (mut path, mut work): (ServerPath, Work),
    mut step: Step,
) -> Result<Reply> {
    let mut waiting = Waiting::new(state, wait);
    let mut watch = None;
    loop {
        step = match step {
            Step::Reply(ending) => return Ok(ended(state, &path, work, waiting, ending)),
            Step::GiveUp => return Err(Error::PathGaveUp),
            Step::Wait => {
                let waited = match watch.as_mut() {
                    Some(watch) => waiting.wait(work.key.clone(), watch, &work.cause).await,
                    None => false,
                };
                next(&mut path, &state.policy, Event::Waited(waited))
            }
            round_step => {
                watch = waiting.watch(work.key.clone());
                let round = run_to_completion(round(path, work, round_step));
                (path, work, step) = round.await?;
                step
            }
        };
    }
}

/// One round: the steps from a claim or a read until the machine says to wait or to reply.
async fn round(
    mut path: ServerPath,
    mut work: Work,
    mut step: Step,
) -> Result<(ServerPath, Work, Step)> {
    loop {
        let event = match step {
            Step::Claim => claim::claim(&mut work).await?,
            Step::Read => claim::read(&mut work).await?,
            Step::Reclaim => claim::reclaim(&mut work).await?,
            Step::CallBank => bank_call::call_bank(&mut work).await,
            Step::Save => bank_call::save(&mut work).await?,
            Step::MarkUnknown => bank_call::mark_unknown(&mut work).await,
            Step::Release(why) => bank_call::release(&mut work, why).await,
            Step::ReplayFromDatabase => stored_key::replay(&mut work).await?,
            Step::AskBank => stored_key::ask_bank(&mut work).await?,
            Step::DeleteExpired => stored_key::delete_expired(&mut work).await?,
            Step::Wait | Step::Reply(_) | Step::GiveUp => return Ok((path, work, step)),
            // Steps of the memory phase: the machine never gives them after a claim.
            Step::RecallSameBytes
            | Step::Admit
            | Step::Recall
            | Step::Forget
            | Step::ReplayFromMemory => return Ok((path, work, Step::GiveUp)),
        };
        step = next(&mut path, &work.state.policy, event);
    }
}

/// The machine's next step after `event`, logged at debug level as the vectors label it
/// (`RUST_LOG=backend::flows=debug` shows each request's path; the flows' tests read it).
fn next(path: &mut ServerPath, policy: &Policy, event: Event) -> Step {
    let step = path.next(policy, event);
    tracing::debug!(step = %step.label(), "the path's next step");
    step
}

/// The request's reply for `ending`, counted, and marked with the wait it was given.
fn ended(
    state: &AppState,
    path: &ServerPath,
    mut work: Work,
    waiting: Waiting<'_>,
    ending: Ending,
) -> Reply {
    let at_work = ending == Ending::InProgress;
    if at_work {
        Metrics::count(&state.metrics.conflicts, work.operation().name());
        let detail = if waiting.has_waited() {
            "waited as long as allowed; the first attempt was still running (409)"
        } else {
            "the first attempt was still running (409)"
        };
        let refused = (EventKind::InProgressRefused, detail);
        state
            .trail
            .observe_key(work.key.clone(), None, refused, &work.cause);
    }
    let reply = work.reply(ending, path);
    waiting.ended(reply, at_work)
}

/// Runs the claimed work in its own task, so that a client giving up (a phone's timeout closes
/// the connection, and the server drops the request's future) cannot cut it off between the
/// bank call and the save. The client's retry then finds the saved reply instead of a key
/// left `started` until reconciliation. The work stays in the request's span (and trace).
async fn run_to_completion<T: Send + 'static>(
    work: impl Future<Output = Result<T>> + Send + 'static,
) -> Result<T> {
    tokio::spawn(work.in_current_span())
        .await
        .unwrap_or_else(|aborted| Err(Error::WorkAborted(aborted.to_string())))
}
