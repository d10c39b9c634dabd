//! The server's path for one payment or refund request, as a pure state machine: what the
//! backend does next, given what the last step found. The backend's flows are its interpreter;
//! they carry each [`Step`] out (a cache look-up, a statement, a bank call, a wait) and feed what
//! came of it back as an [`Event`]. No rule of the path lives in the interpreter, and every path
//! is a test vector (`shared/vectors/server-path.json`), run natively and in Wasm.
//!
//! The path, as the vectors walk it:
//! 1. **Replay from memory**: a repeat that sends the very bytes of one replayed from memory is
//!    judged before its body is parsed ([`Step::RecallSameBytes`]); any other request is
//!    admitted ([`Step::Admit`]: body, key, fields) and then looked up in memory
//!    ([`Step::Recall`]). A remembered finished key is replayed (or a mismatch refused) from
//!    there; anything else is forgotten and the database decides.
//! 2. **Rounds**: a round claims the key ([`Step::Claim`]), or after a wait reads it first
//!    ([`Step::Read`]); a key stored already is decided on by [`decide`] (SPEC §4), and a key
//!    that must be claimed again (expired, released, vanished) is claimed again, at most
//!    [`CLAIM_TRIES`] times in a request.
//! 3. **The claim's work**: one bank call ([`Step::CallBank`]); a final word is saved
//!    ([`Step::Save`]); a call the bank did not execute, or one that never got a place, is
//!    released ([`Step::Release`]); anything else leaves the key `unknown`
//!    ([`Step::MarkUnknown`]) and the reply says "outcome pending".
//! 4. **Waiting**: a round that finds the key at work ends the request with 409, unless it asked
//!    to wait (`Prefer: wait`): then [`Step::Wait`], and another round, until its wait is up.
//!
//! Every path ends in [`Step::Reply`] (or [`Step::GiveUp`], a broken invariant). I/O failures
//! are not events: the interpreter ends the request with its error, and the key is left as the
//! last committed write says, for reconciliation.

use time::OffsetDateTime;

use crate::decision::{Attempt, Decision, StoredRecord, decide};
use crate::policy::Policy;

#[cfg(test)]
mod vectors;

/// How many claims a request makes at most: the one loop for every race between a claim and
/// the key's row. Reusing an expired key released with a check still to come takes three
/// (settle the old claim, delete the key, claim it); a key that vanishes between a claim and its
/// read (expired and deleted in that instant) takes one more; one beyond spares a rarer race a
/// spurious error.
pub const CLAIM_TRIES: u8 = 5;

/// A stored key as the path sees it: the record [`decide`] reads, when it was read, and, for an
/// `unknown` key, where its status checks stand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenKey {
    /// The record the decision reads.
    pub record: StoredRecord,
    /// When it was read, on the database's clock (or, from memory, its estimate of it).
    pub read_at: OffsetDateTime,
    /// When the rail allows the movement's next status check; `None` once its checks ran out.
    pub next_check_at: Option<OffsetDateTime>,
    /// When the settlement file is due, for a key whose checks ran out and that awaits it.
    pub settlement_due_at: Option<OffsetDateTime>,
}

impl SeenKey {
    /// Whether the rail allows a status check now (or the checks ran out, and the key is yet to
    /// be marked awaiting settlement).
    fn status_check_due(&self) -> bool {
        self.next_check_at.is_none_or(|due| self.read_at >= due)
    }
}

/// What the bank's reply to the claim's call said, as the bank port classifies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BankSaid {
    /// Succeeded or declined: the final word, to save.
    Final,
    /// The bank did not execute the call, or it never left: nothing moved, nothing is on its way.
    NotExecuted,
    /// No final word (a timeout, a lost reply, a gateway's error): money may have moved.
    MayBeInFlight,
    /// The bank had no free place for the call within the queue's wait: nothing was sent.
    NoPlace,
}

/// How the save of the bank's final word went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaveEnd {
    /// Saved, and the first reply rendered from the movement.
    Saved,
    /// The movement was gone before its outcome was saved (a broken invariant).
    MovementVanished,
    /// The write failed: the key is to be marked `unknown` for reconciliation.
    Failed,
}

