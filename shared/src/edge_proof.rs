//! The edge's proof that a request came through it: a header the edge adds to every request it
//! forwards, and the backend checks before anything else on the public API, so a client that
//! calls the backend directly cannot skip the edge's rate limits and early refusals.
//!
//! `Edge-Proof: v2 t=<unix seconds> n=<nonce> sig=<base64url HMAC-SHA-256>`, where the MAC is
//! under a secret only the edge and the backend hold (`EDGE_PROOF_SECRET`), over
//! `v2\n{t}\n{n}\n{METHOD}\n{path and query}\n{Authorization}\n{Idempotency-Key}\n{body}`,
//! each header written `+<its SHA-256, base64url>` when sent and `-` when not, the body as its
//! SHA-256 in base64url. So a proof is good for one request: its method, path, token, key and
//! body, for [`MAX_AGE`] either side of the backend's clock. A proof seen in a log and sent again
//! with another token or key is refused by every replica (the MAC, not a memory, refuses it);
//! sent again unchanged, it is the client's own retry, which the idempotency rules already make
//! harmless (the same user, key and body replay the first reply). Each backend replica also
//! remembers the nonces it saw for that long ([`ProofError::Replayed`] is the backend's to raise:
//! this module has no memory).
//!
//! Upgrade: 0.9.0's edge signed `v1`, over method, path, time, nonce and body only. This release's
//! backend accepts a `v1` proof only where told to (`EDGE_PROOF_ACCEPT_V1`, on by default in this
//! release, for the rolling upgrade: backends first, then the edge); the next release drops it.
//!
//! Rotation: the backend accepts proofs under any of its secrets (the current and, during a
//! rotation, the previous: `EDGE_PROOF_SECRET_PREVIOUS`); the edge signs with one. Steps in
//! docs/identity.md.
//!
//! Why a signed header rather than mutual TLS: it binds the request, not only the connection,
//! so it survives a TLS-terminating load balancer in front of the replicas; and the Worker needs
//! nothing but a secret, the same kind of binding as its token secret.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use thiserror::Error;

/// The header the edge adds.
pub const PROOF_HEADER: &str = "edge-proof";

/// The setting (a secret at the edge and the backend) holding the proof's key.
pub const PROOF_SECRET_SETTING: &str = "EDGE_PROOF_SECRET";

/// The backend's setting holding the secret being rotated out: proofs under it are still
/// accepted, so the edge can move to the new one without a refused request.
pub const PREVIOUS_PROOF_SECRET_SETTING: &str = "EDGE_PROOF_SECRET_PREVIOUS";

/// How far a proof's time may be from the backend's clock, either way.
pub const MAX_AGE: Duration = Duration::from_secs(30);

/// The shortest secret accepted, as for the token secret.
pub const MIN_PROOF_SECRET_BYTES: usize = 32;

/// Why a request's proof was refused (all get the same reply; the variant is for the log).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum ProofError {
    /// No proof header.
    #[error("no edge proof")]
    Missing,
    /// Not the `v2 t= n= sig=` form.
    #[error("the edge proof is malformed")]
    Malformed,
    /// Its time is more than [`MAX_AGE`] from now.
    #[error("the edge proof is stale")]
    Stale,
    /// The MAC does not match this request under any of the secrets.
    #[error("the edge proof does not match the request")]
    Forged,
    /// Its nonce was seen already within [`MAX_AGE`].
    #[error("the edge proof was replayed")]
    Replayed,
    /// A `v1` proof, where only `v2` is accepted.
    #[error("the edge proof is v1, no longer accepted")]
    OldVersion,
}

/// Which proof versions a check accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accepted {
    /// Only `v2`, which covers the token and the key.
    V2Only,
    /// `v2`, and `v1` from an edge not yet upgraded.
    V1AndV2,
}

/// What a proof covers: one request.
#[derive(Debug, Clone, Copy)]
pub struct ProvedRequest<'r> {
    /// The method, as sent (`POST`).
    pub method: &'r str,
    /// The path and query, as sent.
    pub path_and_query: &'r str,
    /// The `Authorization` header's value, if sent.
    pub authorization: Option<&'r [u8]>,
    /// The `Idempotency-Key` header's value, if sent.
    pub idempotency_key: Option<&'r [u8]>,
    /// The body's bytes.
    pub body: &'r [u8],
}

/// The header value proving `request` at `now_unix` with `nonce` (a fresh random string).
pub fn sign(secret: &[u8], request: ProvedRequest<'_>, now_unix: i64, nonce: &str) -> String {
    let signature = URL_SAFE_NO_PAD.encode(mac(secret, request, now_unix, nonce));
    format!("v2 t={now_unix} n={nonce} sig={signature}")
}

