//! The circuit breaker on the partner bank: while the bank is failing or slow, new payments are
//! refused *before* their claim (503 `bank-unavailable` with `Retry-After`) instead of each one
//! claiming a key, waiting out the bank's timeout and leaving an `unknown` key behind. Once the
//! bank has had time to recover, a few real payments are let through one at a time as probes,
//! and their results decide whether the breaker closes again.
//!
//! Only money-moving calls (debits, refunds) go through the breaker; look-ups do not, so a
//! reconciliation run neither trips it nor is refused by it. A call counts as
//! [`CallResult::Succeeded`] whenever the bank gave a final reply (money moved *or* declined:
//! a decline is the bank working) and as [`CallResult::Failed`] when it gave none (an error, a
//! timeout, a reply that could not be read).
//!
//! # States and transitions
//!
//! - **Closed** (normal): every call is admitted. Each result is counted in a sliding window of
//!   the last [`BreakerSettings::window`]: calls, failed calls, and slow calls (those that took
//!   at least [`BreakerSettings::slow_call`], whether they succeeded or not). Once the window
//!   holds at least [`BreakerSettings::min_calls`] calls and either the failed share reaches
//!   [`BreakerSettings::failure_share`] or the slow share reaches
//!   [`BreakerSettings::slow_share`], the breaker goes **Closed → Open**.
//! - **Open**: every call is refused, with `retry_after` the time left until a probe may be
//!   admitted (at least one second). The first [`Breaker::admit`] once
//!   [`BreakerSettings::open_for`] has passed goes **Open → HalfOpen** and admits that caller as
//!   the first probe.
//! - **HalfOpen**: one probe at a time; any other caller is refused with a `retry_after` of one
//!   second. A probe that succeeded and was not slow counts towards
//!   [`BreakerSettings::probes_to_close`]; that many in a row go **HalfOpen → Closed** with an
//!   empty window. A probe that failed or was slow goes **HalfOpen → Open** for a full
//!   `open_for` from then. A probe given up unsent ([`Breaker::abandon`]) only frees the slot.
//!   A probe's *lease* is `max(open_for, slow_call)`, counted from when its bank call left
//!   ([`Breaker::sending`]), not from its admission: the claim before the call is the
//!   database's time, not the bank's. A probe whose call has been out for its lease without a
//!   result is treated as a failed one at the next admission (**HalfOpen → Open**): it could
//!   only end slow by then, and a lost probe must not keep the breaker refusing every payment
//!   for ever. A probe not yet sent a lease after its admission (its claim stalled on the
//!   database) says nothing about the bank: the next caller takes its slot as the new probe, and
//!   the old one's result, if it is ever sent, counts nothing.
//!
//! # Tickets and generations
//!
//! Every admitted call gets a [`Ticket`], which must be handed back exactly once, to
//! [`Breaker::record`] or [`Breaker::abandon`] (it is not `Clone`). Every transition starts a new
//! *generation*, and a ticket remembers the generation it was issued in. Only tickets of the
//! current generation count: a call admitted while closed that ends after the breaker opened
//! (or after it closed again, with a fresh window) is ignored, and only the probe's own ticket
//! (each probe has an id of its own) can move a half-open breaker or free its probe slot.
//!
//! # Time is passed in
//!
//! [`Breaker`] never reads a clock: every method that depends on time takes `now`, so every
//! transition is a plain unit test. [`BankBreaker`] is the thread-safe wrapper the backend
//! shares between requests and workers; it reads [`Instant::now`] while holding its lock, so
//! the machine sees instants in order.
//!
//! # The sliding window
//!
//! The window is [`BUCKETS`] time buckets, each `window / BUCKETS` wide, in a fixed array: a
//! result is added to the bucket of the instant it was recorded (its index is the number of
//! bucket widths since the window's base instant, the first result it counted). A bucket whose
//! slot is reused for a later index is cleared first, and totals add up only the newest bucket
//! and the `BUCKETS - 1` before it, so results older than `window` drop out as time advances.
//! A result therefore counts for between `window * (BUCKETS - 1) / BUCKETS` and `window` after
//! it was recorded. Nothing is allocated per call.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// How many time buckets the sliding window is cut into.
pub const BUCKETS: usize = 10;

/// [`BUCKETS`] as the type of a bucket index.
const BUCKETS_U64: u64 = BUCKETS as u64;

/// The `retry_after` of a caller refused because the one probe is already out.
const PROBE_BUSY_RETRY: Duration = Duration::from_secs(1);

/// The shortest `retry_after` ever given (`Retry-After` counts whole seconds).
const MIN_RETRY: Duration = Duration::from_secs(1);

/// The breaker's settings; [`BreakerSettings::check`] refuses nonsense.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BreakerSettings {
    /// How far back results count while closed (default 30 s).
    pub window: Duration,
    /// The breaker does not open on fewer calls than this in the window (default 20).
    pub min_calls: u32,
    /// It opens when failed calls / calls in the window reaches this share (default 0.5).
    pub failure_share: f64,
    /// A call that took at least this long is slow, even if it succeeded (default 2 s).
    pub slow_call: Duration,
    /// It opens when slow calls / calls in the window reaches this share (default 0.8).
    pub slow_share: f64,
    /// How long it stays open before admitting a probe (default 15 s).
    pub open_for: Duration,
    /// How many successful probes in a row close it again (default 3).
    pub probes_to_close: u32,
}

impl Default for BreakerSettings {
    fn default() -> BreakerSettings {
        BreakerSettings {
            window: Duration::from_secs(30),
            min_calls: 20,
            failure_share: 0.5,
            slow_call: Duration::from_secs(2),
            slow_share: 0.8,
            open_for: Duration::from_secs(15),
            probes_to_close: 3,
        }
    }
}

impl BreakerSettings {
    /// `Ok` for usable settings, else `Err` with a message that starts with the bad field's
    /// name: a zero `window`, `slow_call` or `open_for`; a zero `min_calls` or
    /// `probes_to_close`; a `failure_share` or `slow_share` outside `0..=1` or NaN.
    ///
    /// A zero `slow_call` is refused too: every call would be slow, so the breaker would open
    /// on every `min_calls` calls and no probe could ever close it.
    pub fn check(&self) -> Result<(), String> {
        fn share(name: &str, value: f64) -> Result<(), String> {
            if (0.0..=1.0).contains(&value) {
                Ok(())
            } else {
                Err(format!("{name} must be a share from 0 to 1, not {value}"))
            }
        }
        fn positive(name: &str, value: Duration) -> Result<(), String> {
            if value.is_zero() {
                Err(format!("{name} must be longer than zero"))
            } else {
                Ok(())
            }
        }
        fn at_least_one(name: &str, value: u32) -> Result<(), String> {
            if value == 0 {
                Err(format!("{name} must be at least 1"))
            } else {
                Ok(())
            }
        }
        positive("window", self.window)?;
        at_least_one("min_calls", self.min_calls)?;
        share("failure_share", self.failure_share)?;
        positive("slow_call", self.slow_call)?;
        share("slow_share", self.slow_share)?;
        positive("open_for", self.open_for)?;
        at_least_one("probes_to_close", self.probes_to_close)
    }
}

