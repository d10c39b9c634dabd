//! The steps that take hold of a key, the same for payments and refunds: a new claim with a
//! fresh pending movement (`work::Claiming` says which), a re-claim of a released key under its
//! claim's own movement and reference, and a read of the key. A claim or re-claim calls the bank
//! next, so the bank's breaker admits the call first: while it refuses, nothing is claimed.

use std::time::{Duration, Instant};

use shared::movement_id::{MAX_GENERATIONS, movement_id};
use shared::server_path::{Event, SeenKey};
use shared::{Problem, ProblemKind};
use uuid::Uuid;

use super::work::{HeldClaim, Work};
use crate::bank;
use crate::domain::Cause;
use crate::error::Result;
use crate::reconcile;
use crate::state::AppState;
use crate::store::{ClaimResult, ClaimToken, KeyRef, StoreError, StoredKey};

/// `Step::Claim`: claims the key with a fresh pending movement, once the breaker admits a call.
pub(super) async fn claim(work: &mut Work) -> Result<Event> {
    let Some(leave) = breaker_leave(work) else {
        return Ok(Event::BreakerRefused);
    };
    let claim = ClaimToken::mint();
    let writing = Instant::now();
    let (id, claimed) = claim_first_free_generation(work, claim).await;
    let state = &work.state;
    state.metrics.write_took("claim", writing.elapsed());
    Ok(match claimed {
        Ok(ClaimResult::Claimed {
            movement,
            claim,
            expires_at,
        }) => {
            work.held = Some(HeldClaim::start(
                state,
                (work.key.clone(), claim),
                movement,
                leave,
            ));
            Event::Claimed { expires_at }
        }
        Ok(ClaimResult::Existing(stored)) => found(work, stored),
        Ok(ClaimResult::Vanished) => Event::Vanished,
        Ok(ClaimResult::PaymentNotFound) => Event::PaymentNotFound,
        Ok(ClaimResult::ExceedsRemaining { remaining_paise }) => {
            Event::ExceedsRemaining { remaining_paise }
        }
        Err(error @ StoreError::Unavailable(_)) => {
            release_when_reachable(state, (work.key.clone(), id, claim), &work.cause);
            return Err(error.into());
        }
        Err(StoreError::MovementIdTaken) => return Err(reused_past_every_generation().into()),
        Err(error) => return Err(error.into()),
    })
}

/// The refusal of a key whose movement ids are taken up to [`MAX_GENERATIONS`]: a key made
/// again after it expired that many times is a client reusing one key for new requests, never
/// a retry. Nothing was written or sent; a new request needs a new key.
fn reused_past_every_generation() -> Problem {
    Problem::new(
        ProblemKind::IdempotencyKeyReused,
        format!(
            "This key was already used for {} requests, each after the one before it expired; \
             a retry never needs that. Use a new key for a new request.",
            MAX_GENERATIONS + 1
        ),
    )
}

/// Claims under the first generation whose movement id is free (`shared::movement_id`): the
/// first try but for a key reused after it expired, whose earlier movements hold the ids
/// before it. The id is the request's, not a random one, so a claim lost with the database is
/// made again under the same id and bank reference.
async fn claim_first_free_generation(
    work: &Work,
    claim: ClaimToken,
) -> (Uuid, std::result::Result<ClaimResult, StoreError>) {
    let mut generation = 0;
    loop {
        let id = movement_id(
            work.claiming.operation(),
            (&work.key.user, work.key.key),
            &work.fingerprint,
            generation,
        );
        let claimed = work
            .claiming
            .claim(
                &work.state,
                (work.key.clone(), id, claim),
                &work.fingerprint,
                &work.cause,
            )
            .await;
        match claimed {
            Err(StoreError::MovementIdTaken) if generation < MAX_GENERATIONS => generation += 1,
            claimed => return (id, claimed),
        }
    }
}

/// `Step::Read`: the key, if stored.
pub(super) async fn read(work: &mut Work) -> Result<Event> {
    Ok(
        match work.state.claims().load_key(work.key.clone()).await? {
            Some(stored) => found(work, stored),
            None => Event::NotFound,
        },
    )
}

