//! The decision: what to do with a request, given the record stored for its (user, key).
//!
//! [`decide`] is a pure function of the policy, the incoming attempt, the stored record (if
//! any) and the current time. The edge and the backend both call it and turn each [`Decision`]
//! variant into I/O; neither re-derives a rule. The table below is SPEC §4, row for row:
//!
//! | situation (SPEC §4)                                   | [`Decision`]            | reply                          |
//! |-------------------------------------------------------|-------------------------|--------------------------------|
//! | operation in `required_for`, no key                   | `RejectMissingKey`      | 400                            |
//! | key malformed                                         | `RejectMalformedKey`    | 400, naming what is wrong      |
//! | body not JSON / fails checks, body over the limit     | (refused before `decide`, see [`crate::fingerprint`]) | 400 / 422 / 413 |
//! | operation not in `required_for`, no key               | `ProceedWithoutKey`     | do the work, nothing saved     |
//! | new (user, key)                                       | `Claim`                 | claim, call the bank, save     |
//! | same key, different fingerprint                       | `RejectMismatch`        | 422                            |
//! | same key, first attempt still running                 | `InProgress`            | 409 with `Retry-After`         |
//! | same key, finished (success or bank decline)          | `Replay`                | saved reply, `Idempotent-Replayed: true` |
//! | bank outcome unknown (key in `unknown`)               | `OutcomePending`        | 503 "outcome pending", `Retry-After` |
//! | same key, `started` for longer than `stuck_after`     | `Reconcile`             | ask the bank, save, reply      |
//! | same key, finished, past the expiry on its row        | `ClaimExpired`          | a new request under a new bank reference |
//! | same key, its claim released (the bank never saw it)  | `ClaimReleased`         | claim again, call the bank under the claim's own reference |
//! | two attempts at the same instant                      | (the store's claim: one wins, the other sees `started`) | 409 or replay |
//!
//! A claim is *released* when the bank's look-up says it never saw the claim's reference and no
//! call can still be on its way (SPEC §4, "bank replied to the call with a definite error";
//! docs/design.md, "Release"). The released key keeps its payment or refund and its bank reference, so the retry
//! that claims it again calls the bank under the same reference, and a late first call and the
//! retry cannot both move money at a bank that dedupes.
//!
//! Choices the SPEC leaves open, made here for safety: expiry frees only a `done` or `released`
//! key (a `started` or `unknown` key may hide a debit, so it is reconciled however old it is),
//! and the fingerprint is compared before the state, so a changed body gets 422 even while the
//! first attempt is running or after its claim was released.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::fingerprint::Fingerprint;
use crate::key::{IdempotencyKey, KeyError};
use crate::policy::Policy;

/// How long a client should wait before retrying a request that is still running.
pub const IN_PROGRESS_RETRY_AFTER: Duration = Duration::from_secs(1);

/// How long a client should wait before retrying while the bank's reply is being looked up.
pub const OUTCOME_PENDING_RETRY_AFTER: Duration = Duration::from_secs(5);

/// Where a stored key is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyState {
    /// Claimed; the bank may or may not have been called yet.
    Started,
    /// The bank call timed out, failed with a 5xx or lost its connection: money may have moved.
    Unknown,
    /// The bank never saw the claim's reference: nothing moved, and the next attempt with the
    /// same request claims the key again under the same reference. Kept, never deleted, and
    /// looked up again later in case the first call reaches the bank late.
    Released,
    /// Finished with a final reply (success or bank decline), saved for replay.
    Done,
}

impl KeyState {
    /// The name stored in the database and shown in logs.
    pub fn as_str(self) -> &'static str {
        match self {
            KeyState::Started => "started",
            KeyState::Unknown => "unknown",
            KeyState::Released => "released",
            KeyState::Done => "done",
        }
    }

    /// The inverse of [`KeyState::as_str`].
    pub fn from_name(name: &str) -> Option<KeyState> {
        [
            KeyState::Started,
            KeyState::Unknown,
            KeyState::Released,
            KeyState::Done,
        ]
        .into_iter()
        .find(|state| state.as_str() == name)
    }
}

/// What the decision needs to know about a stored key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRecord {
    /// The fingerprint of the request that claimed the key.
    pub fingerprint: Fingerprint,
    /// The key's state.
    pub state: KeyState,
    /// When the key was first claimed.
    pub created_at: OffsetDateTime,
    /// When the key expires: decided once, at its first claim (the database's clock plus the
    /// policy in force then), and read from the row by every replica, so replicas whose
    /// policies differ (a rolling deploy that changes it) agree on every existing key.
    pub expires_at: OffsetDateTime,
    /// When the current attempt claimed the key: stuck detection counts from here.
    pub claimed_at: OffsetDateTime,
}

/// The incoming attempt, as far as the decision is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// The result of [`Policy::parse_key_header`].
    pub key: Result<Option<IdempotencyKey>, KeyError>,
    /// The fingerprint of the operation and body.
    pub fingerprint: Fingerprint,
}