/// A `v1` proof of `request`, as 0.9.0's edge made it: for the upgrade's tests.
pub fn sign_v1(secret: &[u8], request: ProvedRequest<'_>, now_unix: i64, nonce: &str) -> String {
    let mut mac = keyed(secret);
    mac.update(&v1_signing_input(request, now_unix, nonce));
    let signature = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
    format!("v1 t={now_unix} n={nonce} sig={signature}")
}

/// Checks `header` against `request` at `now_unix`, under any of `secrets`, in the `accepted`
/// versions; the nonce, for the caller to remember.
pub fn verify<'h>(
    secrets: &[&[u8]],
    accepted: Accepted,
    header: Option<&'h str>,
    request: ProvedRequest<'_>,
    now_unix: i64,
) -> Result<&'h str, ProofError> {
    let header = header.ok_or(ProofError::Missing)?;
    let mut fields = header.split(' ');
    let (Some(version @ ("v1" | "v2")), Some(time), Some(nonce), Some(signature), None) = (
        fields.next(),
        fields.next().and_then(|field| field.strip_prefix("t=")),
        fields.next().and_then(|field| field.strip_prefix("n=")),
        fields.next().and_then(|field| field.strip_prefix("sig=")),
        fields.next(),
    ) else {
        return Err(ProofError::Malformed);
    };
    let time: i64 = time.parse().map_err(|_| ProofError::Malformed)?;
    let signature = URL_SAFE_NO_PAD
        .decode(signature)
        .map_err(|_| ProofError::Malformed)?;
    if nonce.is_empty() || nonce.len() > 64 {
        return Err(ProofError::Malformed);
    }
    let max_age = i64::try_from(MAX_AGE.as_secs()).unwrap_or(i64::MAX);
    if time.abs_diff(now_unix) > max_age.unsigned_abs() {
        return Err(ProofError::Stale);
    }
    let input = match (version, accepted) {
        ("v2", _) => signing_input(request, time, nonce),
        (_, Accepted::V1AndV2) => v1_signing_input(request, time, nonce),
        (_, Accepted::V2Only) => return Err(ProofError::OldVersion),
    };
    let matches = |secret: &&[u8]| {
        let mut expected = keyed(secret);
        expected.update(&input);
        expected.verify_slice(&signature).is_ok()
    };
    if secrets.iter().any(matches) {
        Ok(nonce)
    } else {
        Err(ProofError::Forged)
    }
}

fn mac(secret: &[u8], request: ProvedRequest<'_>, now_unix: i64, nonce: &str) -> Vec<u8> {
    let mut mac = keyed(secret);
    mac.update(&signing_input(request, now_unix, nonce));
    mac.finalize().into_bytes().to_vec()
}

fn keyed(secret: &[u8]) -> Hmac<Sha256> {
    Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length")
}

fn v1_signing_input(request: ProvedRequest<'_>, time: i64, nonce: &str) -> Vec<u8> {
    let body_digest = URL_SAFE_NO_PAD.encode(Sha256::digest(request.body));
    format!(
        "v1\n{time}\n{nonce}\n{}\n{}\n{body_digest}",
        request.method, request.path_and_query
    )
    .into_bytes()
}

