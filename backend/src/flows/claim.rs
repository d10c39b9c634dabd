//! One round of a payment or a refund, the same for both: claim the key (the operation says
//! how, [`ClaimTry`]), and if this request won it, call the bank once and save; if the key is
//! stored already, decide on it ([`super::existing_key`]); if the key had expired and was made
//! way for, claim again.

use std::future::Future;

use time::OffsetDateTime;

use super::admit::Admitted;
use super::bank_call::call_bank_and_save;
use super::existing_key::answer_existing_key;
use super::rounds::{Round, RoundEnd};
use crate::domain::{Cause, Reply};
use crate::error::{Error, Result};
use crate::state::AppState;
use crate::store::{KeyRef, SavedMovement, StoreError, StoredKey};

/// How many claims a round makes at most. Reusing an expired key that was released with a
/// check still to come takes three (settle the old claim, delete the key, claim it); one more
/// spares a rare race a spurious error.
const CLAIM_TRIES: usize = 4;

/// What one claim of a key came to.
pub(super) enum ClaimTry {
    /// This request won the key: its pending movement, and the key's expiry.
    Claimed {
        /// The pending payment or refund written with the claim.
        movement: SavedMovement,
        /// The key's expiry, as written on its row.
        expires_at: OffsetDateTime,
    },
    /// The (user, key) is stored: decide on it.
    Existing(StoredKey),
    /// The operation refused the claim and wrote nothing (a refund of no payment, say).
    Refused(Reply),
}

/// One round of the request `admitted` on `key`: claims with `claim` (or, after a wait, reads
/// the key first), and carries out what follows, recorded against `cause`.
pub(super) async fn claim_and_carry_out<Claim, Claiming>(
    state: &AppState,
    (key, admitted): (KeyRef, &Admitted),
    round: Round,
    cause: &Cause,
    mut claim: Claim,
) -> Result<RoundEnd>
where
    Claim: FnMut() -> Claiming,
    Claiming: Future<Output = Result<ClaimTry, StoreError>>,
{
    let mut read_first = match round {
        Round::First => None,
        Round::AfterWait => state.claims().load_key(key).await?,
    };
    for _ in 0..CLAIM_TRIES {
        let tried = match read_first.take() {
            Some(stored) => ClaimTry::Existing(stored),
            None => claim().await?,
        };
        let stored = match tried {
            ClaimTry::Claimed {
                movement,
                expires_at,
            } => {
                let reply = call_bank_and_save(state, key, &movement, cause).await?;
                return Ok(RoundEnd::Reply(reply.expiring(expires_at)));
            }
            ClaimTry::Refused(reply) => return Ok(RoundEnd::Reply(reply)),
            ClaimTry::Existing(stored) => stored,
        };
        let attempt = &admitted.attempt;
        if let Some(end) = answer_existing_key(state, key, attempt, &stored, cause).await? {
            return Ok(end);
        }
    }
    Err(Error::ClaimRoundsExhausted)
}