/// What asking the bank about the key (holding the key's lease, as a reconciler does) came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    /// The bank's final word, saved; its reply rendered (as a replay).
    Finished,
    /// The bank never saw the reference: the claim was released.
    Released,
    /// The last check never saw it: the movement is void.
    Voided,
    /// Not final yet (pending at the bank, or no check allowed yet): checked again then.
    NotYet {
        /// When the rail allows the next check.
        next_check_at: OffsetDateTime,
    },
    /// The checks ran out; the settlement file is the final word.
    AwaitingSettlement {
        /// When the file is due.
        due_at: OffsetDateTime,
    },
    /// Someone else holds the key's lease (a reconciler, another request), or took it over.
    Busy,
}

/// What came of the last step, fed to [`ServerPath::next`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The request arrived.
    Arrived,
    /// [`Step::RecallSameBytes`]: the key remembered with a replay of the very same bytes, and
    /// the attempt those bytes make; `None` otherwise.
    RecalledSameBytes(Option<(SeenKey, Attempt)>),
    /// [`Step::Admit`]: the request passed, as this attempt.
    Admitted(Attempt),
    /// [`Step::Admit`]: the request was refused (its problem is the interpreter's to render).
    Refused,
    /// [`Step::Recall`]: the finished key remembered in memory, if any.
    Recalled(Option<SeenKey>),
    /// [`Step::Forget`] done.
    Forgotten,
    /// [`Step::Claim`]: this request holds the key now, with a fresh pending movement; the key
    /// expires then.
    Claimed {
        /// The new key's expiry, as its row says.
        expires_at: OffsetDateTime,
    },
    /// [`Step::Claim`] or [`Step::Read`]: the key is stored already.
    Found(SeenKey),
    /// [`Step::Read`]: no such key.
    NotFound,
    /// [`Step::Claim`]: the key existed at the claim and was gone at the read.
    Vanished,
    /// [`Step::Claim`] or [`Step::Reclaim`]: the bank's breaker refuses new calls; nothing was
    /// claimed.
    BreakerRefused,
    /// [`Step::Claim`]: the refunded payment is no succeeded payment of the user's.
    PaymentNotFound,
    /// [`Step::Claim`]: the refund exceeds what remains refundable.
    ExceedsRemaining {
        /// What remains, in paise.
        remaining_paise: i64,
    },
    /// [`Step::Reclaim`]: this request holds the released key again (same movement and
    /// reference).
    Reclaimed,
    /// [`Step::Reclaim`]: another request or a reconciler got there first, or the last check
    /// voided it.
    NotReclaimed,
    /// [`Step::CallBank`]: what the bank said.
    BankSaid(BankSaid),
    /// [`Step::Save`]: how the save went.
    SaveEnded(SaveEnd),
    /// [`Step::MarkUnknown`]: marked, with when the first check is due; `None` if the write
    /// failed (the key stays `started`, and the claim's lease lapses to a reconciler).
    MarkedUnknown(Option<OffsetDateTime>),
    /// [`Step::Release`]: `true` if released; `false` if the write failed (the key stays
    /// `started` for reconciliation).
    Released(bool),
    /// [`Step::AskBank`]: what it came to.
    Asked(Asked),
    /// [`Step::DeleteExpired`]: `true` if the expired key was deleted.
    Deleted(bool),
    /// [`Step::ReplayFromMemory`] or [`Step::ReplayFromDatabase`]: the reply is rendered.
    Rendered,
    /// [`Step::Wait`]: `true` if the request waited and reads again; `false` if it may wait no
    /// longer (its time is up, or no waiting place was free).
    Waited(bool),
}

/// Why a claim is released.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseWhy {
    /// The bank did not execute the call.
    NotExecuted,
    /// The bank had no place for the call; nothing was sent.
    NoPlace,
}

