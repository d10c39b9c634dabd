//! The night itself, drawn from the seed: who pays what and when, and how the bank's latency
//! climbs past the phones' timeout while they do (the article: replies that took one second
//! took twenty, against a 15 s timeout). Every client replays the same night.

use std::time::Duration;

use crate::seeded::Seeded;

/// How the night goes, in the night's seconds.
#[derive(Debug, Clone)]
pub struct NightSettings {
    /// How many customers pay a bill.
    pub customers: usize,
    /// Customers arrive uniformly over this long.
    pub evening: Duration,
    /// The bank's latency at the start of the evening.
    pub latency_from: Duration,
    /// The bank's latency at the end of the evening (reached in equal steps).
    pub latency_to: Duration,
    /// Extra latency drawn per request, uniformly up to this.
    pub jitter: Duration,
    /// How many times the latency changes over the evening.
    pub ramp_steps: u32,
    /// Probability that the bank debits but its reply is lost.
    pub lost_reply_rate: f64,
    /// How long a lost reply is held back (longer than the server waits for the bank).
    pub lost_reply_delay: Duration,
    /// Probability that the bank declines a debit.
    pub decline_rate: f64,
    /// Probability that the bank replies to a call with a 503 before doing anything.
    pub error_rate: f64,
    /// The seed of everything drawn.
    pub seed: u64,
}

/// One customer: one bill, paid once (one user action).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Customer {
    /// Position in the night, from 0.
    pub index: usize,
    /// When the customer taps Pay, from the start of the evening.
    pub arrival: Duration,
    /// The bill's amount (Rs 200 to Rs 5,000, in whole rupees).
    pub amount_paise: u64,
}

/// The bank's latency from `at` on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RampStep {
    /// From the start of the evening.
    pub at: Duration,
    /// The latency before jitter.
    pub latency: Duration,
}

/// The drawn night.
#[derive(Debug, Clone)]
pub struct Night {
    /// The settings it was drawn from.
    pub settings: NightSettings,
    /// Customers in arrival order.
    pub customers: Vec<Customer>,
    /// The latency steps, in order.
    pub ramp: Vec<RampStep>,
}

impl Night {
    /// Draws the night from its settings' seed.
    pub fn draw(settings: NightSettings) -> Night {
        let random = Seeded::new(settings.seed);
        let mut arrivals: Vec<Duration> = (0..settings.customers)
            .map(|_| settings.evening.mul_f64(random.next_unit()))
            .collect();
        arrivals.sort();
        let customers = arrivals
            .into_iter()
            .enumerate()
            .map(|(index, arrival)| Customer {
                index,
                arrival,
                amount_paise: random.between(200, 5_000) * 100,
            })
            .collect();
        let steps = settings.ramp_steps.max(2);
        let ramp = (0..steps)
            .map(|step| {
                let fraction = f64::from(step) / f64::from(steps - 1);
                let climb = settings.latency_to.saturating_sub(settings.latency_from);
                RampStep {
                    at: settings.evening.mul_f64(f64::from(step) / f64::from(steps)),
                    latency: settings.latency_from + climb.mul_f64(fraction),
                }
            })
            .collect();
        Night {
            settings,
            customers,
            ramp,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(seed: u64) -> NightSettings {
        NightSettings {
            customers: 50,
            evening: Duration::from_secs(300),
            latency_from: Duration::from_secs(1),
            latency_to: Duration::from_secs(20),
            jitter: Duration::from_secs(4),
            ramp_steps: 10,
            lost_reply_rate: 0.05,
            lost_reply_delay: Duration::from_secs(60),
            decline_rate: 0.05,
            error_rate: 0.05,
            seed,
        }
    }

    #[test]
    fn the_same_seed_draws_the_same_night_and_latency_climbs_to_its_peak() {
        let night = Night::draw(settings(7));
        assert_eq!(night.customers, Night::draw(settings(7)).customers);
        assert_ne!(night.customers, Night::draw(settings(8)).customers);
        assert!(
            night
                .customers
                .windows(2)
                .all(|w| w[0].arrival <= w[1].arrival)
        );
        assert_eq!(
            night.ramp.first().map(|s| s.latency),
            Some(Duration::from_secs(1))
        );
        assert_eq!(
            night.ramp.last().map(|s| s.latency),
            Some(Duration::from_secs(20))
        );
        assert!(
            night
                .ramp
                .windows(2)
                .all(|w| w[0].latency < w[1].latency && w[0].at < w[1].at)
        );
    }
}
