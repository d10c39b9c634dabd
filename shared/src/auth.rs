//! Bearer tokens (SPEC §7): HS256 JWTs whose `sub` is the user id and whose `exp` bounds them.
//!
//! Both the edge and the backend verify every token with the same code; the backend never trusts
//! an identity the edge merely asserts. Only HS256 is implemented, on purpose: the header's
//! `alg` must say `HS256` (so `none` and algorithm-confusion tokens are refused), the signature
//! is checked in constant time by `hmac`, and the claims must hold a positive integer `sub` and
//! an `exp` in the future. Written on `hmac` + `sha2` rather than a general JWT crate to keep
//! RSA and ECDSA code out of the Wasm module.

use std::fmt;
use std::num::NonZeroU64;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use thiserror::Error;

type HmacSha256 = Hmac<Sha256>;

/// The longest token accepted; a real one is about 150 bytes.
const MAX_TOKEN_LEN: usize = 4096;

/// The authenticated user: a positive integer, parsed from the token's `sub`. At most
/// 2^63 − 1, so it fits a signed 64-bit database column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct UserId(NonZeroU64);

impl UserId {
    /// A user id from an integer in `1..=i64::MAX`.
    pub fn new(id: u64) -> Option<UserId> {
        i64::try_from(id).ok()?;
        NonZeroU64::new(id).map(UserId)
    }

    /// A user id read back from a signed column.
    pub fn from_i64(id: i64) -> Option<UserId> {
        u64::try_from(id).ok().and_then(UserId::new)
    }

    /// The id as a number.
    pub fn get(self) -> u64 {
        self.0.get()
    }

    /// The id for a signed 64-bit column; always positive.
    pub fn as_i64(self) -> i64 {
        i64::try_from(self.0.get()).expect("UserId::new keeps ids within i64")
    }
}

impl fmt::Display for UserId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Why a token was refused. All of them are answered with the same 401; the variant is logged.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AuthError {
    /// No `Authorization` header.
    #[error("no Authorization header")]
    Missing,
    /// The header is not `Bearer <token>`.
    #[error("the Authorization header is not a Bearer token")]
    NotBearer,
    /// The token is not three base64url parts with JSON header and claims.
    #[error("the token is malformed")]
    Malformed,
    /// The header names another algorithm than HS256.
    #[error("the token's algorithm is not HS256")]
    WrongAlgorithm,
    /// The signature does not match the secret.
    #[error("the token's signature is invalid")]
    BadSignature,
    /// `exp` is in the past.
    #[error("the token has expired")]
    Expired,
    /// `sub` is not a positive integer.
    #[error("the token's subject is not a positive integer user id")]
    BadSubject,
}

#[derive(Serialize, Deserialize)]
struct Header {
    alg: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    typ: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct Claims {
    sub: String,
    exp: i64,
}

/// Verifies an `Authorization` header value and returns the user it names.
pub fn verify_authorization(
    header: Option<&[u8]>,
    secret: &[u8],
    now_unix: i64,
) -> Result<UserId, AuthError> {
    let header = header.ok_or(AuthError::Missing)?;
    let token = header
        .strip_prefix(b"Bearer ")
        .or_else(|| header.strip_prefix(b"bearer "))
        .ok_or(AuthError::NotBearer)?;
    verify_token(token.trim_ascii(), secret, now_unix)
}

/// Verifies an HS256 token and returns the user in its `sub`.
pub fn verify_token(token: &[u8], secret: &[u8], now_unix: i64) -> Result<UserId, AuthError> {
    if token.len() > MAX_TOKEN_LEN {
        return Err(AuthError::Malformed);
    }
    let mut parts = token.split(|b| *b == b'.');
    let (Some(header), Some(claims), Some(signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(AuthError::Malformed);
    };
    let header: Header = decode_json(header)?;
    if header.alg != "HS256" {
        return Err(AuthError::WrongAlgorithm);
    }
    let signature = URL_SAFE_NO_PAD
        .decode(signature)
        .map_err(|_| AuthError::Malformed)?;
    // The signature covers `header.claims`: everything before the last dot.
    let signing_input = &token[..header_and_claims_len(token)];
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(signing_input);
    mac.verify_slice(&signature)
        .map_err(|_| AuthError::BadSignature)?;
    // Claims are only trusted once the signature holds.
    let claims: Claims = decode_json(claims)?;
    if claims.exp <= now_unix {
        return Err(AuthError::Expired);
    }
    let id = claims
        .sub
        .parse::<u64>()
        .map_err(|_| AuthError::BadSubject)?;
    UserId::new(id).ok_or(AuthError::BadSubject)
}

/// Signs an HS256 token for `user`, expiring at `exp_unix`. For development tokens and tests;
/// production tokens come from the identity provider.
pub fn sign_token(user: UserId, exp_unix: i64, secret: &[u8]) -> String {
    let header = Header {
        alg: "HS256".to_owned(),
        typ: Some("JWT".to_owned()),
    };
    let claims = Claims {
        sub: user.to_string(),
        exp: exp_unix,
    };
    let signing_input = format!("{}.{}", encode_part(&header), encode_part(&claims));
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(signing_input.as_bytes());
    let signature = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
    format!("{signing_input}.{signature}")
}

/// The length of `header.claims`, the part before the last dot (the token has three parts).
fn header_and_claims_len(token: &[u8]) -> usize {
    token.iter().rposition(|b| *b == b'.').unwrap_or(0)
}

fn encode_part(value: &impl Serialize) -> String {
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(value).expect("token parts always serialise"))
}

fn decode_json<T: for<'de> Deserialize<'de>>(part: &[u8]) -> Result<T, AuthError> {
    let bytes = URL_SAFE_NO_PAD
        .decode(part)
        .map_err(|_| AuthError::Malformed)?;
    serde_json::from_slice(&bytes).map_err(|_| AuthError::Malformed)
}

#[cfg(test)]
mod tests {
    // Under wasm32 the same tests run through wasm-bindgen-test (see `.cargo/config.toml`).
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    const SECRET: &[u8] = b"test-secret";
    const NOW: i64 = 1_800_000_000;