/// The reply a request ends with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// The reply the last step rendered: the first reply, a replay, or the reply of what the
    /// bank said when asked.
    Rendered,
    /// 400/413/422/404: the admission's problem.
    NotAdmitted,
    /// 422: the key was used with another request.
    Mismatch,
    /// 409 with `Retry-After`: the key's first attempt is at work.
    InProgress,
    /// 503 "outcome pending", with when the next check is allowed if known.
    OutcomePending(Option<OffsetDateTime>),
    /// 503: the checks ran out and the settlement file, due then, will settle it.
    AwaitingSettlement(OffsetDateTime),
    /// 503 `bank-unavailable`: the breaker refuses new calls; nothing was claimed.
    BankUnavailable,
    /// 503: nothing was charged (the claim is released), and why; retry with the same key.
    NothingCharged(ReleaseWhy),
    /// 404: a refund of a payment the user does not have.
    PaymentNotFound,
    /// 422: a refund larger than what remains.
    ExceedsRemaining {
        /// What remains, in paise.
        remaining_paise: i64,
    },
}

impl Ending {
    /// Whether the reply is about a stored key, and so carries the key's expiry: all but the
    /// refusals made before any key was claimed or found.
    pub fn is_about_the_key(&self) -> bool {
        !matches!(
            self,
            Ending::NotAdmitted
                | Ending::BankUnavailable
                | Ending::PaymentNotFound
                | Ending::ExceedsRemaining { .. }
        )
    }
}

/// What the interpreter does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Look the key up in memory, and whether its last replay from there had these very bytes.
    RecallSameBytes,
    /// Check the body, the key and the fields ([`crate::admission::admit`]).
    Admit,
    /// Look the key up in memory.
    Recall,
    /// Drop the key's memory entry: the database decides.
    Forget,
    /// Replay the remembered reply.
    ReplayFromMemory,
    /// Claim the key with a fresh pending movement, once the bank's breaker admits a call.
    Claim,
    /// Read the key.
    Read,
    /// Render the finished key's saved reply from its movement, and remember it.
    ReplayFromDatabase,
    /// Claim the released key again, once the breaker admits a call.
    Reclaim,
    /// Call the bank once under the claim's reference.
    CallBank,
    /// Save the bank's final word and render the first reply.
    Save,
    /// Mark the key `unknown`, due for its first status check when the rail allows.
    MarkUnknown,
    /// Give the claim back: nothing was sent, or the bank did not execute it.
    Release(ReleaseWhy),
    /// Ask the bank about the key now, holding its lease as a reconciler does.
    AskBank,
    /// Delete the expired key, so the request claims it afresh.
    DeleteExpired,
    /// Wait for the key to change (or a poll interval), then read it again.
    Wait,
    /// End the request with this reply.
    Reply(Ending),
    /// The claims ran out ([`CLAIM_TRIES`]): a broken invariant, a 500.
    GiveUp,
}

impl Step {
    /// The step's name, as the vectors and the traces write it (`reply outcome_pending`, …).
    pub fn label(&self) -> String {
        let ending = match self {
            Step::Reply(ending) => ending,
            other => return step_name(other).to_owned(),
        };
        let name = match ending {
            Ending::Rendered => "rendered",
            Ending::NotAdmitted => "not_admitted",
            Ending::Mismatch => "mismatch",
            Ending::InProgress => "in_progress",
            Ending::OutcomePending(None) => "outcome_pending",
            Ending::OutcomePending(Some(_)) => "outcome_pending known_by",
            Ending::AwaitingSettlement(_) => "awaiting_settlement",
            Ending::BankUnavailable => "bank_unavailable",
            Ending::NothingCharged(ReleaseWhy::NotExecuted) => "nothing_charged not_executed",
            Ending::NothingCharged(ReleaseWhy::NoPlace) => "nothing_charged no_place",
            Ending::PaymentNotFound => "payment_not_found",
            Ending::ExceedsRemaining { .. } => "exceeds_remaining",
        };
        format!("reply {name}")
    }
}

fn step_name(step: &Step) -> &'static str {
    match step {
        Step::RecallSameBytes => "recall_same_bytes",
        Step::Admit => "admit",
        Step::Recall => "recall",
        Step::Forget => "forget",
        Step::ReplayFromMemory => "replay_from_memory",
        Step::Claim => "claim",
        Step::Read => "read",
        Step::ReplayFromDatabase => "replay_from_database",
        Step::Reclaim => "reclaim",
        Step::CallBank => "call_bank",
        Step::Save => "save",
        Step::MarkUnknown => "mark_unknown",
        Step::Release(ReleaseWhy::NotExecuted) => "release not_executed",
        Step::Release(ReleaseWhy::NoPlace) => "release no_place",
        Step::AskBank => "ask_bank",
        Step::DeleteExpired => "delete_expired",
        Step::Wait => "wait",
        Step::Reply(_) => "reply",
        Step::GiveUp => "give_up",
    }
}

