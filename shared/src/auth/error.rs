//! Why a token, or a secret, was refused.

use thiserror::Error;

use super::hs256::{JWT_SECRET_SETTING, MIN_SECRET_BYTES};
use super::user::SubjectError;

/// Why a token was refused. All of them get the same 401; the variant is logged.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AuthError {
    /// No `Authorization` header.
    #[error("no Authorization header")]
    Missing,
    /// The header is not `Bearer <token>`.
    #[error("the Authorization header is not a Bearer token")]
    NotBearer,
    /// The token is not three base64url parts with JSON header and claims of the right types.
    #[error("the token is malformed")]
    Malformed,
    /// The header names an algorithm this verifier does not take, or not the one its key was
    /// published for (`none`, HS256 against a public key, RS256 for an EC key…).
    #[error("the token's algorithm is not the one its key is for")]
    WrongAlgorithm,
    /// The token names no key (`kid`), which a key set requires.
    #[error("the token names no key (kid)")]
    MissingKeyId,
    /// No key of the published set has the token's `kid` (after a refetch, where one was due).
    #[error("no published key has the token's kid")]
    UnknownKey,
    /// The identity provider's keys have never been fetched (it is unreachable).
    #[error("the identity provider's keys are unavailable")]
    KeysUnavailable,
    /// The provider has been unreachable for longer than the last keys fetched may be trusted
    /// ([`crate::auth::key_cache::CachePolicy::max_stale`]): a key it revoked meanwhile must not
    /// stay valid, so no token is accepted until it replies again. A 503, not a 401: the token
    /// may be good, and the same request succeeds once the provider is back.
    #[error("the identity provider has been unreachable for longer than its last keys may be used")]
    ProviderKeysTooOld,
    /// The signature does not match the secret or key.
    #[error("the token's signature is invalid")]
    BadSignature,
    /// `exp` is past, by more than the leeway.
    #[error("the token has expired")]
    Expired,
    /// `nbf` is in the future, by more than the leeway.
    #[error("the token is not valid yet (nbf)")]
    NotYetValid,
    /// `iat` is in the future, by more than the leeway.
    #[error("the token was issued in the future (iat)")]
    IssuedInFuture,
    /// An issuer is configured and `iss` is missing or another.
    #[error("the token's issuer is missing or not the expected one")]
    WrongIssuer,
    /// An audience is configured and `aud` is missing or does not name it.
    #[error("the token's audience is missing or does not include this service")]
    WrongAudience,
    /// A maximum lifetime is required (operators' tokens) and the token has no `iat`, or lives
    /// longer (`exp − iat`).
    #[error("the token has no iat, or lives longer than allowed")]
    LivesTooLong,
    /// The user claim is missing or not a user id (SPEC §3): the one refusal whose 401 says
    /// why, as it comes after the signature and the standard claims were checked.
    #[error("the token's user claim is not a user id: {0}")]
    BadSubject(SubjectError),
}

/// A secret that must not be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum SecretError {
    /// The published development secret, outside development mode.
    #[error(
        "{JWT_SECRET_SETTING} is the development default; set a real secret, or \
         APP_ENV=development on a developer machine"
    )]
    DevelopmentSecret,
    /// Shorter than [`MIN_SECRET_BYTES`].
    #[error("{JWT_SECRET_SETTING} must be at least {MIN_SECRET_BYTES} bytes")]
    TooShort,
}