fn signing_input(request: ProvedRequest<'_>, time: i64, nonce: &str) -> Vec<u8> {
    let digest = |bytes: &[u8]| URL_SAFE_NO_PAD.encode(Sha256::digest(bytes));
    let header =
        |value: Option<&[u8]>| value.map_or_else(|| "-".to_owned(), |v| format!("+{}", digest(v)));
    format!(
        "v2\n{time}\n{nonce}\n{}\n{}\n{}\n{}\n{}",
        request.method,
        request.path_and_query,
        header(request.authorization),
        header(request.idempotency_key),
        digest(request.body),
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    const SECRET: &[u8] = b"edge-proof-secret-of-thirty-two-bytes!";
    const NOW: i64 = 1_800_000_000;

    fn pay(body: &[u8]) -> ProvedRequest<'_> {
        ProvedRequest {
            method: "POST",
            path_and_query: "/v1/bills/elec-1/pay",
            authorization: Some(b"Bearer token-of-user-1"),
            idempotency_key: Some(b"key-1"),
            body,
        }
    }

    #[test]
    fn a_proof_holds_for_its_request_within_its_time() {
        let header = sign(SECRET, pay(b"{}"), NOW, "n1");
        assert_eq!(
            verify(
                &[SECRET],
                Accepted::V2Only,
                Some(&header),
                pay(b"{}"),
                NOW + 30
            ),
            Ok("n1")
        );
        assert_eq!(
            verify(
                &[SECRET],
                Accepted::V2Only,
                Some(&header),
                pay(b"{}"),
                NOW - 30
            ),
            Ok("n1")
        );
    }

    #[test]
    fn another_body_path_method_secret_or_time_is_refused() {
        let header = sign(SECRET, pay(b"{}"), NOW, "n1");
        let check = |request, secret: &[u8], now| {
            verify(&[secret], Accepted::V2Only, Some(&header), request, now)
        };
        assert_eq!(check(pay(b"{ }"), SECRET, NOW), Err(ProofError::Forged));
        let other_path = ProvedRequest {
            path_and_query: "/v1/bills/elec-2/pay",
            ..pay(b"{}")
        };
        assert_eq!(check(other_path, SECRET, NOW), Err(ProofError::Forged));
        let other_method = ProvedRequest {
            method: "PUT",
            ..pay(b"{}")
        };
        assert_eq!(check(other_method, SECRET, NOW), Err(ProofError::Forged));
        let other_token = ProvedRequest {
            authorization: Some(b"Bearer token-of-user-2"),
            ..pay(b"{}")
        };
        assert_eq!(check(other_token, SECRET, NOW), Err(ProofError::Forged));
        let other_key = ProvedRequest {
            idempotency_key: Some(b"key-2"),
            ..pay(b"{}")
        };
        assert_eq!(check(other_key, SECRET, NOW), Err(ProofError::Forged));
        for (authorization, idempotency_key) in [
            (None, Some(&b"key-1"[..])),
            (Some(&b"Bearer token-of-user-1"[..]), None),
        ] {
            let header_dropped = ProvedRequest {
                authorization,
                idempotency_key,
                ..pay(b"{}")
            };
            assert_eq!(check(header_dropped, SECRET, NOW), Err(ProofError::Forged));
        }
        let other_secret = b"another-secret-of-thirty-two-bytes!!!!";
        assert_eq!(
            check(pay(b"{}"), other_secret, NOW),
            Err(ProofError::Forged)
        );
        assert_eq!(check(pay(b"{}"), SECRET, NOW + 31), Err(ProofError::Stale));
        assert_eq!(check(pay(b"{}"), SECRET, NOW - 31), Err(ProofError::Stale));
    }

    #[test]
    fn a_missing_or_garbled_proof_is_named_so() {
        assert_eq!(
            verify(&[SECRET], Accepted::V2Only, None, pay(b""), NOW),
            Err(ProofError::Missing)
        );
        let good = sign(SECRET, pay(b""), NOW, "n1");
        for garbled in [
            "",
            "v3 t=1 n=a sig=AA",
            "v2 t=x n=a sig=AA",
            "v2 t=1 n= sig=AA",
            "v2 t=1 n=a sig=!!",
            "v2 t=1 n=a",
            &format!("{good} extra"),
        ] {
            assert_eq!(
                verify(&[SECRET], Accepted::V2Only, Some(garbled), pay(b""), NOW),
                Err(ProofError::Malformed),
                "{garbled}"
            );
        }
    }

    #[test]
    fn during_a_rotation_either_secret_proves_a_request() {
        let previous = b"the-previous-secret-of-thirty-two-bytes";
        let by_old_edge = sign(previous, pay(b"{}"), NOW, "n1");
        let by_new_edge = sign(SECRET, pay(b"{}"), NOW, "n2");
        for header in [&by_old_edge, &by_new_edge] {
            let accepted = verify(
                &[SECRET, previous],
                Accepted::V2Only,
                Some(header),
                pay(b"{}"),
                NOW,
            );
            assert!(accepted.is_ok(), "{header}");
        }
        assert_eq!(
            verify(
                &[SECRET],
                Accepted::V2Only,
                Some(&by_old_edge),
                pay(b"{}"),
                NOW
            ),
            Err(ProofError::Forged),
            "once the rotation ends, the old secret proves nothing"
        );
    }

    #[test]
    fn a_v1_proof_passes_only_where_accepted_and_only_for_its_request() {
        let v1 = sign_v1(SECRET, pay(b"{}"), NOW, "n1");
        assert_eq!(
            verify(&[SECRET], Accepted::V1AndV2, Some(&v1), pay(b"{}"), NOW),
            Ok("n1")
        );
        assert_eq!(
            verify(&[SECRET], Accepted::V2Only, Some(&v1), pay(b"{}"), NOW),
            Err(ProofError::OldVersion)
        );
        assert_eq!(
            verify(&[SECRET], Accepted::V1AndV2, Some(&v1), pay(b"{ }"), NOW),
            Err(ProofError::Forged)
        );
        let as_v2 = v1.replacen("v1", "v2", 1);
        assert_eq!(
            verify(&[SECRET], Accepted::V1AndV2, Some(&as_v2), pay(b"{}"), NOW),
            Err(ProofError::Forged),
            "a v1 signature relabelled v2 proves nothing"
        );
    }
}
