//! The run of one action: the shared rules ([`ActionProgress`]) decide every move, this loop
//! makes them on a clock and a transport and reports what happens.
//!
//! Each attempt sends the saved key and body bytes, unchanged. A final reply (2xx, 402, another
//! 4xx) ends the action; a retryable reply (409 in progress, 503 outcome pending, 429, 5xx) or
//! no reply at all (the attempt timed out, the connection failed) leads to a wait of
//! `uniform(0, ceiling)` with `Retry-After` as its floor, then the same request again. Once the
//! next wait would cross the deadline, no further attempt is sent and the key's status is looked
//! up instead (`status_check`): paying again cannot be the cure for not knowing.
//!
//! Every request carries the same `Prefer: wait=N` ([`ClientRules::wait_to_ask`]), so a retry
//! that finds the first attempt still running can get its reply instead of a 409.
//!
//! A run is one trace: its attempts and look-ups share a trace id minted when it starts (a run
//! resumed after a restart starts a new trace; the key still ties the two together).
//!
//! [`ClientRules::wait_to_ask`]: shared::retry::ClientRules::wait_to_ask

use std::time::Duration;

use shared::retry::{ActionProgress, Ending, Next, Seen, Unsettled};
use shared::trace_context::TraceId;

use crate::action_result::{ActionResult, Completion, FinalReply, KnownBy};
use crate::action_store::SavedAction;
use crate::clock::{Clock, within};
use crate::events::{Event, Report};
use crate::jitter::Jitter;
use crate::payments_client::PaymentsClient;
use crate::status_check::saved_reply;
use crate::transport::{Reply, Transport};

/// A reply the rules stopped on that this client cannot read back: the action stays saved.
const UNREADABLE: ActionResult = ActionResult::Unsettled(Unsettled::Unreachable);

/// The last reply a run has seen, kept for the final reply the rules may stop on.
enum LastReply {
    None,
    Attempt(Reply),
    LookUp(Reply),
}

impl<T: Transport, C: Clock, J: Jitter> PaymentsClient<T, C, J> {
    /// Sends `saved` (already in the store) until its outcome is known or the deadline passes,
    /// reporting progress to `report`. A resumed action past its deadline is not sent again:
    /// its outcome is looked up.
    pub async fn run(&self, saved: &SavedAction, report: &Report) -> Completion {
        let (mut progress, mut next) = ActionProgress::start(self.config, self.elapsed(saved));
        let trace = TraceId::mint();
        let mut last = LastReply::None;
        let mut last_retry_after = None;
        let mut look_ups = 0;
        let mut first_of_phase = true;
        loop {
            let seen = match next {
                Next::Send { after, prefer_wait } => {
                    self.pause(after, first_of_phase, last_retry_after, report)
                        .await;
                    first_of_phase = false;
                    let (seen, reply) = self
                        .attempt(
                            saved,
                            progress.attempts(),
                            prefer_wait.map(Duration::from_secs),
                            trace,
                            report,
                        )
                        .await;
                    last = reply.map_or(LastReply::None, LastReply::Attempt);
                    seen
                }
                Next::LookUp { after, prefer_wait } => {
                    if look_ups == 0 {
                        first_of_phase = true;
                    }
                    self.pause(after, first_of_phase, last_retry_after, report)
                        .await;
                    if look_ups == 0 {
                        report(&Event::StoppedSending {
                            attempts: progress.attempts(),
                        });
                    }
                    first_of_phase = false;
                    look_ups += 1;
                    let (seen, reply) = self
                        .look_up(
                            saved,
                            look_ups,
                            prefer_wait.map(Duration::from_secs),
                            trace,
                            report,
                        )
                        .await;
                    last = reply.map_or(LastReply::None, LastReply::LookUp);
                    seen
                }
                Next::Stop(ending) => {
                    return self
                        .end(saved, progress.attempts(), ending, last, report)
                        .await;
                }
            };
            last_retry_after = match seen {
                Seen::Reply { retry_after, .. } => retry_after,
                Seen::Nothing => None,
            };
            next = progress.next(seen, self.elapsed(saved), self.jitter.unit());
        }
    }

