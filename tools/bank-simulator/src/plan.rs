//! What the knobs decide for one request, drawn all at once when it arrives.
//!
//! [`Behaviour`] pairs the knobs with the one seeded generator. Every money-moving request
//! draws the same five values in the same order (jitter, failure, decline, lost reply, lost
//! callback), whether
//! or not its knobs use them, so a run is repeatable for the same knobs, seed and arrival
//! order. The resulting [`RequestPlan`] is then carried out without touching the generator.

use std::time::Duration;

use bank_api::Knobs;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The knobs and the generator they seed, replaced together.
#[derive(Debug)]
pub(crate) struct Behaviour {
    knobs: Knobs,
    rng: StdRng,
}

/// The knobs' verdict for one request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RequestPlan {
    /// How long to wait before deciding.
    pub(crate) latency: Duration,
    /// Received 503 without doing anything.
    pub(crate) fail: bool,
    /// Decline the debit (ignored by refunds).
    pub(crate) decline: bool,
    /// Hold the reply back this long after recording the outcome.
    pub(crate) lost_reply_delay: Option<Duration>,
    /// Replay the recorded outcome of a repeated reference.
    pub(crate) dedupe: bool,
    /// Refuse a repeated reference (409) instead of replaying it, when deduplicating.
    pub(crate) refuse_repeats: bool,
    /// Decide the request even if its caller hangs up first.
    pub(crate) executes_abandoned: bool,
    /// Send its callback (if callbacks go anywhere), and how many times.
    pub(crate) callbacks: u32,
    /// How long after the decision the callback goes.
    pub(crate) callback_delay: Duration,
}

impl Behaviour {
    /// Starts the generator from the knobs' seed.
    pub(crate) fn new(knobs: Knobs) -> Self {
        let rng = StdRng::seed_from_u64(knobs.seed);
        Self { knobs, rng }
    }

    /// The current knobs.
    pub(crate) fn knobs(&self) -> &Knobs {
        &self.knobs
    }

    /// Draws the plan for the next request.
    pub(crate) fn plan_request(&mut self) -> RequestPlan {
        let knobs = &self.knobs;
        let jitter_ms = self.rng.random_range(0..=knobs.jitter_ms);
        let failure_draw: f64 = self.rng.random();
        let decline_draw: f64 = self.rng.random();
        let lost_reply_draw: f64 = self.rng.random();
        // Drawn after the four above, so their values are those of earlier versions.
        let callback_loss_draw: f64 = self.rng.random();
        let callback_sent = callback_loss_draw >= knobs.callback_loss_rate;
        RequestPlan {
            latency: Duration::from_millis(knobs.latency_ms.saturating_add(jitter_ms)),
            fail: failure_draw < knobs.error_rate,
            decline: decline_draw < knobs.decline_rate,
            lost_reply_delay: (lost_reply_draw < knobs.lost_reply_rate)
                .then(|| Duration::from_millis(knobs.lost_reply_delay_ms)),
            dedupe: knobs.dedupe,
            refuse_repeats: knobs.refuse_repeats,
            executes_abandoned: knobs.executes_abandoned_calls,
            callbacks: if callback_sent {
                1 + knobs.callback_duplicates
            } else {
                0
            },
            callback_delay: Duration::from_millis(knobs.callback_delay_ms),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plans(knobs: &Knobs, count: usize) -> Vec<RequestPlan> {
        let mut behaviour = Behaviour::new(knobs.clone());
        (0..count).map(|_| behaviour.plan_request()).collect()
    }

    #[test]
    fn the_same_seed_draws_the_same_plans() {
        let knobs = Knobs {
            jitter_ms: 50,
            decline_rate: 0.5,
            error_rate: 0.5,
            lost_reply_rate: 0.5,
            ..Knobs::default()
        };
        assert_eq!(plans(&knobs, 100), plans(&knobs, 100));
        let reseeded = Knobs {
            seed: 1,
            ..knobs.clone()
        };
        assert_ne!(plans(&knobs, 100), plans(&reseeded, 100));
    }

    #[test]
    fn rates_of_zero_and_one_never_and_always_fire() {
        let never = plans(&Knobs::default(), 100);
        assert!(
            never
                .iter()
                .all(|plan| !plan.fail && !plan.decline && plan.lost_reply_delay.is_none())
        );
        assert!(never.iter().all(|plan| plan.latency == Duration::ZERO));

        let always = Knobs {
            decline_rate: 1.0,
            error_rate: 1.0,
            lost_reply_rate: 1.0,
            ..Knobs::default()
        };
        assert!(
            plans(&always, 100)
                .iter()
                .all(|plan| plan.fail && plan.decline && plan.lost_reply_delay.is_some())
        );
    }

    #[test]
    fn latency_stays_within_fixed_plus_jitter() {
        let knobs = Knobs {
            latency_ms: 10,
            jitter_ms: 5,
            ..Knobs::default()
        };
        for plan in plans(&knobs, 200) {
            assert!(
                (Duration::from_millis(10)..=Duration::from_millis(15)).contains(&plan.latency)
            );
        }
    }
}
