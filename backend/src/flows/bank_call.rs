//! The claim's work, the same for payments and refunds: one bank call under the claim's own
//! reference ([`call_bank`]), then the bank's final word and the key's state in one transaction
//! ([`save`]); or, for a call with no final word, the key left `unknown` ([`mark_unknown`]); or,
//! for a call the bank did not execute or that never got a place, the claim given back
//! ([`release`]). Which follows which is the path's (`shared::server_path`).
//!
//! From the bank call on, every failure leaves the key `started` or `unknown` for
//! reconciliation and replies "outcome pending": money may have moved, so no error is final.
//! The one exception is a call the bank port calls *not executed* (the bank said it did nothing
//! with it, or it never left): the claim is released on the spot, with no status check (the
//! rail allows none that soon, and none is needed), and the attempt told that nothing was
//! charged (SPEC §4, "Definite errors"). A gateway's 503 is not that: it may have forwarded the
//! call, which is left to reconciliation, within the rail's rules.

use std::time::{Duration, Instant};

use shared::server_path::{BankSaid, Event, ReleaseWhy, SaveEnd};
use time::OffsetDateTime;

use super::replies::saved_reply;
use super::work::{Work, out_of_order};
use crate::bank::CallOutcome;
use crate::error::Result;
use crate::metrics::Metrics;
use crate::reconcile;
use crate::store::FinalOutcome;

/// `Step::CallBank`: one call for the claimed movement, once a place among `MAX_BANK_CALLS`
/// frees within `BANK_QUEUE_WAIT_MS` (else nothing is sent: `NoPlace`). The permit is given back
/// when the call ends, before anything else: a look-up that follows never holds a money call's
/// place.
pub(super) async fn call_bank(work: &mut Work) -> Event {
    let Work {
        state,
        held,
        final_word,
        call_took,
        ..
    } = work;
    let Some(held) = held.as_mut() else {
        return out_of_order("a claim");
    };
    let Some(leave) = held.breaker_leave.take() else {
        return out_of_order("a claim");
    };
    let call = held.call();
    let (operation, name) = (call.operation(), call.name());
    let Some(permit) = state
        .bank
        .reserve_call(leave, state.limits.bank_queue_wait)
        .await
    else {
        state.metrics.bank_call(name, "busy");
        return Event::BankSaid(BankSaid::NoPlace);
    };
    let calling = Instant::now();
    let outcome = state.bank.move_money(permit, call).await;
    let took = calling.elapsed();
    *call_took = took;
    Metrics::count(&state.metrics.claims, operation.name());
    let (label, said) = match outcome {
        CallOutcome::Succeeded => {
            *final_word = Some(FinalOutcome::Succeeded);
            ("succeeded", BankSaid::Final)
        }
        CallOutcome::Declined { reason } => {
            *final_word = Some(FinalOutcome::Declined { reason });
            ("declined", BankSaid::Final)
        }
        CallOutcome::NotExecuted { reason } => {
            tracing::warn!(%reason, "the bank did not execute the call; the claim is released");
            ("not_executed", BankSaid::NotExecuted)
        }
        CallOutcome::MayBeInFlight { reason } => {
            state.metrics.outcome(operation.name(), "unknown");
            tracing::warn!(%reason, "no final word from the bank; the key goes to reconciliation");
            ("unknown", BankSaid::MayBeInFlight)
        }
    };
    state.metrics.bank_call_took(name, label, took);
    Event::BankSaid(said)
}

/// `Step::Save`: writes the bank's final word and renders it as the first reply, remembered
/// for replays.
pub(super) async fn save(work: &mut Work) -> Result<Event> {
    let (Some(held), Some(result)) = (work.held.as_ref(), work.final_word.take()) else {
        return Ok(out_of_order("a claim"));
    };
    let (state, key) = (&work.state, work.key.clone());
    let operation = held.movement.operation();
    let label = match result {
        FinalOutcome::Succeeded => "succeeded",
        FinalOutcome::Declined { .. } => "declined",
    };
    let writing = Instant::now();
    let finished = state
        .claims()
        .finish(
            key.clone(),
            operation,
            held.movement.id(),
            &result,
            &work.cause,
        )
        .await;
    state.metrics.write_took("finish", writing.elapsed());
    let end = match finished {
        Ok(Some(finished)) => {
            state.metrics.outcome(operation.name(), label);
            let reply = saved_reply(&finished.movement)?;
            if let Some(stored) = &finished.key {
                state.replay_cache.remember(key, stored, &reply);
            }
            work.parts.rendered = Some(reply);
            SaveEnd::Saved
        }
        Ok(None) => {
            tracing::error!("the movement vanished before its outcome was saved");
            SaveEnd::MovementVanished
        }
        Err(error) => {
            tracing::error!(%error, "could not save the bank's outcome; reconciliation will");
            // The key is marked `unknown` next, with its first check due at once.
            work.call_took = Duration::ZERO;
            SaveEnd::Failed
        }
    };
    Ok(Event::SaveEnded(end))
}

/// `Step::MarkUnknown`: the key goes `unknown`, due for its first status check when the rail
/// allows one. If the database is away this fails too: the key stays `started`, and the
/// reconciler takes it when the claim's lease lapses.
pub(super) async fn mark_unknown(work: &mut Work) -> Event {
    let Some(held) = work.held.as_ref() else {
        return out_of_order("a claim");
    };
    let first_check = reconcile::first_check_in(&work.state, work.call_took);
    let marked = work
        .state
        .claims()
        .mark_unknown(
            work.key.clone(),
            held.this_claim(),
            first_check,
            &work.cause,
        )
        .await;
    match marked {
        // `false`: the key is no longer this claim's (a reconciler took it); it is being
        // checked all the same.
        Ok(_) => Event::MarkedUnknown(Some(OffsetDateTime::now_utc() + first_check)),
        Err(error) => {
            tracing::error!(%error, "could not mark the key unknown; it stays started");
            Event::MarkedUnknown(None)
        }
    }
}

/// `Step::Release`: nothing moved and nothing of the call is on its way (the bank did not
/// execute it, or it was never sent), so the claim is given back now, with no status check;
/// the client's retry calls the bank again under the same reference.
pub(super) async fn release(work: &mut Work, why: ReleaseWhy) -> Event {
    let Some(held) = work.held.as_ref() else {
        return out_of_order("a claim");
    };
    let stuck_after = work.state.policy.stuck_after;
    let released = work
        .state
        .claims()
        .release_unsent(
            work.key.clone(),
            held.this_claim(),
            stuck_after,
            &work.cause,
        )
        .await;
    match released {
        Ok(()) => Event::Released(true),
        Err(error) => {
            tracing::warn!(%error, ?why, "could not release the claim; reconciliation will");
            Event::Released(false)
        }
    }
}