    /// Waits `wait` before the next request, reported, except the unannounced zero wait of a
    /// phase's first request.
    async fn pause(
        &self,
        wait: Duration,
        first_of_phase: bool,
        retry_after: Option<Duration>,
        report: &Report,
    ) {
        if first_of_phase && wait.is_zero() {
            return;
        }
        report(&Event::Waiting { wait, retry_after });
        self.clock.sleep(wait).await;
    }

    /// Sends attempt number `attempt`, in the run's `trace`, and says what came back.
    async fn attempt(
        &self,
        saved: &SavedAction,
        attempt: u32,
        prefer_wait: Option<Duration>,
        trace: TraceId,
        report: &Report,
    ) -> (Seen, Option<Reply>) {
        report(&Event::Sending {
            attempt,
            prefer_wait,
        });
        let sent = within(
            &self.clock,
            self.config.attempt_timeout,
            self.transport.send(saved.action(), prefer_wait, trace),
        )
        .await;
        match sent {
            Some(Ok(reply)) => {
                report(&Event::Replied {
                    attempt,
                    status: reply.status,
                    replayed: reply.replayed,
                    waited: reply.wait_applied,
                });
                let seen = Seen::Reply {
                    status: reply.status,
                    retry_after: reply.retry_after,
                    key_state: None,
                };
                (seen, Some(reply))
            }
            Some(Err(error)) => {
                report(&Event::NoReply {
                    attempt,
                    reason: error.to_string(),
                });
                (Seen::Nothing, None)
            }
            None => {
                report(&Event::NoReply {
                    attempt,
                    reason: format!(
                        "no reply within {:.3} s",
                        self.config.attempt_timeout.as_secs_f64()
                    ),
                });
                (Seen::Nothing, None)
            }
        }
    }