/// Why the bank is asked inline, which says what a busy lease means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AskWhy {
    /// An `unknown` key whose next check is due: busy means still pending.
    Pending,
    /// A `started` key past `stuck_after`: busy means at work.
    Stuck,
    /// An expired released key's last check before the key is reused: settled or not, the
    /// key is claimed afresh after it.
    BeforeReuse,
}

/// Where the path is: the step it waits to hear from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum At {
    Arriving,
    RecallingSameBytes,
    Admitting,
    Recalling,
    Forgetting,
    ReplayingFromMemory,
    Claiming,
    /// Reading the key; `breaker_refused`: a claim was refused, so no key means 503.
    Reading {
        breaker_refused: bool,
    },
    ReplayingFromDatabase,
    Reclaiming,
    Calling,
    Saving,
    MarkingUnknown {
        after_failed_save: bool,
    },
    Releasing(ReleaseWhy),
    Asking(AskWhy),
    Deleting,
    Waiting,
    Ended,
}

/// One request's path: feed it events, carry out its steps.
#[derive(Debug, Clone)]
pub struct ServerPath {
    at: At,
    /// The request as the decision sees it, once known.
    attempt: Option<Attempt>,
    /// The key as last seen.
    seen: Option<SeenKey>,
    /// The key's expiry as last seen or claimed, for the replies about it.
    expires_at: Option<OffsetDateTime>,
    /// Whether the request asked to wait (`Prefer: wait`).
    may_wait: bool,
    /// Whether it has waited: a round after a wait reads the key before any claim.
    waited: bool,
    claims_left: u8,
}

impl ServerPath {
    /// The path of a request that asked to wait (`may_wait`) or not.
    pub fn new(may_wait: bool) -> ServerPath {
        ServerPath {
            at: At::Arriving,
            attempt: None,
            seen: None,
            expires_at: None,
            may_wait,
            waited: false,
            claims_left: CLAIM_TRIES,
        }
    }

    /// The key as the path last saw it.
    pub fn seen(&self) -> Option<&SeenKey> {
        self.seen.as_ref()
    }

    /// When the key expires, as last seen or claimed: every reply about the key says so.
    pub fn expires_at(&self) -> Option<OffsetDateTime> {
        self.expires_at
    }

    /// Whether the request waited at some point.
    pub fn has_waited(&self) -> bool {
        self.waited
    }

    /// The next step, given what came of the last (`Event::Arrived` first). An event the current
    /// step cannot produce is a bug in the interpreter, and gives up.
    pub fn next(&mut self, policy: &Policy, event: Event) -> Step {
        let step = self.after(policy, event);
        self.at = match &step {
            Step::RecallSameBytes => At::RecallingSameBytes,
            Step::Admit => At::Admitting,
            Step::Recall => At::Recalling,
            Step::Forget => At::Forgetting,
            Step::ReplayFromMemory => At::ReplayingFromMemory,
            Step::Claim => At::Claiming,
            Step::Read => At::Reading {
                breaker_refused: matches!(self.at, At::Claiming),
            },
            Step::ReplayFromDatabase => At::ReplayingFromDatabase,
            Step::Reclaim => At::Reclaiming,
            Step::CallBank => At::Calling,
            Step::Save => At::Saving,
            Step::MarkUnknown => At::MarkingUnknown {
                after_failed_save: matches!(self.at, At::Saving),
            },
            Step::Release(why) => At::Releasing(*why),
            Step::AskBank => At::Asking(self.ask_why()),
            Step::DeleteExpired => At::Deleting,
            Step::Wait => At::Waiting,
            Step::Reply(_) | Step::GiveUp => At::Ended,
        };
        step
    }

