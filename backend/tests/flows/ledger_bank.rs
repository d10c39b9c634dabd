//! An in-memory bank port for the flows' unit tests: it replies to money calls as the test
//! scripts (then `Succeeded`), keeps a ledger of what moved by reference, and replies to look-ups
//! from that ledger (`Pending` for a reference the test makes it hold undecided). It can hold
//! calls open until the test lets them go, to make a first attempt that is still running. Only
//! for unit tests: the contract suites use the bank simulator over HTTP.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use shared::Operation;
use tokio::sync::{Notify, Semaphore};

use backend::bank::{BankPort, CallOutcome, LookUp, LookUpError, MoneyCall};

/// The bank's side, as the tests script it.
pub struct LedgerBank {
    replies: Mutex<VecDeque<CallOutcome>>,
    /// Paise moved, by reference.
    ledger: Mutex<BTreeMap<String, i64>>,
    /// References the bank holds and has not decided: look-ups reply `Pending`.
    undecided: Mutex<BTreeSet<String>>,
    /// Every reference called, in order.
    called: Mutex<Vec<String>>,
    calls: AtomicUsize,
    look_ups: AtomicUsize,
    call_arrived: Notify,
    /// While set, calls wait for a permit, which [`LedgerBank::let_calls_go`] gives.
    hold: Option<Semaphore>,
}

impl LedgerBank {
    /// A bank that replies `replies` in order, then `Succeeded`.
    pub fn replying(replies: impl IntoIterator<Item = CallOutcome>) -> LedgerBank {
        LedgerBank {
            replies: Mutex::new(replies.into_iter().collect()),
            ledger: Mutex::default(),
            undecided: Mutex::default(),
            called: Mutex::default(),
            calls: AtomicUsize::new(0),
            look_ups: AtomicUsize::new(0),
            call_arrived: Notify::new(),
            hold: None,
        }
    }

    /// The same, holding every call open until [`LedgerBank::let_calls_go`].
    pub fn holding(replies: impl IntoIterator<Item = CallOutcome>) -> LedgerBank {
        LedgerBank {
            hold: Some(Semaphore::new(0)),
            ..LedgerBank::replying(replies)
        }
    }

    /// Money calls received.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// Look-ups (status checks) received.
    pub fn look_ups(&self) -> usize {
        self.look_ups.load(Ordering::SeqCst)
    }

    /// The distinct references called.
    pub fn references(&self) -> Vec<String> {
        let mut references = self.called.lock().expect("unpoisoned").clone();
        references.dedup();
        references
    }

    /// Paise moved, in all.
    pub fn moved_paise(&self) -> i64 {
        self.ledger.lock().expect("unpoisoned").values().sum()
    }

    /// Records `paise` moved under `reference`: a call the bank said it had not executed, done
    /// after all (a late debit).
    pub fn debit_late(&self, reference: &str, paise: i64) {
        let mut ledger = self.ledger.lock().expect("unpoisoned");
        ledger.insert(reference.to_owned(), paise);
    }

    /// Takes back what moved under `reference`: the call never reached the bank after all, and
    /// its look-ups find nothing.
    pub fn forget(&self, reference: &str) {
        self.ledger.lock().expect("unpoisoned").remove(reference);
    }

    /// Makes the bank hold `reference` undecided: its look-ups reply `Pending`.
    pub fn hold_undecided(&self, reference: &str) {
        let mut undecided = self.undecided.lock().expect("unpoisoned");
        undecided.insert(reference.to_owned());
    }

    /// Waits until `count` calls have arrived.
    pub async fn wait_for_calls(&self, count: usize) {
        while self.calls() < count {
            let arrived = self.call_arrived.notified();
            if self.calls() >= count {
                return;
            }
            arrived.await;
        }
    }

    /// Lets every held call (and every later one) go.
    pub fn let_calls_go(&self) {
        if let Some(hold) = &self.hold {
            hold.add_permits(Semaphore::MAX_PERMITS - hold.available_permits());
        }
    }
}

#[async_trait]
impl BankPort for LedgerBank {
    async fn move_money(&self, call: MoneyCall<'_>) -> CallOutcome {
        let reference = call.reference().to_owned();
        self.called
            .lock()
            .expect("unpoisoned")
            .push(reference.clone());
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.call_arrived.notify_waiters();
        if let Some(hold) = &self.hold {
            let _go = hold.acquire().await.expect("the hold is never closed");
        }
        let reply = self.replies.lock().expect("unpoisoned").pop_front();
        let reply = reply.unwrap_or(CallOutcome::Succeeded);
        let moved = matches!(
            reply,
            CallOutcome::Succeeded | CallOutcome::MayBeInFlight { .. }
        );
        if moved {
            let mut ledger = self.ledger.lock().expect("unpoisoned");
            ledger.entry(reference).or_insert(call.amount_paise());
        }
        reply
    }

    async fn look_up(&self, _operation: Operation, reference: &str) -> Result<LookUp, LookUpError> {
        self.look_ups.fetch_add(1, Ordering::SeqCst);
        if self
            .undecided
            .lock()
            .expect("unpoisoned")
            .contains(reference)
        {
            return Ok(LookUp::Pending);
        }
        let ledger = self.ledger.lock().expect("unpoisoned");
        Ok(match ledger.contains_key(reference) {
            true => LookUp::Succeeded,
            false => LookUp::NeverSeen,
        })
    }
}