    fn user(id: u64) -> UserId {
        UserId::new(id).expect("positive")
    }

    #[test]
    fn signed_token_verifies_to_its_user() {
        let token = sign_token(user(42), NOW + 60, SECRET);
        assert_eq!(verify_token(token.as_bytes(), SECRET, NOW), Ok(user(42)));
        let header = format!("Bearer {token}");
        assert_eq!(
            verify_authorization(Some(header.as_bytes()), SECRET, NOW),
            Ok(user(42))
        );
    }

    #[test]
    fn missing_and_non_bearer_headers_are_refused() {
        assert_eq!(
            verify_authorization(None, SECRET, NOW),
            Err(AuthError::Missing)
        );
        assert_eq!(
            verify_authorization(Some(b"Basic YTpi"), SECRET, NOW),
            Err(AuthError::NotBearer)
        );
    }

    #[test]
    fn expired_token_is_refused() {
        let token = sign_token(user(1), NOW - 1, SECRET);
        assert_eq!(
            verify_token(token.as_bytes(), SECRET, NOW),
            Err(AuthError::Expired)
        );
    }

    #[test]
    fn token_signed_with_another_secret_is_refused() {
        let token = sign_token(user(1), NOW + 60, b"another-secret");
        assert_eq!(
            verify_token(token.as_bytes(), SECRET, NOW),
            Err(AuthError::BadSignature)
        );
    }

    #[test]
    fn tampered_claims_are_refused() {
        let token = sign_token(user(1), NOW + 60, SECRET);
        let parts: Vec<&str> = token.split('.').collect();
        let forged_claims = URL_SAFE_NO_PAD.encode(br#"{"sub":"2","exp":1900000000}"#);
        let forged = format!("{}.{}.{}", parts[0], forged_claims, parts[2]);
        assert_eq!(
            verify_token(forged.as_bytes(), SECRET, NOW),
            Err(AuthError::BadSignature)
        );
    }

    #[test]
    fn alg_none_is_refused() {
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#);
        let claims = URL_SAFE_NO_PAD.encode(br#"{"sub":"1","exp":1900000000}"#);
        let token = format!("{header}.{claims}.");
        assert_eq!(
            verify_token(token.as_bytes(), SECRET, NOW),
            Err(AuthError::WrongAlgorithm)
        );
    }

    #[test]
    fn garbage_is_malformed_not_a_panic() {
        for token in [
            &b""[..],
            b"a.b",
            b"a.b.c.d",
            b"\xff\xfe.x.y",
            &[b'a'; 5000][..],
        ] {
            assert_eq!(
                verify_token(token, SECRET, NOW),
                Err(AuthError::Malformed),
                "{token:?}"
            );
        }
    }

    #[test]
    fn non_numeric_or_zero_subject_is_refused() {
        for sub in ["asha", "0", "-3", "9223372036854775808"] {
            let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256"}"#);
            let claims = URL_SAFE_NO_PAD.encode(format!(r#"{{"sub":"{sub}","exp":{}}}"#, NOW + 9));
            let input = format!("{header}.{claims}");
            let mut mac = HmacSha256::new_from_slice(SECRET).expect("key");
            mac.update(input.as_bytes());
            let signature = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
            let token = format!("{input}.{signature}");
            assert_eq!(
                verify_token(token.as_bytes(), SECRET, NOW),
                Err(AuthError::BadSubject),
                "{sub}"
            );
        }
    }
}