    fn after(&mut self, policy: &Policy, event: Event) -> Step {
        match (self.at.clone(), event) {
            (At::Arriving, Event::Arrived) => Step::RecallSameBytes,
            (At::RecallingSameBytes, Event::RecalledSameBytes(Some((seen, attempt)))) => {
                self.attempt = Some(attempt);
                self.judge_remembered(policy, seen, Step::Admit)
            }
            (At::RecallingSameBytes, Event::RecalledSameBytes(None)) => Step::Admit,
            (At::Admitting, Event::Admitted(attempt)) => {
                self.attempt = Some(attempt);
                Step::Recall
            }
            (At::Admitting, Event::Refused) => Step::Reply(Ending::NotAdmitted),
            (At::Recalling, Event::Recalled(Some(seen))) => {
                self.judge_remembered(policy, seen, Step::Forget)
            }
            (At::Recalling, Event::Recalled(None)) | (At::Forgetting, Event::Forgotten) => {
                (self.seen, self.expires_at) = (None, None);
                self.claim_again()
            }
            (At::ReplayingFromMemory | At::ReplayingFromDatabase, Event::Rendered) => {
                Step::Reply(Ending::Rendered)
            }
            (At::Claiming, Event::Claimed { expires_at }) => {
                self.expires_at = Some(expires_at);
                Step::CallBank
            }
            (At::Reclaiming, Event::Reclaimed) => Step::CallBank,
            (At::Claiming | At::Reading { .. }, Event::Found(seen)) => self.decide_on(policy, seen),
            (At::Claiming, Event::Vanished) => self.claim_again(),
            (At::Claiming, Event::BreakerRefused) => Step::Read,
            (At::Reading { breaker_refused }, Event::NotFound) => match breaker_refused {
                true => Step::Reply(Ending::BankUnavailable),
                false => self.claim_again(),
            },
            (At::Claiming, Event::PaymentNotFound) => Step::Reply(Ending::PaymentNotFound),
            (At::Claiming, Event::ExceedsRemaining { remaining_paise }) => {
                Step::Reply(Ending::ExceedsRemaining { remaining_paise })
            }
            (At::Reclaiming, Event::BreakerRefused) => Step::Reply(Ending::BankUnavailable),
            (At::Reclaiming, Event::NotReclaimed) => self.at_work(),
            (At::Calling, Event::BankSaid(said)) => match said {
                BankSaid::Final => Step::Save,
                BankSaid::NotExecuted => Step::Release(ReleaseWhy::NotExecuted),
                BankSaid::NoPlace => Step::Release(ReleaseWhy::NoPlace),
                BankSaid::MayBeInFlight => Step::MarkUnknown,
            },
            (At::Saving, Event::SaveEnded(end)) => match end {
                SaveEnd::Saved => Step::Reply(Ending::Rendered),
                SaveEnd::MovementVanished => Step::Reply(Ending::OutcomePending(None)),
                SaveEnd::Failed => Step::MarkUnknown,
            },
            (At::MarkingUnknown { after_failed_save }, Event::MarkedUnknown(due)) => {
                // After a failed save the check is due at once; the reply does not promise it,
                // since the database that refused the save may refuse the mark too.
                let known_by = if after_failed_save { None } else { due };
                Step::Reply(Ending::OutcomePending(known_by))
            }
            (At::Releasing(why), Event::Released(true)) => Step::Reply(Ending::NothingCharged(why)),
            (At::Releasing(_), Event::Released(false)) => Step::Reply(Ending::OutcomePending(None)),
            (At::Asking(why), Event::Asked(asked)) => self.after_asking(why, asked),
            (At::Deleting, Event::Deleted(deleted)) => {
                let released = self.seen.as_ref().map(|seen| seen.record.state)
                    == Some(crate::KeyState::Released);
                match deleted || !released {
                    true => self.claim_again(),
                    // Released with its last check still to come: settle the old claim first.
                    false => Step::AskBank,
                }
            }
            (At::Waiting, Event::Waited(true)) => {
                // Each round after a wait has its claims afresh.
                (self.waited, self.claims_left) = (true, CLAIM_TRIES);
                Step::Read
            }
            (At::Waiting, Event::Waited(false)) => Step::Reply(Ending::InProgress),
            _ => Step::GiveUp,
        }
    }

