//! [`Bank`]: the partner bank as the flows and the reconciler use it, the [`BankPort`] behind
//! its bounds and its circuit breaker.
//!
//! - **Two bounds, never nested.** Money-moving calls hold a [`CallPermit`] (of
//!   `MAX_BANK_CALLS`) for the call alone: [`Bank::move_money`] takes the permit and gives it
//!   back when the call ends, so a look-up that follows runs without it. Look-ups have a bound
//!   of their own (`MAX_BANK_LOOKUPS`), so neither kind can starve the other, and every wait for
//!   capacity has a deadline: a money call waits `BANK_QUEUE_WAIT_MS` (then nothing is sent), a
//!   look-up the bank timeout (then it failed, and is tried again later). No permit is ever held
//!   while waiting for another, which is what once let a short outage stop every bank call
//!   until restart.
//! - **The breaker** ([`super::breaker`]): a new bank call is admitted ([`Bank::admit`]) before
//!   its claim, so while the bank is failing a new payment is refused with nothing claimed and
//!   nothing sent; every money-moving call's end is recorded in it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use shared::Operation;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::breaker::{
    BankBreaker, BreakerSettings, BreakerState, CallResult, CallTicket, Transition,
};
use super::port::{BankPort, CallOutcome, LookUp, LookUpError, MoneyCall};
use crate::metrics::Metrics;

/// How much of the bank this process may use at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BankBounds {
    /// Money-moving calls in flight at once (`MAX_BANK_CALLS`).
    pub money_calls: usize,
    /// Look-ups in flight at once (`MAX_BANK_LOOKUPS`).
    pub look_ups: usize,
    /// How long a look-up waits for a free place before it fails (the bank's timeout).
    pub look_up_wait: Duration,
}

/// The bank, bounded and watched by the breaker; one per process, shared by every request and
/// worker.
pub struct Bank {
    port: Arc<dyn BankPort>,
    bounds: BankBounds,
    money_calls: Arc<Semaphore>,
    look_ups: Arc<Semaphore>,
    /// `None` when the breaker is turned off (`BANK_BREAKER=off`).
    breaker: Option<BankBreaker>,
    metrics: Arc<Metrics>,
}

/// Leave from the breaker to start one new bank call; dropped unused (the key was stored
/// already, say), it is given back.
#[must_use]
pub struct Admitted {
    ticket: Option<CallTicket>,
}

/// The breaker refused a new bank call: the bank is failing; come back after `retry_after`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BankUnavailable {
    /// When a call may be admitted again (a probe), at the soonest.
    pub retry_after: Duration,
}

/// Leave to make one money-moving call: a place among `MAX_BANK_CALLS` and the breaker's
/// admission, both given back when the call ends ([`Bank::move_money`] takes it).
pub struct CallPermit {
    _place: OwnedSemaphorePermit,
    admitted: Admitted,
}

impl Bank {
    /// The bank behind `port`, within `bounds`, with a breaker of `breaker` settings (`None`:
    /// no breaker), counting in `metrics`.
    pub fn new(
        port: Arc<dyn BankPort>,
        bounds: BankBounds,
        breaker: Option<BreakerSettings>,
        metrics: Arc<Metrics>,
    ) -> Bank {
        if breaker.is_some() {
            metrics
                .bank_breaker_state
                .set(BreakerState::Closed.gauge_value());
        }
        Bank {
            port,
            money_calls: Arc::new(Semaphore::new(bounds.money_calls)),
            look_ups: Arc::new(Semaphore::new(bounds.look_ups)),
            bounds,
            breaker: breaker.map(BankBreaker::new),
            metrics,
        }
    }

    /// Money-moving calls in flight now.
    pub fn calls_in_flight(&self) -> usize {
        let free = self.money_calls.available_permits();
        self.bounds.money_calls.saturating_sub(free)
    }

    /// Look-ups in flight now.
    pub fn look_ups_in_flight(&self) -> usize {
        let free = self.look_ups.available_permits();
        self.bounds.look_ups.saturating_sub(free)
    }

    /// The breaker's state, as of its last admission or result; `None` without a breaker.
    pub fn breaker_state(&self) -> Option<BreakerState> {
        self.breaker.as_ref().map(BankBreaker::state)
    }

    /// The breaker's leave to start a new bank call, asked before the key is claimed; refused
    /// while the breaker is open (and, half-open, while its one probe is out).
    pub fn admit(&self) -> Result<Admitted, BankUnavailable> {
        let Some(breaker) = &self.breaker else {
            return Ok(Admitted { ticket: None });
        };
        let (admission, transition) = breaker.admit();
        self.note(transition);
        match admission {
            Ok(ticket) => Ok(Admitted {
                ticket: Some(ticket),
            }),
            Err(retry_after) => {
                self.metrics.bank_breaker_refusals.inc();
                Err(BankUnavailable { retry_after })
            }
        }
    }

    /// A place for the `admitted` call, waiting at most `wait` for a call in flight to end;
    /// `None` if none did (the bank has all the calls it may have; the admission is given back).
    pub async fn reserve_call(&self, admitted: Admitted, wait: Duration) -> Option<CallPermit> {
        let place = Arc::clone(&self.money_calls).acquire_owned();
        match tokio::time::timeout(wait, place).await {
            Ok(Ok(place)) => Some(CallPermit {
                _place: place,
                admitted,
            }),
            _ => None,
        }
    }

    /// Makes `call` under `permit`, which is given back when the call ends, and records how it
    /// ended in the breaker.
    pub async fn move_money(&self, permit: CallPermit, call: MoneyCall<'_>) -> CallOutcome {
        let started = Instant::now();
        let outcome = self.port.move_money(call).await;
        let took = started.elapsed();
        let CallPermit { _place, admitted } = permit;
        drop(_place);
        if let Some(ticket) = admitted.ticket {
            let result = if outcome.is_final() {
                CallResult::Succeeded
            } else {
                CallResult::Failed
            };
            self.note(ticket.finish(result, took));
        }
        outcome
    }

    /// Asks what became of `reference`, within `MAX_BANK_LOOKUPS`: failed if no place frees
    /// within the look-up wait (the caller tries again later).
    pub async fn look_up(
        &self,
        operation: Operation,
        reference: &str,
    ) -> Result<LookUp, LookUpError> {
        let place = Arc::clone(&self.look_ups).acquire_owned();
        let _place = match tokio::time::timeout(self.bounds.look_up_wait, place).await {
            Ok(Ok(place)) => place,
            _ => return Err(LookUpError("every look-up place is taken".to_owned())),
        };
        self.port.look_up(operation, reference).await
    }

    /// Logs and counts a change of the breaker's state.
    fn note(&self, transition: Option<Transition>) {
        let Some(Transition { from, to }) = transition else {
            return;
        };
        self.metrics.bank_breaker_state.set(to.gauge_value());
        let labels = crate::metrics::BreakerLabels { to: to.as_str() };
        self.metrics
            .bank_breaker_transitions
            .get_or_create(&labels)
            .inc();
        match to {
            BreakerState::Open => {
                tracing::error!(
                    from = from.as_str(),
                    "bank breaker open: new payments are refused"
                )
            }
            BreakerState::HalfOpen | BreakerState::Closed => {
                tracing::warn!(
                    from = from.as_str(),
                    to = to.as_str(),
                    "bank breaker changed"
                )
            }
        }
    }
}
