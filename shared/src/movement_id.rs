//! The id of the payment or refund a claim creates, derived from the request rather than drawn
//! at random, so that a claim lost with a database (a disaster-recovery promotion, a restore to
//! a point in time) and made again by the client's retry gets the same id, and so the same bank
//! reference (`Operation::bank_reference`): a bank that dedupes references replies with the
//! first call's outcome instead of debiting twice (SPEC §7, "Bank references identify one
//! claim"; docs/design.md, "A claim lost with the database").
//!
//! The id is a version-8 UUID made from the SHA-256 of, in order: a label naming this rule,
//! the operation, the user, the key as stored, the request's fingerprint and the claim's
//! generation, each length-prefixed. The generation is the number of earlier claims of the
//! same (user, key) whose movements the store still keeps: 0 for the first, 1 for a key claimed
//! again after it expired, and so on; the store finds it by trying generation 0 first and
//! moving on while the id is taken ([`MAX_GENERATIONS`]). A claim lost with the database lost
//! its movement with it, so its retry lands on the same generation.
//!
//! The fingerprint is part of it so that a different request sent under a lost key (which no
//! store could refuse any more) is a different movement with its own reference, never a replay
//! at the bank of someone else's amount.

use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::{Fingerprint, Operation, UserId};

/// The last generation the store tries before it gives up on a key (a 422
/// `idempotency-key-reused`): a key reused after expiry this many times is a client minting
/// keys wrongly, not a retry.
pub const MAX_GENERATIONS: u32 = 64;

/// The id of generation `generation`'s movement for this request: the same inputs, the same id
/// on every replica, release and database.
pub fn movement_id(
    operation: Operation,
    (user, key): (&UserId, Uuid),
    fingerprint: &Fingerprint,
    generation: u32,
) -> Uuid {
    let mut digest = Sha256::new();
    for part in [
        b"safe-retries movement id v1".as_slice(),
        operation.name().as_bytes(),
        user.as_str().as_bytes(),
        key.as_bytes().as_slice(),
        fingerprint.as_bytes().as_slice(),
        &generation.to_be_bytes(),
    ] {
        digest.update((part.len() as u64).to_be_bytes());
        digest.update(part);
    }
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest.finalize()[..16]);
    uuid::Builder::from_custom_bytes(bytes).into_uuid()
}

#[cfg(test)]
mod tests {
    // Under wasm32 the same tests run through wasm-bindgen-test (see `.cargo/config.toml`).
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    fn id(user: &str, key: u128, fingerprint: u8, generation: u32) -> Uuid {
        movement_id(
            Operation::PayBill,
            (
                &UserId::from_subject(user).expect("a subject"),
                Uuid::from_u128(key),
            ),
            &Fingerprint::from_slice(&[fingerprint; 32]).expect("32 bytes"),
            generation,
        )
    }

    #[test]
    fn the_same_request_gets_the_same_id_everywhere() {
        assert_eq!(id("asha", 1, 7, 0), id("asha", 1, 7, 0));
        assert_eq!(id("asha", 1, 7, 0).get_version_num(), 8);
        // Computed independently (Python's hashlib, the same layout): every release and any other
        // implementation must reproduce it, or a claim remade after a database loss gets a new
        // reference.
        assert_eq!(
            id("asha", 1, 7, 0).to_string(),
            "cc3dc8bb-e388-8c04-b454-56958b332473"
        );
    }

    #[test]
    fn each_input_changes_the_id() {
        let first = id("asha", 1, 7, 0);
        let others = [
            id("ravi", 1, 7, 0),
            id("asha", 2, 7, 0),
            id("asha", 1, 8, 0),
            id("asha", 1, 7, 1),
            movement_id(
                Operation::RefundPayment,
                (
                    &UserId::from_subject("asha").expect("a subject"),
                    Uuid::from_u128(1),
                ),
                &Fingerprint::from_slice(&[7; 32]).expect("32 bytes"),
                0,
            ),
        ];
        for other in others {
            assert_ne!(first, other);
        }
    }

    #[test]
    fn inputs_cannot_slide_into_each_other() {
        // Without length prefixes, "ab" + "c" and "a" + "bc" would hash alike.
        assert_ne!(id("ab", 1, 7, 0), id("a", 1, 7, 0));
    }
}
