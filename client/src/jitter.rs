//! Where the retry schedule's randomness comes from. Full jitter needs one uniform draw in
//! `[0, 1)` per wait; tests script the draws and the incident replay seeds them.

use std::sync::Arc;

/// A source of uniform random numbers in `[0, 1)`.
pub trait Jitter: Send + Sync {
    /// The next draw, in `[0, 1)`.
    fn unit(&self) -> f64;
}

/// The operating system's secure random source ([`shared::retry::random_unit`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct OsJitter;

impl Jitter for OsJitter {
    fn unit(&self) -> f64 {
        shared::retry::random_unit()
    }
}

impl<J: Jitter> Jitter for Arc<J> {
    fn unit(&self) -> f64 {
        J::unit(self)
    }
}