    /// A remembered finished key judged as a database read would be: a replay or a refused
    /// mismatch from memory; anything else is `otherwise` (the database decides).
    fn judge_remembered(&mut self, policy: &Policy, seen: SeenKey, otherwise: Step) -> Step {
        let decision = self.decision(policy, &seen);
        self.see(seen);
        match decision {
            Decision::Replay => Step::ReplayFromMemory,
            Decision::RejectMismatch => Step::Reply(Ending::Mismatch),
            _ => otherwise,
        }
    }

    fn see(&mut self, seen: SeenKey) {
        self.expires_at = Some(seen.record.expires_at);
        self.seen = Some(seen);
    }

    fn decision(&self, policy: &Policy, seen: &SeenKey) -> Decision {
        match &self.attempt {
            Some(attempt) => decide(policy, attempt, Some(&seen.record), seen.read_at),
            // Unreachable: a key is looked up only once the request is admitted.
            None => Decision::RejectMismatch,
        }
    }

    /// The shared decision on a stored key (SPEC §4), as a step.
    fn decide_on(&mut self, policy: &Policy, seen: SeenKey) -> Step {
        let decision = self.decision(policy, &seen);
        let pending = (seen.settlement_due_at, seen.next_check_at);
        let check_due = seen.status_check_due();
        self.see(seen);
        match decision {
            Decision::Replay => Step::ReplayFromDatabase,
            Decision::InProgress { .. } => self.at_work(),
            Decision::OutcomePending { .. } => match pending {
                (Some(due_at), _) => Step::Reply(Ending::AwaitingSettlement(due_at)),
                // The customer's own retry asks the bank when the rail allows the movement's
                // next check (even in quiet hours, which hold only the reconciler's checks).
                (None, _) if check_due => Step::AskBank,
                (None, next_check_at) => Step::Reply(Ending::OutcomePending(next_check_at)),
            },
            Decision::RejectMismatch => Step::Reply(Ending::Mismatch),
            Decision::Reconcile => Step::AskBank,
            Decision::ClaimReleased => Step::Reclaim,
            Decision::ClaimExpired => Step::DeleteExpired,
            // Decisions that arise only before a key is looked up.
            Decision::Claim
            | Decision::ProceedWithoutKey
            | Decision::RejectMissingKey
            | Decision::RejectMalformedKey(_) => self.claim_again(),
        }
    }

    /// Why the bank is about to be asked, from where the path stands.
    fn ask_why(&self) -> AskWhy {
        match (&self.at, self.seen.as_ref().map(|seen| seen.record.state)) {
            (At::Deleting, _) => AskWhy::BeforeReuse,
            (_, Some(crate::KeyState::Unknown)) => AskWhy::Pending,
            _ => AskWhy::Stuck,
        }
    }

    fn after_asking(&mut self, why: AskWhy, asked: Asked) -> Step {
        match (why, asked) {
            (AskWhy::BeforeReuse, Asked::Finished | Asked::Voided | Asked::Released) => {
                self.claim_again()
            }
            (_, Asked::Finished) => Step::Reply(Ending::Rendered),
            // Released: the next claim finds it released and claims it again for this request.
            (_, Asked::Released | Asked::Voided) => self.claim_again(),
            (_, Asked::NotYet { next_check_at }) => {
                Step::Reply(Ending::OutcomePending(Some(next_check_at)))
            }
            (_, Asked::AwaitingSettlement { due_at }) => {
                Step::Reply(Ending::AwaitingSettlement(due_at))
            }
            // Someone else is asking the bank right now: still pending, as before.
            (AskWhy::Pending, Asked::Busy) => {
                let next_check_at = self.seen.as_ref().and_then(|seen| seen.next_check_at);
                Step::Reply(Ending::OutcomePending(next_check_at))
            }
            (AskWhy::Stuck | AskWhy::BeforeReuse, Asked::Busy) => self.at_work(),
        }
    }

    /// The key is at work: wait if the request may, else 409.
    fn at_work(&self) -> Step {
        match self.may_wait {
            true => Step::Wait,
            false => Step::Reply(Ending::InProgress),
        }
    }

    /// A claim (the first of a round, or again after a key was freed), while claims are left.
    fn claim_again(&mut self) -> Step {
        if self.claims_left == 0 {
            return Step::GiveUp;
        }
        self.claims_left -= 1;
        Step::Claim
    }
}