/// How one admitted call ended, as far as the breaker cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallResult {
    /// The bank gave a final reply: the money moved, or the bank declined.
    Succeeded,
    /// No final reply: a transport error, a timeout, a reply that could not be read.
    Failed,
}

/// The breaker's state, as reported to logs and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    /// Calls flow; results are counted.
    Closed,
    /// Calls are refused until `open_for` has passed.
    Open,
    /// Probes are admitted one at a time; everything else is refused.
    HalfOpen,
}

impl BreakerState {
    /// The state's name in logs and labels: `closed`, `open` or `half_open`.
    pub fn as_str(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::HalfOpen => "half_open",
        }
    }

    /// The state as a gauge's value: closed 0, open 1, half-open 2.
    pub fn gauge_value(self) -> i64 {
        match self {
            BreakerState::Closed => 0,
            BreakerState::Open => 1,
            BreakerState::HalfOpen => 2,
        }
    }
}

/// An admitted call's receipt, shown to [`Breaker::sending`] when its call leaves and given back
/// exactly once: to [`Breaker::record`] when the call ended, or to [`Breaker::abandon`] when it
/// was never sent. A ticket belongs to the [`Breaker`] that issued it.
#[derive(Debug)]
#[must_use = "a ticket must be given back to `record` or `abandon`, or a probe slot stays taken"]
pub struct Ticket {
    /// The generation (one per state entered) the ticket was issued in.
    generation: u64,
    /// The probe's id if the ticket is the half-open breaker's probe.
    probe: Option<u64>,
}

/// What [`Breaker::admit`] decided.
#[derive(Debug)]
#[must_use = "an admitted call's ticket must be given back to `record` or `abandon`"]
pub enum Admission {
    /// Call the bank; give the ticket back to [`Breaker::record`] when the call ends (or to
    /// [`Breaker::abandon`] if it is never sent).
    Call(Ticket),
    /// Refused: the bank is failing.
    Refused {
        /// When to try again: the time left until a probe may be admitted, at least 1 s.
        retry_after: Duration,
    },
}

/// A state change, for the caller to log and count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition {
    /// The state left.
    pub from: BreakerState,
    /// The state entered.
    pub to: BreakerState,
}

/// The state with what it needs to remember.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Counting results in the window.
    Closed,
    /// Refusing; opened at `since`.
    Open {
        /// When it opened.
        since: Instant,
    },
    /// Admitting one probe at a time.
    HalfOpen {
        /// The probe now out; `None` when no probe is out.
        probe: Option<Probe>,
        /// Successful probes so far in this half-open spell.
        successes: u32,
    },
}

/// The half-open breaker's probe now out.
#[derive(Debug, Clone, Copy)]
struct Probe {
    /// Its own id: only its ticket moves the breaker.
    id: u64,
    /// When it was admitted.
    admitted_at: Instant,
    /// When its bank call left; `None` while it is claiming its key.
    sent_at: Option<Instant>,
}

/// The counts of one bucket of the window, or the window's totals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Counts {
    /// Calls recorded.
    calls: u32,
    /// Of which failed.
    failed: u32,
    /// Of which slow (took at least `slow_call`).
    slow: u32,
}

/// One time bucket: the counts of the results recorded in bucket `index`.
#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    /// Bucket widths from the window's base to this bucket's start.
    index: u64,
    /// What was recorded in it.
    counts: Counts,
}

/// The sliding window of the closed breaker (see the module's documentation).
#[derive(Debug)]
struct Window {
    /// Each bucket's width: `window / BUCKETS`, at least a nanosecond.
    width: Duration,
    /// The instant bucket 0 starts at: the first result counted since the last reset.
    base: Option<Instant>,
    /// The newest bucket index counted.
    newest: u64,
    /// Bucket `index` lives in slot `index % BUCKETS`.
    buckets: [Bucket; BUCKETS],
}

impl Window {
    fn new(window: Duration) -> Window {
        Window {
            width: (window / BUCKETS as u32).max(Duration::from_nanos(1)),
            base: None,
            newest: 0,
            buckets: [Bucket::default(); BUCKETS],
        }
    }

    /// Forgets every result.
    fn reset(&mut self) {
        self.base = None;
        self.newest = 0;
        self.buckets = [Bucket::default(); BUCKETS];
    }

    /// Counts one result recorded at `now` and returns the window's totals.
    fn add(&mut self, now: Instant, failed: bool, slow: bool) -> Counts {
        let base = *self.base.get_or_insert(now);
        let since_base = now.saturating_duration_since(base).as_nanos() / self.width.as_nanos();
        let index = u64::try_from(since_base).unwrap_or(u64::MAX);
        self.newest = self.newest.max(index);
        // A result from an instant already older than the window (possible only if `now` goes
        // backwards) counts nowhere.
        if self.newest - index < BUCKETS_U64 {
            let bucket = &mut self.buckets[(index % BUCKETS_U64) as usize];
            if bucket.index != index {
                // The slot holds a bucket a whole window older (or none yet): reuse it.
                *bucket = Bucket {
                    index,
                    counts: Counts::default(),
                };
            }
            let counts = &mut bucket.counts;
            counts.calls = counts.calls.saturating_add(1);
            counts.failed = counts.failed.saturating_add(u32::from(failed));
            counts.slow = counts.slow.saturating_add(u32::from(slow));
        }
        self.totals()
    }

    /// The counts of the newest bucket and the `BUCKETS - 1` before it.
    fn totals(&self) -> Counts {
        let mut totals = Counts::default();
        for bucket in &self.buckets {
            if bucket.index <= self.newest && self.newest - bucket.index < BUCKETS_U64 {
                totals.calls = totals.calls.saturating_add(bucket.counts.calls);
                totals.failed = totals.failed.saturating_add(bucket.counts.failed);
                totals.slow = totals.slow.saturating_add(bucket.counts.slow);
            }
        }
        totals
    }
}