/// What to do with the request. The caller must handle every variant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// 400: the operation requires a key and none was sent. Nothing is saved.
    RejectMissingKey,
    /// 400: the key header is malformed. Nothing is saved.
    RejectMalformedKey(KeyError),
    /// No key, and the operation does not require one: do the work without idempotency.
    ProceedWithoutKey,
    /// A new (user, key): claim it, then do the work once and save the reply.
    Claim,
    /// The key was finished (or released) and is past the expiry written on its row: a new request
    /// replacing the old row, with a payment or refund and a bank reference of its own.
    ClaimExpired,
    /// The key's claim was released (the bank never saw it): claim it again and call the bank
    /// under the claim's own payment or refund and reference.
    ClaimReleased,
    /// 422: the key was used for a different request. Nothing changes.
    RejectMismatch,
    /// 409 with `Retry-After`: the first attempt is still running.
    InProgress {
        /// The wait to suggest.
        retry_after: Duration,
    },
    /// 503 "outcome pending" with `Retry-After`: the bank's reply is unknown and is being
    /// looked up by reconciliation.
    OutcomePending {
        /// The wait to suggest.
        retry_after: Duration,
    },
    /// The key has been `started` for longer than `stuck_after` (a crashed attempt): ask the
    /// bank for the outcome by reference, save it, then reply with it.
    Reconcile,
    /// The saved reply, replayed with `Idempotent-Replayed: true`.
    Replay,
}

/// Decides what to do with `attempt`, given the record stored for its (user, key).
///
/// `stored` must be the record for the attempt's key and the authenticated user; it is ignored
/// when the key was missing or malformed.
pub fn decide(
    policy: &Policy,
    attempt: &Attempt,
    stored: Option<&StoredRecord>,
    now: OffsetDateTime,
) -> Decision {
    match &attempt.key {
        Err(KeyError::Missing) => return Decision::RejectMissingKey,
        Err(error) => return Decision::RejectMalformedKey(error.clone()),
        Ok(None) => return Decision::ProceedWithoutKey,
        Ok(Some(_)) => {}
    }
    let Some(stored) = stored else {
        return Decision::Claim;
    };
    let may_expire = matches!(stored.state, KeyState::Done | KeyState::Released);
    if may_expire && now >= stored.expires_at {
        return Decision::ClaimExpired;
    }
    if stored.fingerprint != attempt.fingerprint {
        return Decision::RejectMismatch;
    }
    match stored.state {
        KeyState::Done => Decision::Replay,
        KeyState::Released => Decision::ClaimReleased,
        KeyState::Unknown => Decision::OutcomePending {
            retry_after: OUTCOME_PENDING_RETRY_AFTER,
        },
        KeyState::Started if now - stored.claimed_at >= policy.stuck_after => Decision::Reconcile,
        KeyState::Started => Decision::InProgress {
            retry_after: IN_PROGRESS_RETRY_AFTER,
        },
    }
}

#[cfg(test)]
mod tests {
    // Under wasm32 the same tests run through wasm-bindgen-test (see `.cargo/config.toml`).
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::fingerprint::{BodyLimits, fingerprint};
    use crate::operation::Operation;
    use time::macros::datetime;

    const NOW: OffsetDateTime = datetime!(2026-11-30 12:00 UTC);

