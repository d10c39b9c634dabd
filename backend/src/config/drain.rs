//! How the backend stops on SIGTERM, in two steps a load balancer can follow
//! (docs/operations.md, "Stopping a replica"): first `/readyz` replies 503 while requests are
//! still served for `SHUTDOWN_GRACE_SECONDS`, so every balancer sees the replica leave before it
//! stops accepting; then the listeners close and the requests in flight get
//! `SHUTDOWN_DEADLINE_SECONDS` to finish before their connections are cut. An orchestrator's
//! own grace period (Kubernetes' `terminationGracePeriodSeconds`) must be longer than the two
//! together.

use std::time::Duration;

use anyhow::bail;
use clap::Args;

/// The grace period in production when unset: a few of a balancer's health checks.
const PRODUCTION_GRACE: Duration = Duration::from_secs(5);

/// The longest either step may be set to.
const MAX_STEP_SECONDS: u64 = 300;

/// The drain's settings, as read from flags and environment.
#[derive(Debug, Clone, Args)]
pub struct DrainSettings {
    /// Seconds `/readyz` replies 503 on SIGTERM while requests are still served (5 in
    /// production, 0 in development).
    #[arg(long, env = "SHUTDOWN_GRACE_SECONDS")]
    pub shutdown_grace_seconds: Option<u64>,
    /// Seconds the requests in flight get to finish once the listeners have closed; then their
    /// connections are cut (at most 300).
    #[arg(long, env = "SHUTDOWN_DEADLINE_SECONDS", default_value_t = 15)]
    pub shutdown_deadline_seconds: u64,
}

/// The drain, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Drain {
    /// How long the backend serves on, not ready, before it closes its listeners.
    pub grace: Duration,
    /// How long requests in flight may take after that.
    pub deadline: Duration,
}

impl DrainSettings {
    /// The drain: `development` shortens the default grace to nothing.
    pub fn into_drain(self, development: bool) -> anyhow::Result<Drain> {
        let grace = match self.shutdown_grace_seconds {
            Some(seconds) => Duration::from_secs(seconds),
            None if development => Duration::ZERO,
            None => PRODUCTION_GRACE,
        };
        if grace.as_secs() > MAX_STEP_SECONDS || self.shutdown_deadline_seconds > MAX_STEP_SECONDS {
            bail!(
                "SHUTDOWN_GRACE_SECONDS and SHUTDOWN_DEADLINE_SECONDS must each be at most \
                 {MAX_STEP_SECONDS}"
            );
        }
        Ok(Drain {
            grace,
            deadline: Duration::from_secs(self.shutdown_deadline_seconds),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(grace: Option<u64>, deadline: u64) -> DrainSettings {
        DrainSettings {
            shutdown_grace_seconds: grace,
            shutdown_deadline_seconds: deadline,
        }
    }

    #[test]
    fn production_waits_for_balancers_and_development_does_not() {
        let production = settings(None, 15).into_drain(false).expect("valid");
        assert_eq!(production.grace, PRODUCTION_GRACE);
        let development = settings(None, 15).into_drain(true).expect("valid");
        assert_eq!(development.grace, Duration::ZERO);
        let chosen = settings(Some(2), 7).into_drain(false).expect("valid");
        assert_eq!((chosen.grace.as_secs(), chosen.deadline.as_secs()), (2, 7));
    }

    #[test]
    fn a_step_of_more_than_five_minutes_is_refused_naming_the_settings() {
        for (grace, deadline) in [(Some(301), 15), (None, 301)] {
            let error = settings(grace, deadline)
                .into_drain(false)
                .expect_err("refused");
            assert!(
                error.to_string().contains("SHUTDOWN_GRACE_SECONDS"),
                "{error}"
            );
        }
    }
}