/// The pure state machine: no clock, no lock (see the module's documentation). Settings are
/// used as given; check them first with [`BreakerSettings::check`] (nonsense settings give
/// nonsense decisions, never a panic).
#[derive(Debug)]
pub struct Breaker {
    settings: BreakerSettings,
    phase: Phase,
    /// Bumped on every transition; tickets of earlier generations count nothing.
    generation: u64,
    /// The id the next probe gets.
    next_probe: u64,
    window: Window,
}

impl Breaker {
    /// A closed breaker with an empty window.
    pub fn new(settings: BreakerSettings) -> Breaker {
        Breaker {
            settings,
            phase: Phase::Closed,
            generation: 0,
            next_probe: 0,
            window: Window::new(settings.window),
        }
    }

    /// The state as of the last [`admit`](Self::admit) or [`record`](Self::record): an open
    /// breaker whose `open_for` has passed still reads `Open` until the next admission.
    pub fn state(&self) -> BreakerState {
        match self.phase {
            Phase::Closed => BreakerState::Closed,
            Phase::Open { .. } => BreakerState::Open,
            Phase::HalfOpen { .. } => BreakerState::HalfOpen,
        }
    }

    /// Whether a call may go to the bank at `now`.
    ///
    /// Closed: always a call. Open: refused until `open_for` has passed since it opened; then it
    /// turns half-open (the transition is returned) and this caller is the probe. Half-open: a
    /// call (the probe) if no probe is out, else refused with `retry_after` 1 s. A probe whose
    /// call left `max(open_for, slow_call)` ago is taken as failed and the breaker re-opens
    /// (returned); a probe admitted that long ago and never sent is replaced by this caller.
    pub fn admit(&mut self, now: Instant) -> (Admission, Option<Transition>) {
        match self.phase {
            Phase::Closed => (Admission::Call(self.ticket(None)), None),
            Phase::Open { since } => {
                let open = now.saturating_duration_since(since);
                if open < self.settings.open_for {
                    let retry_after = (self.settings.open_for - open).max(MIN_RETRY);
                    return (Admission::Refused { retry_after }, None);
                }
                let transition = self.enter(Phase::HalfOpen {
                    probe: None,
                    successes: 0,
                });
                (Admission::Call(self.new_probe(now)), Some(transition))
            }
            Phase::HalfOpen { probe: None, .. } => (Admission::Call(self.new_probe(now)), None),
            Phase::HalfOpen {
                probe: Some(probe), ..
            } => {
                let lease = self.probe_lease();
                match probe.sent_at {
                    Some(sent_at) if now.saturating_duration_since(sent_at) >= lease => {
                        let transition = self.enter(Phase::Open { since: now });
                        let retry_after = self.settings.open_for.max(MIN_RETRY);
                        (Admission::Refused { retry_after }, Some(transition))
                    }
                    None if now.saturating_duration_since(probe.admitted_at) >= lease => {
                        (Admission::Call(self.new_probe(now)), None)
                    }
                    _ => {
                        let retry_after = PROBE_BUSY_RETRY;
                        (Admission::Refused { retry_after }, None)
                    }
                }
            }
        }
    }

    /// Notes that the call of `ticket` leaves for the bank at `now`: a probe's lease runs from
    /// here. Any other ticket's call changes nothing.
    pub fn sending(&mut self, ticket: &Ticket, now: Instant) {
        if let Some(probe) = self.probe_of(ticket)
            && probe.sent_at.is_none()
        {
            probe.sent_at = Some(now);
        }
    }

    /// Records how an admitted call ended at `now`, having taken `took`.
    ///
    /// Closed: counted in the window (failed if [`CallResult::Failed`], slow if `took >=
    /// slow_call`, whatever the result), and the breaker opens once the window holds
    /// `min_calls` calls and either share is reached. Half-open, the probe: a success that was
    /// not slow counts towards `probes_to_close` (reaching it closes the breaker with an empty
    /// window); a failure or a slow call re-opens it for `open_for` from `now`. A ticket issued
    /// before the last transition counts nothing.
    pub fn record(
        &mut self,
        ticket: Ticket,
        result: CallResult,
        took: Duration,
        now: Instant,
    ) -> Option<Transition> {
        if ticket.generation != self.generation {
            return None;
        }
        let failed = result == CallResult::Failed;
        let slow = took >= self.settings.slow_call;
        if ticket.probe.is_some() && self.probe_of(&ticket).is_none() {
            // A probe replaced while it was still unsent counts nothing.
            return None;
        }
        match (self.phase, ticket.probe) {
            (Phase::Closed, None) => {
                let totals = self.window.add(now, failed, slow);
                if self.should_open(totals) {
                    Some(self.enter(Phase::Open { since: now }))
                } else {
                    None
                }
            }
            (Phase::HalfOpen { successes, .. }, Some(_)) => {
                if failed || slow {
                    return Some(self.enter(Phase::Open { since: now }));
                }
                let successes = successes.saturating_add(1);
                if successes >= self.settings.probes_to_close {
                    Some(self.enter(Phase::Closed))
                } else {
                    self.phase = Phase::HalfOpen {
                        probe: None,
                        successes,
                    };
                    None
                }
            }
            // Not reachable with a ticket of the current generation; counts nothing.
            _ => None,
        }
    }

    /// Gives up an admitted call that was never sent (e.g. no capacity): counts nothing, and
    /// frees the probe slot if the ticket was the probe.
    pub fn abandon(&mut self, ticket: Ticket) {
        if self.probe_of(&ticket).is_some()
            && let Phase::HalfOpen { probe, .. } = &mut self.phase
        {
            *probe = None;
        }
    }

    fn ticket(&self, probe: Option<u64>) -> Ticket {
        Ticket {
            generation: self.generation,
            probe,
        }
    }

    /// The half-open breaker's probe, admitted at `now`, and its ticket.
    fn new_probe(&mut self, now: Instant) -> Ticket {
        let id = self.next_probe;
        self.next_probe = self.next_probe.wrapping_add(1);
        if let Phase::HalfOpen { probe, .. } = &mut self.phase {
            *probe = Some(Probe {
                id,
                admitted_at: now,
                sent_at: None,
            });
        }
        self.ticket(Some(id))
    }

    /// The probe out now, if `ticket` is its ticket (of this generation, with its id).
    fn probe_of(&mut self, ticket: &Ticket) -> Option<&mut Probe> {
        let generation = self.generation;
        match &mut self.phase {
            Phase::HalfOpen {
                probe: Some(probe), ..
            } if ticket.generation == generation && ticket.probe == Some(probe.id) => Some(probe),
            _ => None,
        }
    }

