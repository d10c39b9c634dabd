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

    /// How long after its start a money call may still reach the bank: the bank timeout, after
    /// which the caller stops waiting (the same bound a look-up waits for its place). The
    /// rail's status checks count from then, so none is early however slow the call's way.
    pub fn calls_land_within(&self) -> Duration {
        self.bounds.look_up_wait
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
        if let Some(ticket) = &permit.admitted.ticket {
            ticket.sending();
        }
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
            _ => {
                return Err(LookUpError::Failed(
                    "every look-up place is taken".to_owned(),
                ));
            }
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use async_trait::async_trait;
    use tokio::sync::Semaphore as Gate;

    use super::*;

    /// A bank whose calls and look-ups each wait at a gate the test opens, then reply "not
    /// executed" and "never seen".
    struct GatedBank {
        calls: Gate,
        look_ups: Gate,
        calls_made: AtomicUsize,
    }

    impl GatedBank {
        fn shut() -> Arc<GatedBank> {
            Arc::new(GatedBank {
                calls: Gate::new(0),
                look_ups: Gate::new(0),
                calls_made: AtomicUsize::new(0),
            })
        }
    }

    #[async_trait]
    impl BankPort for GatedBank {
        async fn move_money(&self, _call: MoneyCall<'_>) -> CallOutcome {
            self.calls_made.fetch_add(1, Ordering::SeqCst);
            drop(self.calls.acquire().await);
            CallOutcome::NotExecuted {
                reason: "the test's bank".to_owned(),
            }
        }

        async fn look_up(&self, _: Operation, _: &str) -> Result<LookUp, LookUpError> {
            drop(self.look_ups.acquire().await);
            Ok(LookUp::NeverSeen)
        }
    }

    const CALL: MoneyCall<'static> = MoneyCall::Debit {
        reference: "pay-1",
        amount_paise: 100,
        account: "asha@okbank",
    };

    fn bank(port: &Arc<GatedBank>, breaker: Option<BreakerSettings>) -> Arc<Bank> {
        let bounds = BankBounds {
            money_calls: 1,
            look_ups: 1,
            look_up_wait: Duration::from_millis(50),
        };
        let port = Arc::clone(port) as Arc<dyn BankPort>;
        Arc::new(Bank::new(port, bounds, breaker, Arc::new(Metrics::new())))
    }

    async fn permit(bank: &Bank) -> Option<CallPermit> {
        let admitted = bank.admit().expect("admitted");
        bank.reserve_call(admitted, Duration::from_millis(50)).await
    }

    #[tokio::test]
    async fn a_look_up_never_waits_for_a_money_calls_place() {
        let port = GatedBank::shut();
        let bank = bank(&port, None);
        let held = permit(&bank).await.expect("the one place");
        let calling = tokio::spawn({
            let bank = Arc::clone(&bank);
            async move { bank.move_money(held, CALL).await }
        });
        assert!(
            permit(&bank).await.is_none(),
            "the money call holds the place"
        );
        port.look_ups.add_permits(1);
        let looked_up = bank.look_up(Operation::PayBill, "pay-1").await;
        assert_eq!(looked_up.expect("asked"), LookUp::NeverSeen);
        port.calls.add_permits(1);
        calling.await.expect("the call ended");
        assert!(
            permit(&bank).await.is_some(),
            "given back when the call ended"
        );
    }

    #[tokio::test]
    async fn a_look_up_without_a_place_fails_after_its_wait_instead_of_queueing_for_ever() {
        let port = GatedBank::shut();
        let bank = bank(&port, None);
        let first = tokio::spawn({
            let bank = Arc::clone(&bank);
            async move { bank.look_up(Operation::PayBill, "pay-1").await }
        });
        while bank.look_ups_in_flight() == 0 {
            tokio::task::yield_now().await;
        }
        let second = bank.look_up(Operation::PayBill, "pay-2").await;
        assert!(second.is_err(), "no place within the wait: {second:?}");
        port.look_ups.add_permits(1);
        assert!(first.await.expect("ran").is_ok());
    }

    #[tokio::test]
    async fn calls_without_a_final_reply_open_the_breaker_and_new_calls_are_refused() {
        let port = GatedBank::shut();
        port.calls.add_permits(10);
        let breaker = BreakerSettings {
            min_calls: 2,
            ..BreakerSettings::default()
        };
        let bank = bank(&port, Some(breaker));
        for _ in 0..2 {
            let held = permit(&bank).await.expect("a place");
            let outcome = bank.move_money(held, CALL).await;
            assert!(!outcome.is_final());
        }
        let refused = bank.admit().err().expect("the breaker is open");
        assert!(refused.retry_after >= Duration::from_secs(1));
        assert_eq!(bank.breaker_state(), Some(BreakerState::Open));
        assert_eq!(bank.metrics.bank_breaker_refusals.get(), 1);
        assert_eq!(
            port.calls_made.load(Ordering::SeqCst),
            2,
            "nothing sent since"
        );
    }
}