    fn fp(amount: u64) -> Fingerprint {
        let body = format!(r#"{{"amount_paise":{amount}}}"#);
        fingerprint(
            Operation::PayBill,
            "bill-1",
            body.as_bytes(),
            BodyLimits::default(),
        )
        .expect("valid")
        .fingerprint
    }

    fn attempt(amount: u64) -> Attempt {
        Attempt {
            key: Ok(Some(IdempotencyKey::mint())),
            fingerprint: fp(amount),
        }
    }

    const KEEP: time::Duration = time::Duration::hours(48);

    fn stored(state: KeyState, amount: u64, age: time::Duration) -> StoredRecord {
        StoredRecord {
            fingerprint: fp(amount),
            state,
            created_at: NOW - age,
            claimed_at: NOW - age,
            expires_at: NOW - age + KEEP,
        }
    }

    fn decide_now(attempt: &Attempt, stored: Option<&StoredRecord>) -> Decision {
        decide(&Policy::default_policy(), attempt, stored, NOW)
    }

    #[test]
    fn required_operation_without_key_is_rejected() {
        let attempt = Attempt {
            key: Err(KeyError::Missing),
            fingerprint: fp(1),
        };
        assert_eq!(decide_now(&attempt, None), Decision::RejectMissingKey);
    }

    #[test]
    fn malformed_key_is_rejected_with_its_reason() {
        let attempt = Attempt {
            key: Err(KeyError::NotUuid),
            fingerprint: fp(1),
        };
        assert_eq!(
            decide_now(&attempt, None),
            Decision::RejectMalformedKey(KeyError::NotUuid)
        );
    }

    #[test]
    fn optional_operation_without_key_proceeds_without_idempotency() {
        let attempt = Attempt {
            key: Ok(None),
            fingerprint: fp(1),
        };
        assert_eq!(decide_now(&attempt, None), Decision::ProceedWithoutKey);
    }

    #[test]
    fn new_key_is_claimed() {
        assert_eq!(decide_now(&attempt(1), None), Decision::Claim);
    }

    #[test]
    fn same_key_with_a_different_body_is_a_mismatch() {
        let record = stored(KeyState::Done, 1, time::Duration::minutes(1));
        assert_eq!(
            decide_now(&attempt(2), Some(&record)),
            Decision::RejectMismatch
        );
    }

    #[test]
    fn mismatch_wins_over_in_progress() {
        let record = stored(KeyState::Started, 1, time::Duration::seconds(1));
        assert_eq!(
            decide_now(&attempt(2), Some(&record)),
            Decision::RejectMismatch
        );
    }

    #[test]
    fn running_first_attempt_gives_in_progress_with_retry_after() {
        let record = stored(KeyState::Started, 1, time::Duration::seconds(3));
        assert_eq!(
            decide_now(&attempt(1), Some(&record)),
            Decision::InProgress {
                retry_after: IN_PROGRESS_RETRY_AFTER
            }
        );
    }

    #[test]
    fn finished_key_is_replayed() {
        let record = stored(KeyState::Done, 1, time::Duration::hours(47));
        assert_eq!(decide_now(&attempt(1), Some(&record)), Decision::Replay);
    }

    #[test]
    fn unknown_outcome_is_pending_with_retry_after() {
        let record = stored(KeyState::Unknown, 1, time::Duration::seconds(2));
        assert_eq!(
            decide_now(&attempt(1), Some(&record)),
            Decision::OutcomePending {
                retry_after: OUTCOME_PENDING_RETRY_AFTER
            }
        );
    }

    #[test]
    fn started_past_stuck_after_is_reconciled() {
        let just_before = stored(KeyState::Started, 1, time::Duration::seconds(299));
        let at_limit = stored(KeyState::Started, 1, time::Duration::minutes(5));
        assert!(matches!(
            decide_now(&attempt(1), Some(&just_before)),
            Decision::InProgress { .. }
        ));
        assert_eq!(
            decide_now(&attempt(1), Some(&at_limit)),
            Decision::Reconcile
        );
    }

    #[test]
    fn stuck_detection_counts_from_the_latest_claim() {
        let mut record = stored(KeyState::Started, 1, time::Duration::hours(1));
        record.claimed_at = NOW - time::Duration::seconds(10);
        assert!(matches!(
            decide_now(&attempt(1), Some(&record)),
            Decision::InProgress { .. }
        ));
    }

    #[test]
    fn finished_key_past_retention_is_a_new_request_even_with_another_body() {
        let record = stored(KeyState::Done, 1, time::Duration::hours(48));
        assert_eq!(
            decide_now(&attempt(1), Some(&record)),
            Decision::ClaimExpired
        );
        assert_eq!(
            decide_now(&attempt(2), Some(&record)),
            Decision::ClaimExpired
        );
    }

    #[test]
    fn unfinished_keys_never_expire_because_money_may_have_moved() {
        let old_started = stored(KeyState::Started, 1, time::Duration::hours(100));
        let old_unknown = stored(KeyState::Unknown, 1, time::Duration::hours(100));
        assert_eq!(
            decide_now(&attempt(1), Some(&old_started)),
            Decision::Reconcile
        );
        assert!(matches!(
            decide_now(&attempt(1), Some(&old_unknown)),
            Decision::OutcomePending { .. }
        ));
    }

    #[test]
    fn released_key_is_claimed_again_by_the_same_request_only() {
        let record = stored(KeyState::Released, 1, time::Duration::minutes(6));
        assert_eq!(
            decide_now(&attempt(1), Some(&record)),
            Decision::ClaimReleased
        );
        assert_eq!(
            decide_now(&attempt(2), Some(&record)),
            Decision::RejectMismatch
        );
    }

    #[test]
    fn released_key_past_retention_is_a_new_request() {
        let record = stored(KeyState::Released, 1, time::Duration::hours(48));
        assert_eq!(
            decide_now(&attempt(2), Some(&record)),
            Decision::ClaimExpired
        );
    }

    #[test]
    fn expiry_is_the_rows_whatever_the_policy_says_now() {
        // Claimed under a 24 h policy; this replica's policy keeps keys 48 h.
        let mut record = stored(KeyState::Released, 1, time::Duration::hours(25));
        record.expires_at = record.created_at + time::Duration::hours(24);
        assert_eq!(
            decide_now(&attempt(1), Some(&record)),
            Decision::ClaimExpired
        );
        // Claimed under a 72 h policy: not expired at 49 h, though this policy says 48 h.
        let mut record = stored(KeyState::Done, 1, time::Duration::hours(49));
        record.expires_at = record.created_at + time::Duration::hours(72);
        assert_eq!(decide_now(&attempt(1), Some(&record)), Decision::Replay);
    }

    #[test]
    fn key_states_round_trip_through_their_names() {
        for state in [
            KeyState::Started,
            KeyState::Unknown,
            KeyState::Released,
            KeyState::Done,
        ] {
            assert_eq!(KeyState::from_name(state.as_str()), Some(state));
        }
        assert_eq!(KeyState::from_name("finished"), None);
    }
}