    /// How long a probe may be out before it is taken as failed.
    fn probe_lease(&self) -> Duration {
        self.settings.open_for.max(self.settings.slow_call)
    }

    fn should_open(&self, totals: Counts) -> bool {
        let calls = f64::from(totals.calls);
        totals.calls >= self.settings.min_calls
            && (f64::from(totals.failed) >= self.settings.failure_share * calls
                || f64::from(totals.slow) >= self.settings.slow_share * calls)
    }

    /// Moves to `phase` in a new generation; entering `Closed` empties the window.
    fn enter(&mut self, phase: Phase) -> Transition {
        let from = self.state();
        self.phase = phase;
        self.generation = self.generation.wrapping_add(1);
        if let Phase::Closed = phase {
            self.window.reset();
        }
        Transition {
            from,
            to: self.state(),
        }
    }
}

/// The breaker shared by every request and worker of one process: a [`Breaker`] behind a
/// mutex, read with [`Instant::now`]. Clones share the same breaker.
#[derive(Debug, Clone)]
pub struct BankBreaker {
    inner: Arc<Mutex<Breaker>>,
}

impl BankBreaker {
    /// A closed breaker on `settings` (check them first with [`BreakerSettings::check`]).
    pub fn new(settings: BreakerSettings) -> BankBreaker {
        BankBreaker {
            inner: Arc::new(Mutex::new(Breaker::new(settings))),
        }
    }

    /// The state as of the last admission or result (see [`Breaker::state`]).
    pub fn state(&self) -> BreakerState {
        lock(&self.inner).state()
    }

    /// Whether a call may go to the bank now: `Ok` with the call's ticket, or `Err` with how
    /// long to wait (at least 1 s; round it up for `Retry-After`). The transition, if this
    /// admission made one, is returned for the caller to log and count.
    pub fn admit(&self) -> (Result<CallTicket, Duration>, Option<Transition>) {
        let (admission, transition) = {
            let mut breaker = lock(&self.inner);
            breaker.admit(Instant::now())
        };
        let admitted = match admission {
            Admission::Call(ticket) => Ok(CallTicket {
                breaker: Arc::clone(&self.inner),
                ticket: Some(ticket),
            }),
            Admission::Refused { retry_after } => Err(retry_after),
        };
        (admitted, transition)
    }
}

/// An admitted call. [`finish`](Self::finish) records how it ended; dropped unfinished (never
/// sent, or its task cancelled), it is abandoned: it counts nothing and frees the probe slot if
/// it was the probe. It owns a handle on the breaker, so it can be moved into a spawned task and
/// held across `.await`.
#[derive(Debug)]
#[must_use = "dropping the ticket abandons the call; `finish` it when the bank call ends"]
pub struct CallTicket {
    breaker: Arc<Mutex<Breaker>>,
    /// `Some` until finished or dropped.
    ticket: Option<Ticket>,
}

impl CallTicket {
    /// Notes that the call leaves for the bank now (see [`Breaker::sending`]).
    pub fn sending(&self) {
        if let Some(ticket) = &self.ticket {
            lock(&self.breaker).sending(ticket, Instant::now());
        }
    }

    /// Records how the call ended, having taken `took` (see [`Breaker::record`]); returns the
    /// transition it caused, for the caller to log and count.
    pub fn finish(mut self, result: CallResult, took: Duration) -> Option<Transition> {
        let ticket = self.ticket.take()?;
        let mut breaker = lock(&self.breaker);
        breaker.record(ticket, result, took, Instant::now())
    }
}

impl Drop for CallTicket {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            lock(&self.breaker).abandon(ticket);
        }
    }
}