/// `Step::Reclaim`: claims the released key again, under its claim's own movement and
/// reference, once the breaker admits a call.
pub(super) async fn reclaim(work: &mut Work) -> Result<Event> {
    let Some(leave) = breaker_leave(work) else {
        return Ok(Event::BreakerRefused);
    };
    let state = &work.state;
    let claim = ClaimToken::mint();
    let reclaimed = state
        .claims()
        .reclaim_released(work.key.clone(), &work.fingerprint, claim, &work.cause)
        .await?;
    Ok(match reclaimed {
        Some(movement) => {
            work.held = Some(HeldClaim::start(
                state,
                (work.key.clone(), claim),
                movement,
                leave,
            ));
            Event::Reclaimed
        }
        // Another retry re-claimed it first, a reconciler is checking it, or its last check
        // voided it (the next read finds it expired).
        None => Event::NotReclaimed,
    })
}

/// The breaker's leave for a new bank call; `None` while it refuses, its refusal kept for the
/// reply.
fn breaker_leave(work: &mut Work) -> Option<bank::Admitted> {
    match work.state.bank.admit() {
        Ok(leave) => Some(leave),
        Err(refused) => {
            work.parts.bank_refused = Some(refused);
            None
        }
    }
}

/// The stored key as the path sees it, kept for the steps that follow.
fn found(work: &mut Work, stored: StoredKey) -> Event {
    let seen = SeenKey {
        record: stored.record.clone(),
        read_at: stored.read_at,
        next_check_at: reconcile::next_check_at(&work.state, &stored),
        settlement_due_at: stored.settlement_due_at,
    };
    work.parts.movement_id = Some(stored.movement_id);
    work.stored = Some(stored);
    Event::Found(seen)
}

/// Releases the claim `claim` (of `key`, with the movement `id`) whose statement the database
/// never replied to, once the database replies again (a failover between the commit and its
/// reply, say), in a task of its own. The claim may have committed or not; either way no bank
/// call was made for it, and only this request would have made one, so releasing it is safe and
/// lets the client's retry claim it again at once, instead of waiting for reconciliation to
/// find it `stuck_after` old. The release matches this claim alone, and only while its row is
/// younger than `stuck_after` on the database's clock: a key released since and claimed again
/// (by a reconciler's release and a retry on another replica, while this one was cut off) is
/// another claim and is left alone. Tries for at most `stuck_after` here too, after which the
/// statement would refuse anyway.
fn release_when_reachable(
    state: &AppState,
    (key, id, claim): (KeyRef, Uuid, ClaimToken),
    cause: &Cause,
) {
    let (state, cause) = (state.clone(), cause.clone());
    tokio::spawn(async move {
        let give_up = tokio::time::Instant::now() + state.policy.stuck_after;
        let mut pause = CLAIM_WITHOUT_REPLY_FIRST_PAUSE;
        while tokio::time::Instant::now() < give_up {
            tokio::time::sleep(pause).await;
            let stuck_after = state.policy.stuck_after;
            match state
                .claims()
                .release_unsent(key.clone(), (id, claim), stuck_after, &cause)
                .await
            {
                Ok(()) => return,
                Err(StoreError::Unavailable(_)) => {
                    pause = (pause * 2).min(CLAIM_WITHOUT_REPLY_MAX_PAUSE)
                }
                Err(error) => {
                    tracing::warn!(%error, "could not release a claim whose reply was lost; reconciliation will");
                    return;
                }
            }
        }
    });
}

/// The first pause before releasing a claim whose reply was lost (the database is failing over,
/// which takes seconds); the pause doubles after each try the database did not reply to…
const CLAIM_WITHOUT_REPLY_FIRST_PAUSE: Duration = Duration::from_millis(500);
/// …up to this.
const CLAIM_WITHOUT_REPLY_MAX_PAUSE: Duration = Duration::from_secs(5);
