//! The simulated bank itself: shared state and what one debit or refund goes through.
//!
//! A money-moving request draws its [`RequestPlan`] on arrival, sleeps the planned latency,
//! fails with a 503 if planned (nothing recorded), then checks and records its outcome under a
//! single acquisition of the books' lock (so concurrent repeats of a reference execute once
//! while dedupe is on), and finally, if the reply is planned lost, holds it back. A caller that
//! hangs up before the decision cancels it, unless the `executes_abandoned_calls` knob is on:
//! then the decision runs in a task of its own and happens anyway, late. Locks are `std`
//! mutexes, never held across an `.await`.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bank_api::callback::CallbackBody;
use bank_api::settlement::{Settled, SettlementRow, to_csv};
use bank_api::{DebitOutcome, DebitRequest, Knobs, Ledger, RefundOutcome, RefundRequest};
use time::OffsetDateTime;
use tokio::sync::watch;

use crate::books::Books;
use crate::callbacks::CallbackTarget;
use crate::error::SimulatorError;
use crate::plan::{Behaviour, RequestPlan};
use crate::sandbox::is_always_declined;
use crate::status_checks::{CheckLog, CheckStats, CheckVerdict};

/// A simulated partner bank. Cheap to clone: clones share one ledger and one set of knobs.
#[derive(Debug, Clone)]
pub struct BankSimulator {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    behaviour: Mutex<Behaviour>,
    books: Mutex<Books>,
    /// Every call's arrival and every look-up, for the rail's rules and `GET /stats`.
    checks: Mutex<CheckLog>,
    /// Where decided calls' callbacks go; `None`: nowhere.
    callbacks: Mutex<Option<CallbackTarget>>,
    /// Set to `true` when a server of this simulator shuts down, so replies held back as
    /// "lost" are sent at once instead of delaying the shutdown by a minute.
    held_replies_let_go: watch::Sender<bool>,
}

impl BankSimulator {
    /// A bank with an empty ledger, behaving as `knobs` say (not validated: see
    /// [`Knobs::validate`]).
    pub fn new(knobs: Knobs) -> Self {
        let shared = Shared {
            behaviour: Mutex::new(Behaviour::new(knobs)),
            books: Mutex::new(Books::default()),
            checks: Mutex::new(CheckLog::default()),
            callbacks: Mutex::new(None),
            held_replies_let_go: watch::Sender::new(false),
        };
        Self {
            shared: Arc::new(shared),
        }
    }

    /// A snapshot of every executed movement.
    pub fn ledger(&self) -> Ledger {
        self.books().ledger()
    }

    /// The current knobs.
    pub fn knobs(&self) -> Knobs {
        self.behaviour().knobs().clone()
    }

