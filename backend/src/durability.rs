//! Durability the backend checks for itself: whether a claim the database acknowledged would
//! survive the loss of its primary.
//!
//! With asynchronous replication a primary that dies can take a committed claim with it; the
//! phone's retry then finds no key, claims anew under a new bank reference, and the bank debits
//! a second time. So in production the backend starts, and stays ready, only on a database
//! whose commits are synchronously replicated (`DATABASE_REPLICATION`, [`Replication`]): it
//! must be the primary, `synchronous_commit` at least `on` (the commit is on a standby's disk
//! before it is acknowledged), and a synchronous standby reported in `pg_stat_replication`.
//! An operator who runs on one server (or SQLite) says so with `DATABASE_REPLICATION=none`;
//! production never assumes it. docs/operations.md, "A database that fails over".

use clap::ValueEnum;

use crate::store::ReplicationState;

/// The setting that says how commits must be replicated.
pub const REPLICATION_SETTING: &str = "DATABASE_REPLICATION";

/// How commits must be replicated (`DATABASE_REPLICATION`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Replication {
    /// Start only with a synchronous standby; while serving, a standby lost shows in the
    /// `payments_database_synchronous_standbys` metric and the log, and readiness stays up (the
    /// database decides: Patroni's `synchronous_mode` without strict goes on unreplicated
    /// rather than stop writes). The production default.
    Synchronous,
    /// As `synchronous`, and not ready while no standby acknowledges commits (Patroni's
    /// `synchronous_mode_strict`, where writes then wait).
    SynchronousStrict,
    /// Nothing is required: one server, or SQLite, whose loss may lose acknowledged claims.
    /// The development default; production only when set explicitly.
    None,
}

/// What a check of the database's replication found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Commits are as durable as required.
    Durable,
    /// Serving, but commits are not replicated now: the reason, for the log.
    Degraded(String),
    /// Not fit to serve payments: the reason.
    Unfit(String),
}

/// Judges what the database says of its replication (`None`: it has none) against `required`.
pub fn judge(required: Replication, state: Option<&ReplicationState>) -> Verdict {
    if state.is_some_and(|state| state.in_recovery) {
        return Verdict::Unfit(
            "the database is a standby (in recovery) and takes no writes; connect through \
             whatever routes to the primary"
                .to_owned(),
        );
    }
    if required == Replication::None {
        return Verdict::Durable;
    }
    let Some(state) = state else {
        return Verdict::Unfit(format!(
            "SQLite is one file on one machine and its commits are not replicated; set \
             {REPLICATION_SETTING}=none to accept that"
        ));
    };
    if !state.sees_replication {
        return Verdict::Unfit(
            "the database role cannot read pg_stat_replication's states, so no synchronous \
             standby can be seen: GRANT pg_monitor to it"
                .to_owned(),
        );
    }
    if !matches!(state.synchronous_commit.as_str(), "on" | "remote_apply") {
        return Verdict::Unfit(format!(
            "synchronous_commit is {}: a commit is acknowledged before a standby has it; set \
             it to on",
            state.synchronous_commit
        ));
    }
    if state.synchronous_standbys == 0 {
        let reason = "no synchronous standby acknowledges commits now".to_owned();
        return match required {
            Replication::SynchronousStrict => Verdict::Unfit(reason),
            _ => Verdict::Degraded(reason),
        };
    }
    Verdict::Durable
}

/// Refuses to start on a database that is not as durable as `required` says, naming the
/// setting.
pub fn check_at_start(
    required: Replication,
    state: Option<&ReplicationState>,
) -> anyhow::Result<()> {
    match judge(required, state) {
        Verdict::Durable => Ok(()),
        Verdict::Degraded(reason) | Verdict::Unfit(reason) => anyhow::bail!(
            "{REPLICATION_SETTING}={} requires commits replicated to a synchronous standby, \
             but {reason}. To run on a database whose loss may lose acknowledged payments, \
             set {REPLICATION_SETTING}=none",
            required
                .to_possible_value()
                .map_or_else(String::new, |value| value.get_name().to_owned())
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn primary(synchronous_commit: &str, synchronous_standbys: u32) -> ReplicationState {
        ReplicationState {
            in_recovery: false,
            synchronous_commit: synchronous_commit.to_owned(),
            synchronous_standbys,
            sees_replication: true,
        }
    }

    #[test]
    fn a_primary_with_a_synchronous_standby_is_durable_in_every_mode() {
        for required in [
            Replication::Synchronous,
            Replication::SynchronousStrict,
            Replication::None,
        ] {
            for commit in ["on", "remote_apply"] {
                assert_eq!(judge(required, Some(&primary(commit, 1))), Verdict::Durable);
            }
        }
    }

    #[test]
    fn a_lost_standby_degrades_synchronous_and_stops_strict() {
        assert!(matches!(
            judge(Replication::Synchronous, Some(&primary("on", 0))),
            Verdict::Degraded(_)
        ));
        assert!(matches!(
            judge(Replication::SynchronousStrict, Some(&primary("on", 0))),
            Verdict::Unfit(_)
        ));
        assert_eq!(
            judge(Replication::None, Some(&primary("on", 0))),
            Verdict::Durable
        );
    }

    #[test]
    fn a_commit_acknowledged_before_a_standby_has_it_is_unfit() {
        for commit in ["off", "local", "remote_write"] {
            let verdict = judge(Replication::Synchronous, Some(&primary(commit, 2)));
            assert!(
                matches!(&verdict, Verdict::Unfit(reason) if reason.contains(commit)),
                "{verdict:?}"
            );
        }
    }

    #[test]
    fn a_standby_is_unfit_whatever_is_required() {
        let standby = ReplicationState {
            in_recovery: true,
            ..primary("on", 0)
        };
        for required in [Replication::Synchronous, Replication::None] {
            assert!(matches!(
                judge(required, Some(&standby)),
                Verdict::Unfit(reason) if reason.contains("standby")
            ));
        }
    }

    #[test]
    fn sqlite_and_a_role_that_cannot_see_replication_need_the_setting_said() {
        let blind = ReplicationState {
            sees_replication: false,
            ..primary("on", 1)
        };
        assert!(matches!(
            judge(Replication::Synchronous, Some(&blind)),
            Verdict::Unfit(reason) if reason.contains("pg_monitor")
        ));
        assert_eq!(judge(Replication::None, None), Verdict::Durable);
        let refused = check_at_start(Replication::Synchronous, None)
            .expect_err("SQLite is not replicated")
            .to_string();
        assert!(
            refused.contains("DATABASE_REPLICATION=none") && refused.contains("SQLite"),
            "{refused}"
        );
    }
}
