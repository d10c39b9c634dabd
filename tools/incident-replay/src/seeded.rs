//! A small seeded random generator (SplitMix64), so the replay's night (arrivals, amounts) and
//! each phone's jitter repeat exactly for the same seed. Not for secrets: keys are still minted
//! from the operating system's random source.

use std::sync::atomic::{AtomicU64, Ordering};

use payments_client::Jitter;

/// SplitMix64's increment (the golden ratio in 64 bits).
const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// A seeded generator; `&self` so one can be shared (draws are then taken in call order).
#[derive(Debug)]
pub struct Seeded {
    state: AtomicU64,
}

impl Seeded {
    /// A generator started from `seed`.
    pub fn new(seed: u64) -> Seeded {
        Seeded {
            state: AtomicU64::new(seed),
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&self) -> u64 {
        let mut z = self
            .state
            .fetch_add(GAMMA, Ordering::Relaxed)
            .wrapping_add(GAMMA);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform number in `[0, 1)`.
    pub fn next_unit(&self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A uniform whole number in `low..=high`.
    pub fn between(&self, low: u64, high: u64) -> u64 {
        low + self.next_u64() % (high - low + 1)
    }
}

impl Jitter for Seeded {
    fn unit(&self) -> f64 {
        self.next_unit()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_draws_the_same_numbers_in_range() {
        let (a, b) = (Seeded::new(7), Seeded::new(7));
        let draws: Vec<u64> = (0..100).map(|_| a.between(3, 9)).collect();
        assert_eq!(draws, (0..100).map(|_| b.between(3, 9)).collect::<Vec<_>>());
        assert!(draws.iter().all(|d| (3..=9).contains(d)));
        assert!((0..1000).all(|_| (0.0..1.0).contains(&a.next_unit())));
        assert_ne!(Seeded::new(8).next_u64(), Seeded::new(7).next_u64());
    }
}