    /// Ends the run as the rules stopped it: a final reply or a key never received deletes
    /// the action; anything else keeps it saved.
    async fn end(
        &self,
        saved: &SavedAction,
        attempts: u32,
        ending: Ending,
        last: LastReply,
        report: &Report,
    ) -> Completion {
        let known_by = match (&ending, &last) {
            (Ending::Unsettled(_), LastReply::Attempt(reply) | LastReply::LookUp(reply)) => {
                KnownBy::named_in(&reply.body)
            }
            _ => None,
        };
        let result = match (ending, last) {
            (Ending::Replied { .. }, LastReply::Attempt(reply)) => {
                ActionResult::Replied(FinalReply {
                    status: reply.status,
                    body: reply.body,
                    replayed: reply.replayed,
                    from_status_look_up: false,
                    waited_for_first_attempt: reply.wait_applied.is_some(),
                })
            }
            (Ending::Replied { .. }, LastReply::LookUp(reply)) => {
                saved_reply(&reply).map_or(UNREADABLE, ActionResult::Replied)
            }
            // The rules stop on a reply only after one came; kept saved, should that change.
            (Ending::Replied { .. }, LastReply::None) => UNREADABLE,
            (Ending::NotReceived, _) => ActionResult::NotReceived,
            (Ending::SignInRequired, _) => ActionResult::SignInRequired,
            (Ending::Unsettled(why), _) => ActionResult::Unsettled(why),
        };
        if !result.keeps_action() {
            self.forget(saved, report).await;
        }
        self.completion(saved, attempts, (result, known_by))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use serde_json::json;
    use shared::retry::RetrySchedule;

    use super::*;
    use crate::action_result::Unsettled;
    use crate::action_store::ActionStore;
    use crate::file_store::FileStore;
    use crate::jitter::OsJitter;
    use crate::test_support::{
        FakeClock, FixedJitter, ScriptedTransport, Step, TempDir, collect_events, pay_action,
        pay_body, user, waits,
    };
    use shared::Operation;
    use shared::retry::ClientRules;

    const SECOND: Duration = Duration::from_secs(1);

    struct Rig {
        _dir: TempDir,
        store: FileStore,
        clock: Arc<FakeClock>,
        transport: Arc<ScriptedTransport>,
        saved: SavedAction,
    }

    impl Rig {
        /// A saved action and a transport replying `steps` in order, then `otherwise`.
        fn new(steps: impl IntoIterator<Item = Step>) -> Rig {
            let dir = TempDir::new();
            let store = FileStore::open(dir.path()).expect("opens");
            let clock = Arc::new(FakeClock::default());
            let saved = SavedAction::new(user(7), pay_action(230_000), clock.now());
            store.save(&saved).expect("saves");
            Rig {
                _dir: dir,
                store,
                clock,
                transport: Arc::new(ScriptedTransport::replying(steps)),
                saved,
            }
        }

        fn client(
            &self,
            config: ClientRules,
        ) -> PaymentsClient<Arc<ScriptedTransport>, Arc<FakeClock>> {
            PaymentsClient::new(
                user(7),
                Arc::clone(&self.transport),
                self.store.clone(),
                config,
            )
            .with_clock(Arc::clone(&self.clock))
        }

        fn is_saved(&self) -> bool {
            !self.store.load_all().expect("loads").is_empty()
        }
    }

    fn config(schedule: RetrySchedule) -> ClientRules {
        ClientRules {
            schedule,
            ..ClientRules::default()
        }
    }

    #[tokio::test]
    async fn the_first_final_reply_ends_the_action() {
        for status in [201, 402, 404, 422] {
            let rig = Rig::new([Step::status(503), Step::NoReply, Step::status(status)]);
            let completion = rig
                .client(ClientRules::default())
                .run(&rig.saved, &|_| {})
                .await;
            assert_eq!(completion.attempts, 3, "{status}");
            assert!(
                matches!(&completion.result, ActionResult::Replied(a) if a.status == status && !a.from_status_look_up),
                "{status}: {completion:?}"
            );
            assert!(
                !rig.is_saved(),
                "{status}: a final reply deletes the action"
            );
        }
    }

    #[tokio::test]
    async fn every_attempt_sends_the_same_key_and_body_bytes() {
        let rig = Rig::new([
            Step::NoReply,
            Step::NetworkError,
            Step::status(409),
            Step::status(429),
            Step::status(502),
            Step::status(201),
        ]);
        let completion = rig
            .client(ClientRules::default())
            .run(&rig.saved, &|_| {})
            .await;
        assert_eq!(completion.attempts, 6);
        let expected = (rig.saved.key().clone(), rig.saved.action().body().to_vec());
        assert_eq!(rig.transport.sent(), vec![expected; 6]);
    }

    #[tokio::test]
    async fn waits_stay_under_the_doubling_ceiling_and_its_cap() {
        let schedule = RetrySchedule::default();
        for unit in [0.0, 0.5, 0.999] {
            let rig = Rig::new(std::iter::repeat_n(Step::NoReply, 9).chain([Step::status(201)]));
            let (events, report) = collect_events();
            rig.client(config(schedule))
                .with_jitter(FixedJitter(unit))
                .run(&rig.saved, &report)
                .await;
            let waits = waits(&events);
            assert_eq!(waits.len(), 9);
            for (failed, wait) in (1..).zip(&waits) {
                let ceiling = schedule.ceiling(failed);
                assert!(ceiling <= schedule.cap);
                assert_eq!(*wait, ceiling.mul_f64(unit), "attempt {failed} at {unit}");
            }
        }
    }

    #[tokio::test]
    async fn full_jitter_spreads_waits_over_the_whole_ceiling() {
        let schedule = RetrySchedule::default();
        let mut first_waits = Vec::new();
        for _ in 0..300 {
            let rig = Rig::new([Step::status(503), Step::status(201)]);
            let (events, report) = collect_events();
            rig.client(config(schedule))
                .with_jitter(OsJitter)
                .run(&rig.saved, &report)
                .await;
            first_waits.extend(waits(&events));
        }
        let ceiling = schedule.ceiling(1);
        assert!(first_waits.iter().all(|wait| *wait <= ceiling));
        let below_a_tenth = first_waits.iter().filter(|w| **w < ceiling / 10).count();
        let above_nine_tenths = first_waits
            .iter()
            .filter(|w| **w > ceiling * 9 / 10)
            .count();
        // Uniform: 30 expected in each tenth; a fixed or clustered wait would leave one empty.
        assert!(below_a_tenth >= 10, "{below_a_tenth}");
        assert!(above_nine_tenths >= 10, "{above_nine_tenths}");
        let mean = first_waits.iter().sum::<Duration>() / 300;
        assert!(
            (ceiling * 4 / 10..=ceiling * 6 / 10).contains(&mean),
            "{mean:?}"
        );
    }

    #[tokio::test]
    async fn retry_after_is_a_floor_under_the_jittered_wait() {
        let rig = Rig::new([
            Step::status(409).retry_after(7),
            Step::status(503).retry_after(5),
            Step::status(503).retry_after(1),
            Step::status(201),
        ]);
        let (events, report) = collect_events();
        rig.client(config(RetrySchedule::default()))
            .with_jitter(FixedJitter(0.999))
            .run(&rig.saved, &report)
            .await;
        // Ceilings 0.5 s, 1 s, 2 s: the floor wins twice, the jittered 1.998 s once.
        assert_eq!(
            waits(&events),
            [7 * SECOND, 5 * SECOND, (2 * SECOND).mul_f64(0.999)]
        );
    }

    #[tokio::test]
    async fn a_429_is_retried_with_the_same_key_and_body_after_its_retry_after() {
        let rig = Rig::new([
            Step::status(429).retry_after(3),
            Step::status(429).retry_after(2),
            Step::status(201),
        ]);
        let (events, report) = collect_events();
        let completion = rig
            .client(config(RetrySchedule::default()))
            .with_jitter(FixedJitter(0.999))
            .run(&rig.saved, &report)
            .await;
        // The edge's rate limit left the key untouched: the same request later is a normal one.
        assert!(
            matches!(&completion.result, ActionResult::Replied(a) if a.status == 201),
            "{completion:?}"
        );
        let expected = (rig.saved.key().clone(), rig.saved.action().body().to_vec());
        assert_eq!(rig.transport.sent(), vec![expected; 3]);
        // Jittered ceilings of 0.5 s and 1 s are below each Retry-After, which wins.
        assert_eq!(waits(&events), [3 * SECOND, 2 * SECOND]);
    }

    #[tokio::test]
    async fn every_request_of_an_action_shares_its_trace_and_another_action_gets_another() {
        let schedule = RetrySchedule {
            base: SECOND,
            cap: 4 * SECOND,
            deadline: 60 * SECOND,
        };
        let rig = Rig::new([Step::status(503), Step::NetworkError]);
        let phone = rig.client(config(schedule));
        phone.run(&rig.saved, &|_| {}).await;
        let first = rig.transport.traces();
        let (sends, look_ups) = (rig.transport.sent().len(), rig.transport.look_up_count());
        assert!(
            sends > 3 && look_ups > 0,
            "{sends} sends, {look_ups} look-ups"
        );
        assert_eq!(first.len(), sends + look_ups, "every request has the trace");
        assert!(first.iter().all(|trace| *trace == first[0]), "{first:?}");

        let other = phone
            .begin(Operation::PayBill, "elec-2", &pay_body(1))
            .await
            .expect("saved");
        phone.run(&other, &|_| {}).await;
        let second = rig.transport.traces().split_off(first.len());
        assert!(!second.is_empty());
        assert!(second.iter().all(|trace| *trace == second[0]), "{second:?}");
        assert_ne!(second[0], first[0], "a new action, a new trace");
    }

    #[tokio::test]
    async fn at_the_deadline_the_client_looks_the_outcome_up_instead_of_sending() {
        let schedule = RetrySchedule {
            base: SECOND,
            cap: 4 * SECOND,
            deadline: 60 * SECOND,
        };
        let rig = Rig::new([]);
        rig.transport.reply_by_default(Step::NoReply);
        rig.transport.reply_look_ups([Step::done(201)]);
        let (events, report) = collect_events();
        let send_times = Arc::new(std::sync::Mutex::new(Vec::new()));
        let note_send_times = {
            let (clock, times) = (Arc::clone(&rig.clock), Arc::clone(&send_times));
            move |event: &Event| {
                if matches!(event, Event::Sending { .. }) {
                    times.lock().expect("lock").push(clock.now());
                }
                report(event);
            }
        };
        let completion = rig
            .client(config(schedule))
            .with_jitter(FixedJitter(0.5))
            .run(&rig.saved, &note_send_times)
            .await;

        let send_times = send_times.lock().expect("lock").clone();
        let started = rig.saved.started_at();
        assert!(!send_times.is_empty());
        assert!(
            send_times
                .iter()
                .all(|at| *at - started < time::Duration::seconds(60)),
            "no attempt at or after the deadline: {send_times:?}"
        );
        assert_eq!(completion.attempts as usize, send_times.len());
        assert_eq!(rig.transport.look_up_count(), 1);
        assert!(matches!(
            &completion.result,
            ActionResult::Replied(reply) if reply.status == 201 && reply.from_status_look_up
        ));
        assert!(
            events
                .lock()
                .expect("events")
                .contains(&Event::StoppedSending {
                    attempts: completion.attempts
                })
        );
        assert!(!rig.is_saved());
    }

    #[tokio::test]
    async fn a_resumed_action_past_its_deadline_is_only_looked_up() {
        let rig = Rig::new([]);
        let late = SavedAction::new(
            user(7),
            rig.saved.action().clone(),
            rig.clock.now() - time::Duration::minutes(11),
        );
        rig.transport.reply_look_ups([Step::done(402)]);
        let completion = rig.client(ClientRules::default()).run(&late, &|_| {}).await;
        assert_eq!(completion.attempts, 0);
        assert!(rig.transport.sent().is_empty());
        assert!(matches!(&completion.result, ActionResult::Replied(a) if a.status == 402));
    }

    #[tokio::test]
    async fn an_unsettled_outcome_keeps_the_action_saved() {
        for (look_up, expected) in [
            (Step::state("started"), Unsettled::Started),
            (Step::state("unknown"), Unsettled::Unknown),
            (Step::status(503), Unsettled::Unreachable),
        ] {
            let rig = Rig::new([]);
            rig.transport.reply_by_default(Step::status(503));
            rig.transport.reply_by_default_on_look_up(look_up);
            let completion = rig
                .client(ClientRules::default())
                .run(&rig.saved, &|_| {})
                .await;
            assert_eq!(completion.result, ActionResult::Unsettled(expected));
            assert!(rig.is_saved(), "{expected:?}");
        }
    }

    #[tokio::test]
    async fn an_unsettled_outcome_says_when_it_will_be_known() {
        let at = "2026-12-06T10:01:30Z";
        let when = time::OffsetDateTime::parse(at, &time::format_description::well_known::Rfc3339)
            .expect("a time");
        for (field, expected) in [
            ("next_check_at", KnownBy::NextStatusCheck(when)),
            ("settlement_due_at", KnownBy::Settlement(when)),
        ] {
            let rig = Rig::new([]);
            rig.transport.reply_by_default(Step::status(503));
            let body = json!({"state": "unknown", "operation": "pay_bill",
                              "expires_at": "2027-01-17T08:00:00Z", field: at});
            rig.transport
                .reply_by_default_on_look_up(Step::Reply(Reply {
                    status: 200,
                    retry_after: None,
                    replayed: false,
                    wait_applied: None,
                    body,
                }));
            let completion = rig
                .client(ClientRules::default())
                .run(&rig.saved, &|_| {})
                .await;
            assert_eq!(
                completion.result,
                ActionResult::Unsettled(Unsettled::Unknown)
            );
            assert_eq!(completion.known_by, Some(expected));
        }
    }

    #[tokio::test]
    async fn a_key_the_server_never_received_ends_the_action_unpaid() {
        let rig = Rig::new([]);
        rig.transport.reply_by_default(Step::NetworkError);
        rig.transport.reply_look_ups([Step::status(404)]);
        let completion = rig
            .client(ClientRules::default())
            .run(&rig.saved, &|_| {})
            .await;
        assert_eq!(completion.result, ActionResult::NotReceived);
        assert!(!rig.is_saved());
    }

    #[tokio::test]
    async fn a_refused_token_keeps_the_action_for_after_signing_in() {
        let rig = Rig::new([Step::NoReply, Step::status(401)]);
        let completion = rig
            .client(ClientRules::default())
            .run(&rig.saved, &|_| {})
            .await;
        assert_eq!(completion.result, ActionResult::SignInRequired);
        assert!(rig.is_saved());
    }

    #[tokio::test]
    async fn the_attempt_bound_holds_even_if_time_stands_still() {
        let rig = Rig::new([]);
        rig.transport.reply_by_default(Step::status(503));
        let completion = rig
            .client(ClientRules {
                max_attempts: 5,
                ..ClientRules::default()
            })
            .with_jitter(FixedJitter(0.0))
            .run(&rig.saved, &|_| {})
            .await;
        assert_eq!(completion.attempts, 5);
    }

    #[tokio::test]
    async fn every_attempt_asks_to_wait_for_the_first_attempt_with_the_configured_wait() {
        for (prefer_wait, expected) in [
            (ClientRules::default().prefer_wait, Some(10 * SECOND)),
            (Some(3 * SECOND), Some(3 * SECOND)),
            (Some(60 * SECOND), Some(14 * SECOND)),
        ] {
            let rig = Rig::new([Step::NoReply, Step::status(409), Step::status(201)]);
            let (events, report) = collect_events();
            rig.client(ClientRules {
                prefer_wait,
                ..ClientRules::default()
            })
            .run(&rig.saved, &report)
            .await;
            assert_eq!(rig.transport.send_waits(), [expected; 3], "{prefer_wait:?}");
            assert!(events.lock().expect("events").contains(&Event::Sending {
                attempt: 2,
                prefer_wait: expected
            }));
        }
    }

    #[tokio::test]
    async fn no_wait_is_asked_for_when_it_is_off() {
        let rig = Rig::new([Step::NoReply, Step::status(409)]);
        rig.transport.reply_by_default(Step::status(503));
        rig.transport.reply_look_ups([Step::done(201)]);
        rig.client(ClientRules {
            prefer_wait: None,
            ..ClientRules::default()
        })
        .run(&rig.saved, &|_| {})
        .await;
        let sends = rig.transport.send_waits();
        assert!(sends.len() > 2 && sends.iter().all(Option::is_none));
        assert_eq!(rig.transport.look_up_waits(), [None]);
    }

    #[tokio::test]
    async fn a_reply_after_waiting_is_reported_as_the_first_attempts() {
        let rig = Rig::new([Step::NoReply, Step::status(201).after_waiting(10)]);
        let (events, report) = collect_events();
        let completion = rig
            .client(ClientRules::default())
            .run(&rig.saved, &report)
            .await;
        assert!(
            matches!(&completion.result, ActionResult::Replied(a)
                if a.status == 201 && a.replayed && a.waited_for_first_attempt),
            "{completion:?}"
        );
        assert!(events.lock().expect("events").contains(&Event::Replied {
            attempt: 2,
            status: 201,
            replayed: true,
            waited: Some(10 * SECOND),
        }));
        assert!(!rig.is_saved());
    }

    #[tokio::test]
    async fn a_409_after_the_wait_ran_out_is_retried_after_its_retry_after() {
        let rig = Rig::new([
            Step::status(409).retry_after(4).after_waiting(10),
            Step::status(201).after_waiting(10),
        ]);
        let (events, report) = collect_events();
        let completion = rig
            .client(ClientRules::default())
            .with_jitter(FixedJitter(0.0))
            .run(&rig.saved, &report)
            .await;
        assert_eq!(waits(&events), [4 * SECOND]);
        assert!(events.lock().expect("events").contains(&Event::Replied {
            attempt: 1,
            status: 409,
            replayed: false,
            waited: Some(10 * SECOND),
        }));
        assert!(
            matches!(&completion.result, ActionResult::Replied(a) if a.waited_for_first_attempt),
            "{completion:?}"
        );
        let expected = (rig.saved.key().clone(), rig.saved.action().body().to_vec());
        assert_eq!(rig.transport.sent(), vec![expected; 2]);
    }

    #[tokio::test]
    async fn the_status_look_up_asks_for_the_same_wait_and_reads_the_saved_reply() {
        let rig = Rig::new([]);
        let late = SavedAction::new(
            user(7),
            rig.saved.action().clone(),
            rig.clock.now() - time::Duration::minutes(11),
        );
        rig.transport
            .reply_look_ups([Step::state("started"), Step::done(201).after_waiting(10)]);
        let client = rig.client(ClientRules::default());
        let first = client.run(&late, &|_| {}).await;
        assert_eq!(first.result, ActionResult::Unsettled(Unsettled::Started));
        let second = client.run(&late, &|_| {}).await;
        let ActionResult::Replied(reply) = second.result else {
            panic!("replied expected: {second:?}");
        };
        assert_eq!(reply.body, serde_json::json!({"status": 201}));
        assert!(reply.from_status_look_up && reply.waited_for_first_attempt);
        assert_eq!(rig.transport.look_up_waits(), [Some(10 * SECOND); 2]);
    }
}
