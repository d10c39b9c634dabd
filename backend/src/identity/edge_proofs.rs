//! [`EdgeProofs`]: the backend's check that a public API request came through the edge
//! (`shared::edge_proof`: a header the edge signs over the method, path, token, key, time, a
//! nonce and the body's digest), under the current secret or the one being rotated out, and its
//! memory of the nonces seen, so a captured request replayed to this replica within the proof's
//! life is refused too. Replicas do not share that memory, by choice: the proof binds the token
//! and the key, so a replay to another replica within 30 s can only be the same user's same
//! request, which the idempotency rules already make harmless (it replays the first reply), and
//! a shared memory would cost a database write on every request.

use std::time::Duration;

use secret_settings::{ExposeSecret, SecretString};
use shared::edge_proof::{self, Accepted, MAX_AGE, ProofError, ProvedRequest};

/// The most nonces remembered at once: far above a replica's requests in twice a proof's life.
const MAX_REMEMBERED: u64 = 2_000_000;

/// Checks edge proofs under one or two secrets.
pub struct EdgeProofs {
    secrets: Vec<Vec<u8>>,
    accepted: Accepted,
    seen: moka::sync::Cache<String, ()>,
}

impl EdgeProofs {
    /// Proofs made with any of `secrets` in the `accepted` versions; `None` if there are no
    /// secrets (no proof required).
    pub fn new(secrets: &[SecretString], accepted: Accepted) -> Option<EdgeProofs> {
        if secrets.is_empty() {
            return None;
        }
        Some(EdgeProofs {
            secrets: secrets
                .iter()
                .map(|secret| secret.expose_secret().as_bytes().to_vec())
                .collect(),
            accepted,
            seen: moka::sync::Cache::builder()
                .max_capacity(MAX_REMEMBERED)
                // Past twice the proof's life its time alone refuses it.
                .time_to_live(MAX_AGE * 2 + Duration::from_secs(1))
                .build(),
        })
    }

    /// Whether `header` proves `request` at `now_unix`, and its nonce is new.
    pub fn check(
        &self,
        header: Option<&str>,
        request: ProvedRequest<'_>,
        now_unix: i64,
    ) -> Result<(), ProofError> {
        let secrets: Vec<&[u8]> = self.secrets.iter().map(Vec::as_slice).collect();
        let nonce = edge_proof::verify(&secrets, self.accepted, header, request, now_unix)?;
        let entry = self.seen.entry(nonce.to_owned()).or_insert(());
        if entry.is_fresh() {
            Ok(())
        } else {
            Err(ProofError::Replayed)
        }
    }
}

/// Not derived: the secret must never reach a log.
impl std::fmt::Debug for EdgeProofs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EdgeProofs").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "edge-proof-secret-of-thirty-two-bytes!";
    const NOW: i64 = 1_800_000_000;

    #[test]
    fn a_proof_passes_once_and_its_replay_is_refused() {
        let proofs =
            EdgeProofs::new(&[SecretString::from(SECRET)], Accepted::V2Only).expect("a secret");
        let request = ProvedRequest {
            method: "GET",
            path_and_query: "/v1/payments/1",
            authorization: Some(b"Bearer a-token"),
            idempotency_key: None,
            body: b"",
        };
        let header = edge_proof::sign(SECRET.as_bytes(), request, NOW, "nonce-1");
        assert_eq!(proofs.check(Some(&header), request, NOW), Ok(()));
        assert_eq!(
            proofs.check(Some(&header), request, NOW + 1),
            Err(ProofError::Replayed)
        );
        let next = edge_proof::sign(SECRET.as_bytes(), request, NOW, "nonce-2");
        assert_eq!(proofs.check(Some(&next), request, NOW), Ok(()));
        assert_eq!(proofs.check(None, request, NOW), Err(ProofError::Missing));
    }

    #[test]
    fn no_secret_means_no_proof_is_checked() {
        assert!(EdgeProofs::new(&[], Accepted::V1AndV2).is_none());
    }
}
