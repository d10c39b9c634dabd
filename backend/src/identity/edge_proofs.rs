//! [`EdgeProofs`]: the backend's check that a public API request came through the edge
//! (`shared::edge_proof`: a header the edge signs over the method, path, time, a nonce and the
//! body's digest), and its memory of the nonces seen, so a captured request replayed to this
//! replica within the proof's life is refused too. Replicas do not share that memory: a replay
//! to another replica within 30 s repeats a request the idempotency rules already make
//! harmless (the same key and body replay the first reply), and nothing more.

use std::time::Duration;

use shared::edge_proof::{self, MAX_AGE, ProofError, ProvedRequest};

/// The most nonces remembered at once: far above a replica's requests in twice a proof's life.
const MAX_REMEMBERED: u64 = 2_000_000;

/// Checks edge proofs with one secret.
pub struct EdgeProofs {
    secret: Vec<u8>,
    seen: moka::sync::Cache<String, ()>,
}

impl EdgeProofs {
    /// Proofs made with `secret`.
    pub fn new(secret: Vec<u8>) -> EdgeProofs {
        EdgeProofs {
            secret,
            seen: moka::sync::Cache::builder()
                .max_capacity(MAX_REMEMBERED)
                // Past twice the proof's life its time alone refuses it.
                .time_to_live(MAX_AGE * 2 + Duration::from_secs(1))
                .build(),
        }
    }

    /// Whether `header` proves `request` at `now_unix`, and its nonce is new.
    pub fn check(
        &self,
        header: Option<&str>,
        request: ProvedRequest<'_>,
        now_unix: i64,
    ) -> Result<(), ProofError> {
        let nonce = edge_proof::verify(&self.secret, header, request, now_unix)?;
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

    const SECRET: &[u8] = b"edge-proof-secret-of-thirty-two-bytes!";
    const NOW: i64 = 1_800_000_000;

    #[test]
    fn a_proof_passes_once_and_its_replay_is_refused() {
        let proofs = EdgeProofs::new(SECRET.to_vec());
        let request = ProvedRequest {
            method: "GET",
            path_and_query: "/v1/payments/1",
            body: b"",
        };
        let header = edge_proof::sign(SECRET, request, NOW, "nonce-1");
        assert_eq!(proofs.check(Some(&header), request, NOW), Ok(()));
        assert_eq!(
            proofs.check(Some(&header), request, NOW + 1),
            Err(ProofError::Replayed)
        );
        let next = edge_proof::sign(SECRET, request, NOW, "nonce-2");
        assert_eq!(proofs.check(Some(&next), request, NOW), Ok(()));
        assert_eq!(proofs.check(None, request, NOW), Err(ProofError::Missing));
    }
}