/// The breaker, also after a panic elsewhere while it was held: the machine never panics, and
/// every change it makes leaves a consistent state, so a poisoned lock's value is still good.
fn lock(breaker: &Mutex<Breaker>) -> MutexGuard<'_, Breaker> {
    breaker.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Small numbers, so that tests read easily: opens on 4 calls at half failed or 3/4 slow;
    /// open 5 s; 2 probes to close; a 10 s window in 1 s buckets; slow from 1 s.
    fn settings() -> BreakerSettings {
        BreakerSettings {
            window: Duration::from_secs(10),
            min_calls: 4,
            failure_share: 0.5,
            slow_call: Duration::from_secs(1),
            slow_share: 0.75,
            open_for: Duration::from_secs(5),
            probes_to_close: 2,
        }
    }

    const FAST: Duration = Duration::from_millis(50);
    const SLOW: Duration = Duration::from_secs(1);

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Admits a call that must be admitted without a transition.
    fn call(breaker: &mut Breaker, now: Instant) -> Ticket {
        match breaker.admit(now) {
            (Admission::Call(ticket), None) => ticket,
            other => panic!("expected a call and no transition, got {other:?}"),
        }
    }

    /// Admits a call that must be refused without a transition; returns `retry_after`.
    fn refused(breaker: &mut Breaker, now: Instant) -> Duration {
        match breaker.admit(now) {
            (Admission::Refused { retry_after }, None) => retry_after,
            other => panic!("expected a refusal and no transition, got {other:?}"),
        }
    }

    /// Admits the first probe after `open_for`: must be Open → HalfOpen.
    fn first_probe(breaker: &mut Breaker, now: Instant) -> Ticket {
        match breaker.admit(now) {
            (Admission::Call(ticket), Some(t)) if t == transition(Open, HalfOpen) => {
                assert!(ticket.probe.is_some());
                ticket
            }
            other => panic!("expected the first probe, got {other:?}"),
        }
    }

    /// One call admitted and recorded at `now`.
    fn one(
        breaker: &mut Breaker,
        now: Instant,
        result: CallResult,
        took: Duration,
    ) -> Option<Transition> {
        let ticket = call(breaker, now);
        breaker.record(ticket, result, took, now)
    }

    use BreakerState::{Closed, HalfOpen, Open};
    use CallResult::{Failed, Succeeded};

    fn transition(from: BreakerState, to: BreakerState) -> Transition {
        Transition { from, to }
    }

    /// A breaker opened at `at` by `min_calls` failures.
    fn opened_at(at: Instant) -> Breaker {
        let mut breaker = Breaker::new(settings());
        for _ in 0..3 {
            assert_eq!(one(&mut breaker, at, Failed, FAST), None);
        }
        assert_eq!(
            one(&mut breaker, at, Failed, FAST),
            Some(transition(Closed, Open))
        );
        breaker
    }

    #[test]
    fn default_settings_pass_the_check_and_match_the_documented_values() {
        let defaults = BreakerSettings::default();
        assert_eq!(defaults.check(), Ok(()));
        assert_eq!(defaults.window, secs(30));
        assert_eq!(defaults.min_calls, 20);
        assert_eq!(defaults.failure_share, 0.5);
        assert_eq!(defaults.slow_call, secs(2));
        assert_eq!(defaults.slow_share, 0.8);
        assert_eq!(defaults.open_for, secs(15));
        assert_eq!(defaults.probes_to_close, 3);
        assert_eq!(settings().check(), Ok(()));
    }

    #[test]
    fn settings_check_names_the_bad_field() {
        type Spoil = fn(&mut BreakerSettings);
        let cases: [(&str, Spoil); 12] = [
            ("window", |s| s.window = Duration::ZERO),
            ("min_calls", |s| s.min_calls = 0),
            ("failure_share", |s| s.failure_share = 1.5),
            ("failure_share", |s| s.failure_share = -0.1),
            ("failure_share", |s| s.failure_share = f64::NAN),
            ("slow_call", |s| s.slow_call = Duration::ZERO),
            ("slow_share", |s| s.slow_share = 2.0),
            ("slow_share", |s| s.slow_share = f64::NAN),
            ("slow_share", |s| s.slow_share = f64::INFINITY),
            ("open_for", |s| s.open_for = Duration::ZERO),
            ("probes_to_close", |s| s.probes_to_close = 0),
            ("window", |s| {
                // The first bad field in declaration order is named.
                s.window = Duration::ZERO;
                s.probes_to_close = 0;
            }),
        ];
        for (field, spoil) in cases {
            let mut bad = settings();
            spoil(&mut bad);
            match bad.check() {
                Err(message) => assert!(
                    message.starts_with(field),
                    "{message:?} should name {field}"
                ),
                Ok(()) => panic!("{bad:?} passed the check; {field} is bad"),
            }
        }
        // The ends of the share range are allowed.
        let mut edges = settings();
        edges.failure_share = 0.0;
        edges.slow_share = 1.0;
        assert_eq!(edges.check(), Ok(()));
    }

    #[test]
    fn state_names_and_gauge_values() {
        assert_eq!(Closed.as_str(), "closed");
        assert_eq!(Open.as_str(), "open");
        assert_eq!(HalfOpen.as_str(), "half_open");
        assert_eq!(Closed.gauge_value(), 0);
        assert_eq!(Open.gauge_value(), 1);
        assert_eq!(HalfOpen.gauge_value(), 2);
    }

    #[test]
    fn stays_closed_below_min_calls_even_at_100_percent_failures() {
        let t0 = Instant::now();
        let mut breaker = Breaker::new(settings());
        for i in 0..3 {
            assert_eq!(one(&mut breaker, t0 + ms(i * 100), Failed, SLOW), None);
        }
        assert_eq!(breaker.state(), Closed);
        // Calls are still admitted.
        let ticket = call(&mut breaker, t0 + secs(1));
        assert!(ticket.probe.is_none());
        breaker.abandon(ticket);
    }

    #[test]
    fn opens_at_the_failure_share() {
        let t0 = Instant::now();
        let mut breaker = Breaker::new(settings());
        // 1 failure in 4 calls, then 2 in 5: below half.
        for result in [Succeeded, Succeeded, Succeeded, Failed, Failed] {
            assert_eq!(one(&mut breaker, t0, result, FAST), None);
        }
        assert_eq!(breaker.state(), Closed);
        // 3 in 6: half.
        assert_eq!(
            one(&mut breaker, t0 + ms(10), Failed, FAST),
            Some(transition(Closed, Open))
        );
        assert_eq!(breaker.state(), Open);
        assert_eq!(refused(&mut breaker, t0 + ms(10)), secs(5));
    }

    #[test]
    fn opens_at_the_slow_share_even_when_every_call_succeeded() {
        let t0 = Instant::now();
        let mut breaker = Breaker::new(settings());
        // 2 slow of 4, then 3 slow of 5: below three quarters.
        for took in [FAST, SLOW, FAST, SLOW, SLOW] {
            assert_eq!(one(&mut breaker, t0, Succeeded, took), None);
        }
        // 4 slow of 6 is still below; 5 of 7 too; 6 of 8 reaches it. `slow_call` itself is slow.
        assert_eq!(one(&mut breaker, t0, Succeeded, SLOW), None);
        assert_eq!(one(&mut breaker, t0, Succeeded, secs(3)), None);
        assert_eq!(
            one(&mut breaker, t0, Succeeded, SLOW),
            Some(transition(Closed, Open))
        );
    }

    #[test]
    fn refuses_while_open_with_retry_after_counting_down() {
        let t0 = Instant::now();
        let mut breaker = opened_at(t0);
        assert_eq!(refused(&mut breaker, t0), secs(5));
        assert_eq!(refused(&mut breaker, t0 + secs(1)), secs(4));
        assert_eq!(refused(&mut breaker, t0 + ms(3_500)), ms(1_500));
        // Never less than a second, even just before the probe.
        assert_eq!(refused(&mut breaker, t0 + ms(4_999)), secs(1));
        assert_eq!(breaker.state(), Open);
        // Results of calls admitted before it opened change nothing.
        let stale = Ticket {
            generation: 0,
            probe: None,
        };
        assert_eq!(breaker.record(stale, Succeeded, FAST, t0 + secs(2)), None);
        assert_eq!(refused(&mut breaker, t0 + secs(2)), secs(3));
    }

    #[test]
    fn after_open_for_admits_exactly_one_probe_at_a_time() {
        let t0 = Instant::now();
        let mut breaker = opened_at(t0);
        let probe = first_probe(&mut breaker, t0 + secs(5));
        assert_eq!(breaker.state(), HalfOpen);
        // Everyone else is told to come back in a second while the probe is out.
        assert_eq!(refused(&mut breaker, t0 + secs(5)), secs(1));
        assert_eq!(refused(&mut breaker, t0 + secs(6)), secs(1));
        // The probe succeeds: one more probe is admitted, and only one.
        assert_eq!(breaker.record(probe, Succeeded, FAST, t0 + secs(6)), None);
        assert_eq!(breaker.state(), HalfOpen);
        let second = call(&mut breaker, t0 + secs(6));
        assert!(second.probe.is_some());
        assert_eq!(refused(&mut breaker, t0 + secs(6)), secs(1));
        breaker.abandon(second);
    }

    #[test]
    fn probes_to_close_successes_close_it_and_reset_the_window() {
        let t0 = Instant::now();
        let mut breaker = opened_at(t0);
        let probe = first_probe(&mut breaker, t0 + secs(5));
        assert_eq!(breaker.record(probe, Succeeded, FAST, t0 + secs(5)), None);
        let probe = call(&mut breaker, t0 + secs(5));
        assert_eq!(
            breaker.record(probe, Succeeded, FAST, t0 + secs(5)),
            Some(transition(HalfOpen, Closed))
        );
        assert_eq!(breaker.state(), Closed);
        // The four failures that opened it (5 s ago, inside a 10 s window) are forgotten:
        // three new failures do not open it, the fourth does.
        let ticket = call(&mut breaker, t0 + secs(5));
        assert!(ticket.probe.is_none());
        breaker.abandon(ticket);
        for _ in 0..3 {
            assert_eq!(one(&mut breaker, t0 + secs(6), Failed, FAST), None);
        }
        assert_eq!(
            one(&mut breaker, t0 + secs(6), Failed, FAST),
            Some(transition(Closed, Open))
        );
    }

    #[test]
    fn a_declined_payment_is_a_success_for_the_breaker() {
        // The bank replying "declined" is `Succeeded`: however many, they never open it.
        let t0 = Instant::now();
        let mut breaker = Breaker::new(settings());
        for _ in 0..10 {
            assert_eq!(one(&mut breaker, t0, Succeeded, FAST), None);
        }
        assert_eq!(breaker.state(), Closed);
    }

    #[test]
    fn a_failed_probe_reopens_for_a_full_open_for() {
        let t0 = Instant::now();
        let mut breaker = opened_at(t0);
        let probe = first_probe(&mut breaker, t0 + secs(5));
        // One success first: a failure afterwards still re-opens (successes must be in a row).
        assert_eq!(breaker.record(probe, Succeeded, FAST, t0 + secs(5)), None);
        let probe = call(&mut breaker, t0 + secs(6));
        assert_eq!(
            breaker.record(probe, Failed, FAST, t0 + secs(7)),
            Some(transition(HalfOpen, Open))
        );
        assert_eq!(breaker.state(), Open);
        // A full `open_for` from the failure, not from the first opening.
        assert_eq!(refused(&mut breaker, t0 + secs(7)), secs(5));
        assert_eq!(refused(&mut breaker, t0 + ms(11_500)), secs(1));
        assert_eq!(refused(&mut breaker, t0 + ms(11_999)), secs(1));
        // And the success count starts again: two new successes are needed.
        let probe = first_probe(&mut breaker, t0 + secs(12));
        assert_eq!(breaker.record(probe, Succeeded, FAST, t0 + secs(12)), None);
        let probe = call(&mut breaker, t0 + secs(12));
        assert_eq!(
            breaker.record(probe, Succeeded, FAST, t0 + secs(12)),
            Some(transition(HalfOpen, Closed))
        );
    }

    #[test]
    fn a_slow_successful_probe_reopens() {
        let t0 = Instant::now();
        let mut breaker = opened_at(t0);
        let probe = first_probe(&mut breaker, t0 + secs(5));
        assert_eq!(
            breaker.record(probe, Succeeded, SLOW, t0 + secs(6)),
            Some(transition(HalfOpen, Open))
        );
        assert_eq!(refused(&mut breaker, t0 + secs(6)), secs(5));
    }

    #[test]
    fn an_abandoned_probe_frees_the_slot() {
        let t0 = Instant::now();
        let mut breaker = opened_at(t0);
        let probe = first_probe(&mut breaker, t0 + secs(5));
        assert_eq!(refused(&mut breaker, t0 + secs(5)), secs(1));
        breaker.abandon(probe);
        assert_eq!(breaker.state(), HalfOpen);
        // The next caller is the probe; the abandoned one counted nothing towards closing.
        let probe = call(&mut breaker, t0 + secs(5));
        assert!(probe.probe.is_some());
        assert_eq!(breaker.record(probe, Succeeded, FAST, t0 + secs(5)), None);
        assert_eq!(breaker.state(), HalfOpen);
        let probe = call(&mut breaker, t0 + secs(5));
        assert_eq!(
            breaker.record(probe, Succeeded, FAST, t0 + secs(5)),
            Some(transition(HalfOpen, Closed))
        );
    }

    #[test]
    fn abandoning_a_closed_call_counts_nothing() {
        let t0 = Instant::now();
        let mut breaker = Breaker::new(settings());
        for _ in 0..3 {
            assert_eq!(one(&mut breaker, t0, Failed, FAST), None);
        }
        for _ in 0..5 {
            let ticket = call(&mut breaker, t0);
            breaker.abandon(ticket);
        }
        assert_eq!(breaker.state(), Closed);
        // Still 3 calls in the window: the next failure opens it.
        assert_eq!(
            one(&mut breaker, t0, Failed, FAST),
            Some(transition(Closed, Open))
        );
    }

    #[test]
    fn a_ticket_from_before_a_transition_cannot_close_or_reopen_the_breaker() {
        let t0 = Instant::now();
        let mut breaker = Breaker::new(settings());
        // Calls admitted while closed, still in flight when the breaker opens.
        let late_success = call(&mut breaker, t0);
        let late_failure = call(&mut breaker, t0);
        let late_abandoned = call(&mut breaker, t0);
        let late_after_close = call(&mut breaker, t0);
        for _ in 0..3 {
            assert_eq!(one(&mut breaker, t0, Failed, FAST), None);
        }
        assert_eq!(
            one(&mut breaker, t0, Failed, FAST),
            Some(transition(Closed, Open))
        );
        let probe = first_probe(&mut breaker, t0 + secs(5));

        // While the probe is out: an old success does not count as a probe success, an old
        // failure does not re-open, an old abandonment does not free the probe's slot.
        assert_eq!(
            breaker.record(late_success, Succeeded, FAST, t0 + secs(5)),
            None
        );
        assert_eq!(
            breaker.record(late_failure, Failed, SLOW, t0 + secs(5)),
            None
        );
        breaker.abandon(late_abandoned);
        assert_eq!(breaker.state(), HalfOpen);
        assert_eq!(refused(&mut breaker, t0 + secs(5)), secs(1));

        // The probe's own result still counts: one success, not two, so still half-open.
        assert_eq!(breaker.record(probe, Succeeded, FAST, t0 + secs(5)), None);
        assert_eq!(breaker.state(), HalfOpen);
        let probe = call(&mut breaker, t0 + secs(5));
        assert_eq!(
            breaker.record(probe, Succeeded, FAST, t0 + secs(5)),
            Some(transition(HalfOpen, Closed))
        );

        // Closed again, with a fresh window: a failure from before the opening is not counted
        // there (three new failures stay closed, the fourth opens).
        assert_eq!(
            breaker.record(late_after_close, Failed, SLOW, t0 + secs(6)),
            None
        );
        for _ in 0..3 {
            assert_eq!(one(&mut breaker, t0 + secs(6), Failed, FAST), None);
        }
        assert_eq!(breaker.state(), Closed);
    }

    #[test]
    fn a_lost_probe_reopens_after_its_lease_and_its_late_result_is_ignored() {
        let t0 = Instant::now();
        let mut breaker = opened_at(t0);
        let probe = first_probe(&mut breaker, t0 + secs(5));
        breaker.sending(&probe, t0 + secs(5));
        // The probe is lost: after its lease (`open_for`, 5 s) the next caller re-opens it.
        match breaker.admit(t0 + secs(10)) {
            (Admission::Refused { retry_after }, Some(t)) => {
                assert_eq!(t, transition(HalfOpen, Open));
                assert_eq!(retry_after, secs(5));
            }
            other => panic!("expected the lost probe to re-open the breaker, got {other:?}"),
        }
        let next_probe = first_probe(&mut breaker, t0 + secs(15));
        // The lost probe ends at last: it neither counts as a success nor frees the new slot.
        assert_eq!(breaker.record(probe, Succeeded, FAST, t0 + secs(15)), None);
        assert_eq!(refused(&mut breaker, t0 + secs(15)), secs(1));
        assert_eq!(
            breaker.record(next_probe, Failed, FAST, t0 + secs(16)),
            Some(transition(HalfOpen, Open))
        );
    }

    #[test]
    fn a_probe_lease_runs_from_its_call_not_its_admission() {
        let t0 = Instant::now();
        let mut breaker = opened_at(t0);
        let probe = first_probe(&mut breaker, t0 + secs(5));
        // Its claim takes 4 s (a slow database); the call leaves at 9 s.
        breaker.sending(&probe, t0 + secs(9));
        // 8 s after its admission but 4 s into its call: still the probe.
        assert_eq!(refused(&mut breaker, t0 + secs(13)), secs(1));
        assert_eq!(breaker.state(), HalfOpen);
        // A lease after its call left, it is taken as failed.
        match breaker.admit(t0 + secs(14)) {
            (Admission::Refused { .. }, Some(t)) => assert_eq!(t, transition(HalfOpen, Open)),
            other => panic!("expected the lost probe to re-open the breaker, got {other:?}"),
        }
    }

    #[test]
    fn a_probe_never_sent_within_its_lease_is_replaced_not_failed() {
        let t0 = Instant::now();
        let mut breaker = opened_at(t0);
        let stalled = first_probe(&mut breaker, t0 + secs(5));
        assert_eq!(refused(&mut breaker, t0 + ms(9_999)), secs(1));
        // Its claim stalled on the database for a whole lease: the bank is not to blame. The
        // next caller becomes the probe, and the breaker stays half-open.
        let replacement = call(&mut breaker, t0 + secs(10));
        assert!(replacement.probe.is_some());
        assert_eq!(breaker.state(), HalfOpen);
        // The stalled probe, sent and ended at last, counts nothing and frees no slot...
        breaker.sending(&stalled, t0 + secs(11));
        assert_eq!(breaker.record(stalled, Failed, FAST, t0 + secs(11)), None);
        assert_eq!(breaker.state(), HalfOpen);
        assert_eq!(refused(&mut breaker, t0 + secs(11)), secs(1));
        // ...while the replacement's result does.
        breaker.sending(&replacement, t0 + secs(11));
        assert_eq!(
            breaker.record(replacement, Succeeded, FAST, t0 + secs(11)),
            None
        );
        let last = call(&mut breaker, t0 + secs(11));
        assert_eq!(
            breaker.record(last, Succeeded, FAST, t0 + secs(11)),
            Some(transition(HalfOpen, Closed))
        );
    }

    #[test]
    fn an_abandoned_replaced_probe_frees_nothing() {
        let t0 = Instant::now();
        let mut breaker = opened_at(t0);
        let stalled = first_probe(&mut breaker, t0 + secs(5));
        let replacement = call(&mut breaker, t0 + secs(10));
        breaker.abandon(stalled);
        assert_eq!(refused(&mut breaker, t0 + secs(10)), secs(1));
        breaker.abandon(replacement);
        let _next = call(&mut breaker, t0 + secs(10));
    }

    #[test]
    fn a_probe_out_just_under_its_lease_still_holds_the_slot() {
        let t0 = Instant::now();
        let mut breaker = opened_at(t0);
        let probe = first_probe(&mut breaker, t0 + secs(5));
        assert_eq!(refused(&mut breaker, t0 + ms(9_999)), secs(1));
        assert_eq!(breaker.state(), HalfOpen);
        assert_eq!(breaker.record(probe, Succeeded, FAST, t0 + secs(10)), None);
    }

    #[test]
    fn old_buckets_age_out_of_the_window() {
        let t0 = Instant::now();
        let mut breaker = Breaker::new(settings());
        // Three failures at the start of the window.
        for _ in 0..3 {
            assert_eq!(one(&mut breaker, t0, Failed, FAST), None);
        }
        // One more just before they leave it would open it (checked on a twin breaker)...
        let mut twin = Breaker::new(settings());
        for _ in 0..3 {
            assert_eq!(one(&mut twin, t0, Failed, FAST), None);
        }
        assert_eq!(
            one(&mut twin, t0 + ms(9_999), Failed, FAST),
            Some(transition(Closed, Open))
        );
        // ...but a whole window later they no longer count: three more failures stay closed.
        for _ in 0..3 {
            assert_eq!(one(&mut breaker, t0 + secs(10), Failed, FAST), None);
        }
        assert_eq!(breaker.state(), Closed);
        // And those three count with a fourth, 9 s later still, in the same window.
        assert_eq!(
            one(&mut breaker, t0 + secs(19), Failed, FAST),
            Some(transition(Closed, Open))
        );
    }

    #[test]
    fn successes_dilute_failures_only_while_they_are_in_the_window() {
        let t0 = Instant::now();
        let mut breaker = Breaker::new(settings());
        for _ in 0..6 {
            assert_eq!(one(&mut breaker, t0, Succeeded, FAST), None);
        }
        // 3 failures in 9 calls: a third, below half.
        for _ in 0..3 {
            assert_eq!(one(&mut breaker, t0 + secs(5), Failed, FAST), None);
        }
        assert_eq!(breaker.state(), Closed);
        // Once the successes have aged out, the next failure makes 4 of 4.
        assert_eq!(
            one(&mut breaker, t0 + secs(12), Failed, FAST),
            Some(transition(Closed, Open))
        );
    }

    #[test]
    fn a_long_silence_empties_the_window() {
        let t0 = Instant::now();
        let mut breaker = Breaker::new(settings());
        for _ in 0..3 {
            assert_eq!(one(&mut breaker, t0, Failed, FAST), None);
        }
        let later = t0 + Duration::from_secs(86_400 * 365);
        for _ in 0..3 {
            assert_eq!(one(&mut breaker, later, Failed, FAST), None);
        }
        assert_eq!(breaker.state(), Closed);
    }

    #[test]
    fn results_recorded_out_of_order_do_not_panic_and_too_old_ones_count_nowhere() {
        let t0 = Instant::now();
        let mut breaker = Breaker::new(settings());
        assert_eq!(one(&mut breaker, t0, Succeeded, FAST), None);
        assert_eq!(one(&mut breaker, t0 + secs(20), Succeeded, FAST), None);
        // Stamped a whole window before the newest result: not counted.
        for _ in 0..5 {
            assert_eq!(one(&mut breaker, t0 + secs(5), Failed, FAST), None);
        }
        assert_eq!(breaker.state(), Closed);
        // Two more in the window make 3 calls with the newest success: still below min_calls.
        assert_eq!(one(&mut breaker, t0 + secs(15), Failed, FAST), None);
        assert_eq!(one(&mut breaker, t0 + secs(20), Failed, FAST), None);
        assert_eq!(breaker.state(), Closed);
        assert_eq!(
            one(&mut breaker, t0 + secs(20), Failed, FAST),
            Some(transition(Closed, Open))
        );
        // A result stamped before the window's base counts in its first bucket.
        let mut breaker = Breaker::new(settings());
        assert_eq!(one(&mut breaker, t0 + secs(20), Failed, FAST), None);
        assert_eq!(one(&mut breaker, t0, Failed, FAST), None);
        assert_eq!(one(&mut breaker, t0, Failed, FAST), None);
        assert_eq!(
            one(&mut breaker, t0, Failed, FAST),
            Some(transition(Closed, Open))
        );
    }

    #[test]
    fn unchecked_nonsense_settings_do_not_panic() {
        let t0 = Instant::now();
        let nonsense = BreakerSettings {
            window: Duration::ZERO,
            min_calls: 0,
            failure_share: f64::NAN,
            slow_call: Duration::ZERO,
            slow_share: f64::NAN,
            open_for: Duration::MAX,
            probes_to_close: 0,
        };
        let mut breaker = Breaker::new(nonsense);
        for i in 0..5 {
            let _ = one(&mut breaker, t0 + ms(i), Failed, Duration::MAX);
        }
        let mut breaker = Breaker::new(BreakerSettings {
            failure_share: 0.0,
            ..nonsense
        });
        assert_eq!(
            one(&mut breaker, t0, Failed, FAST),
            Some(transition(Closed, Open))
        );
        assert!(refused(&mut breaker, t0 + secs(1_000_000)) > secs(1_000_000));
    }

    #[test]
    fn bank_breaker_finish_records_and_drop_abandons() {
        let bank = BankBreaker::new(BreakerSettings {
            min_calls: 2,
            failure_share: 1.0,
            open_for: Duration::from_millis(1),
            ..settings()
        });
        assert_eq!(bank.state(), Closed);
        let (first, none) = bank.admit();
        assert_eq!(none, None);
        let Ok(first) = first else {
            panic!("a closed breaker admits");
        };
        assert!(first.ticket.as_ref().is_some_and(|t| t.probe.is_none()));
        assert_eq!(first.finish(Failed, FAST), None);
        let (second, _) = bank.admit();
        let Ok(second) = second else {
            panic!("a closed breaker admits");
        };
        assert_eq!(second.finish(Failed, FAST), Some(transition(Closed, Open)));
        assert_eq!(bank.state(), Open);

        // Once `open_for` (1 ms) has passed: a probe, whose drop frees the slot.
        std::thread::sleep(Duration::from_millis(5));
        let (probe, opened) = bank.admit();
        assert_eq!(opened, Some(transition(Open, HalfOpen)));
        let Ok(probe) = probe else {
            panic!("the first caller after open_for is the probe");
        };
        assert!(probe.ticket.as_ref().is_some_and(|t| t.probe.is_some()));
        let (busy, _) = bank.admit();
        assert_eq!(busy.err(), Some(secs(1)));
        drop(probe);
        let (probe, none) = bank.admit();
        assert_eq!(none, None);
        let Ok(probe) = probe else {
            panic!("the dropped probe freed the slot");
        };
        assert_eq!(probe.finish(Succeeded, FAST), None);
        let (probe, _) = bank.admit();
        let Ok(probe) = probe else {
            panic!("the next probe is admitted");
        };
        assert_eq!(
            probe.finish(Succeeded, FAST),
            Some(transition(HalfOpen, Closed))
        );
        assert_eq!(bank.state(), Closed);
    }

    #[test]
    fn bank_breaker_survives_a_poisoned_lock() {
        let bank = BankBreaker::new(settings());
        let inner = Arc::clone(&bank.inner);
        let panicked = std::thread::spawn(move || {
            let _held = inner.lock();
            panic!("a panic while holding the breaker (expected by this test)");
        })
        .join();
        assert!(panicked.is_err());
        assert!(bank.inner.is_poisoned());
        assert_eq!(bank.state(), Closed);
        let (ticket, _) = bank.admit();
        let Ok(ticket) = ticket else {
            panic!("a closed breaker admits");
        };
        assert_eq!(ticket.finish(Succeeded, FAST), None);
        let (ticket, _) = bank.admit();
        drop(ticket);
    }

    #[test]
    fn bank_breaker_and_call_ticket_can_cross_threads_and_awaits() {
        fn send_sync<T: Send + Sync + 'static>() {}
        fn send<T: Send + 'static>() {}
        send_sync::<BankBreaker>();
        send::<CallTicket>();
        // A ticket moved into another thread and finished there.
        let bank = BankBreaker::new(settings());
        let (ticket, _) = bank.admit();
        let Ok(ticket) = ticket else {
            panic!("a closed breaker admits");
        };
        let finished = std::thread::spawn(move || ticket.finish(Succeeded, FAST)).join();
        assert!(matches!(finished, Ok(None)));
    }
}