    /// Waits the `lookup_latency_ms` knob: a status look-up's delay.
    pub async fn look_up_latency(&self) {
        let delay = self.knobs().lookup_latency_ms;
        if delay > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
        }
    }

    /// Replaces the knobs and re-seeds the generator from `knobs.seed`; requests arriving from
    /// now on follow them. Not validated: see [`Knobs::validate`].
    pub fn set_knobs(&self, knobs: Knobs) {
        *self.behaviour() = Behaviour::new(knobs);
    }

    /// Forgets every movement, every recorded outcome and every look-up counted (the knobs
    /// stay).
    pub fn reset(&self) {
        self.books().clear();
        self.checks().clear();
    }

    /// The settlement file of everything executed so far: each debit `debited`, each refund
    /// `refunded`, at the time it moved (`bank_api::settlement`).
    pub fn settlement_file(&self) -> String {
        let ledger = self.ledger();
        let settled = |entries: &[bank_api::LedgerEntry], status| {
            entries
                .iter()
                .map(move |entry| SettlementRow {
                    reference: entry.reference.clone(),
                    amount_paise: entry.amount_paise,
                    status,
                    settled_at: entry.at,
                })
                .collect::<Vec<_>>()
        };
        let mut rows = settled(&ledger.debits, Settled::Debited);
        rows.extend(settled(&ledger.refunds, Settled::Refunded));
        to_csv(&rows)
    }

    /// Sends every decided call's final status to `url`, signed with `secret`, as the
    /// callback knobs say (`crate::callbacks`).
    pub fn send_callbacks_to(&self, url: &str, secret: &[u8]) {
        let target = CallbackTarget {
            url: url.to_owned(),
            secret: secret.to_vec(),
            http: reqwest::Client::new(),
        };
        *self
            .shared
            .callbacks
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(target);
    }

    /// Posts the callback of a decided call, in a task of its own, if callbacks go anywhere
    /// and the plan did not lose it.
    fn call_back(&self, plan: &RequestPlan, reference: &str, amount_paise: u64, status: Settled) {
        let target = self
            .shared
            .callbacks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let Some(target) = target.filter(|_| plan.callbacks > 0) else {
            return;
        };
        let body = CallbackBody {
            reference: reference.to_owned(),
            amount_paise,
            status: status.as_str().to_owned(),
        };
        tokio::spawn(target.deliver(body, plan.callbacks, plan.callback_delay));
    }

    /// The look-ups counted so far ([`CheckStats`], `GET /stats`).
    pub fn check_stats(&self) -> CheckStats {
        self.checks().stats()
    }

    /// Counts a look-up of `reference` and says whether to reply, reply `pending` or refuse
    /// it under the rail's rules.
    pub(crate) fn admit_look_up(&self, reference: &str) -> CheckVerdict {
        let knobs = self.knobs();
        self.checks().look_up(reference, &knobs)
    }

    /// Carries out a `POST /debits`.
    #[tracing::instrument(skip_all, fields(reference = %request.reference))]
    pub(crate) async fn debit(
        &self,
        request: DebitRequest,
    ) -> Result<DebitOutcome, SimulatorError> {
        let plan = self.behaviour().plan_request();
        let (reference, amount_paise) = (request.reference.clone(), request.amount_paise);
        self.checks().call_arrived(&reference);
        let outcome = self
            .decide_after_latency(&plan, reference.clone(), move |bank, plan| {
                bank.decide_debit(&request, plan)
            })
            .await??;
        tracing::info!(
            ?outcome,
            reply_lost = plan.lost_reply_delay.is_some(),
            "debit decided"
        );
        let status = match outcome {
            DebitOutcome::Debited { .. } => Settled::Debited,
            DebitOutcome::Declined { .. } => Settled::Declined,
        };
        self.call_back(&plan, &reference, amount_paise, status);
        self.hold_reply_if_lost(&plan).await;
        Ok(outcome)
    }

    /// Carries out a `POST /refunds`.
    #[tracing::instrument(skip_all, fields(reference = %request.reference))]
    pub(crate) async fn refund(
        &self,
        request: RefundRequest,
    ) -> Result<RefundOutcome, SimulatorError> {
        let plan = self.behaviour().plan_request();
        let (reference, amount_paise) = (request.reference.clone(), request.amount_paise);
        self.checks().call_arrived(&reference);
        let outcome = self
            .decide_after_latency(&plan, reference.clone(), move |bank, plan| {
                bank.decide_refund(&request, plan)
            })
            .await??;
        tracing::info!(
            ?outcome,
            reply_lost = plan.lost_reply_delay.is_some(),
            "refund decided"
        );
        let status = match outcome {
            RefundOutcome::Refunded { .. } => Settled::Refunded,
            RefundOutcome::Rejected { .. } => Settled::Rejected,
        };
        self.call_back(&plan, &reference, amount_paise, status);
        self.hold_reply_if_lost(&plan).await;
        Ok(outcome)
    }

    /// The outcome recorded for a debit reference, if the bank ever decided it.
    pub(crate) fn debit_outcome(&self, reference: &str) -> Option<DebitOutcome> {
        self.books().debit_outcome(reference)
    }

    /// The outcome recorded for a refund reference, if the bank ever decided it.
    pub(crate) fn refund_outcome(&self, reference: &str) -> Option<RefundOutcome> {
        self.books().refund_outcome(reference)
    }

    /// Lets replies held back as lost go, now and from now on.
    pub(crate) fn let_held_replies_go(&self) {
        self.shared.held_replies_let_go.send_replace(true);
    }

    /// Waits the planned latency, fails if planned (naming the call's `reference`), then
    /// decides; in a task of its own when abandoned calls are executed, so the caller hanging up
    /// cannot cancel it.
    async fn decide_after_latency<T: Send + 'static>(
        &self,
        plan: &RequestPlan,
        reference: String,
        decide: impl FnOnce(&BankSimulator, &RequestPlan) -> T + Send + 'static,
    ) -> Result<T, SimulatorError> {
        let (bank, planned) = (self.clone(), plan.clone());
        let failed = SimulatorError::SimulatedFailure;
        let work = async move {
            tokio::time::sleep(planned.latency).await;
            if planned.fail {
                tracing::info!("simulated failure");
                return Err(failed(reference));
            }
            Ok(decide(&bank, &planned))
        };
        if !plan.executes_abandoned {
            return work.await;
        }
        tokio::spawn(work).await.unwrap_or_else(|aborted| {
            tracing::error!(%aborted, "a decision's task ended without deciding");
            Err(SimulatorError::SimulatedFailure(String::new()))
        })
    }

    /// Replays or records the debit's outcome under one lock acquisition.
    fn decide_debit(
        &self,
        request: &DebitRequest,
        plan: &RequestPlan,
    ) -> Result<DebitOutcome, SimulatorError> {
        let mut books = self.books();
        if plan.dedupe
            && let Some(first) = books.debit_outcome(&request.reference)
        {
            return replay_or_refuse(first, plan, &request.reference);
        }
        Ok(if plan.decline || is_always_declined(&request.account) {
            books.decline_debit(request)
        } else {
            books.execute_debit(request, OffsetDateTime::now_utc())
        })
    }

    /// Replays or records the refund's outcome under one lock acquisition.
    fn decide_refund(
        &self,
        request: &RefundRequest,
        plan: &RequestPlan,
    ) -> Result<RefundOutcome, SimulatorError> {
        let mut books = self.books();
        if plan.dedupe
            && let Some(first) = books.refund_outcome(&request.reference)
        {
            return replay_or_refuse(first, plan, &request.reference);
        }
        Ok(books.execute_refund(request, OffsetDateTime::now_utc()))
    }

    async fn hold_reply_if_lost(&self, plan: &RequestPlan) {
        let Some(delay) = plan.lost_reply_delay else {
            return;
        };
        let mut let_go = self.shared.held_replies_let_go.subscribe();
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            _ = let_go.wait_for(|let_go| *let_go) => {}
        }
    }

    /// The books; a poisoned lock is recovered, as no code panics while holding it.
    fn books(&self) -> MutexGuard<'_, Books> {
        self.shared
            .books
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The look-up log; a poisoned lock is recovered, as no code panics while holding it.
    fn checks(&self) -> MutexGuard<'_, CheckLog> {
        self.shared
            .checks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The knobs and generator; a poisoned lock is recovered, as no code panics while holding it.
    fn behaviour(&self) -> MutexGuard<'_, Behaviour> {
        self.shared
            .behaviour
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// A repeated reference's reply: its first outcome, or a refusal naming it
/// (`refuse_repeats`); nothing more is done either way.
fn replay_or_refuse<T>(first: T, plan: &RequestPlan, reference: &str) -> Result<T, SimulatorError> {
    if plan.refuse_repeats {
        return Err(SimulatorError::DuplicateReference(reference.to_owned()));
    }
    Ok(first)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const SHORT: Duration = Duration::from_millis(50);

    #[tokio::test]
    async fn held_replies_let_go_are_sent_at_once() {
        let knobs = Knobs {
            lost_reply_rate: 1.0,
            ..Knobs::default()
        };
        let bank = BankSimulator::new(knobs);
        let request = DebitRequest {
            reference: "r".into(),
            amount_paise: 1,
            account: "a@bank".into(),
        };
        let pending = tokio::spawn({
            let bank = bank.clone();
            async move { bank.debit(request).await }
        });
        tokio::time::sleep(SHORT).await;
        assert_eq!(
            bank.ledger().debits.len(),
            1,
            "executed before the reply is held"
        );
        bank.let_held_replies_go();
        let outcome = tokio::time::timeout(SHORT * 10, pending)
            .await
            .expect("sent promptly")
            .expect("task ran")
            .expect("debit succeeded");
        assert!(matches!(outcome, DebitOutcome::Debited { .. }));
    }

    #[tokio::test]
    async fn a_repeat_is_replayed_or_refused_and_never_moves_money_again() {
        for refuse_repeats in [false, true] {
            let bank = BankSimulator::new(Knobs {
                refuse_repeats,
                ..Knobs::default()
            });
            let request = || DebitRequest {
                reference: "r".into(),
                amount_paise: 1,
                account: "a@bank".into(),
            };
            let first = bank.debit(request()).await.expect("debited");
            let repeat = bank.debit(request()).await;
            match (refuse_repeats, repeat) {
                (false, Ok(replayed)) => assert_eq!(replayed, first),
                (true, Err(SimulatorError::DuplicateReference(reference))) => {
                    assert_eq!(reference, "r");
                }
                (refusing, other) => panic!("refuse_repeats {refusing}: {other:?}"),
            }
            assert_eq!(bank.ledger().debits.len(), 1, "one movement");
            assert_eq!(bank.debit_outcome("r"), Some(first), "a look-up's word");
        }
    }
}
