//! Bearer tokens (SPEC §7): JWTs whose user claim (`sub` by default) names the user and whose
//! `exp` bounds them, checked by the edge and the backend with these same rules; the backend
//! never trusts an identity the edge merely asserts.
//!
//! Two ways to sign them:
//! - **An identity provider's keys** (production): RS256 or ES256, each token naming its key by
//!   `kid` in a JWKS the provider publishes ([`jwks`]). The key decides the algorithm: a token
//!   is verified only with the algorithm its key was published for, so `alg: none`, an HS256
//!   token "signed" with a public key, and an RS256 token for an EC key are all refused before
//!   any signature is looked at. The keys are cached and refetched by [`key_cache`]'s rules.
//!   The signature itself is checked by the platform (WebCrypto at the edge, `ring` at the
//!   backend): no RSA or ECDSA code is here.
//! - **One shared secret**, HS256 ([`hs256`]): development, and deployments that choose it.
//!
//! Either way a token is first split and its header read ([`CompactToken`]), its signature
//! checked, and only then its claims read ([`VerifiedToken`]) and held to the rules of RFC 7519
//! this system relies on ([`TokenRules`]):
//! - the user claim is the canonical decimal of a positive integer (`"42"`, never `"042"`,
//!   `"+42"`, `" 42"` or `"4.2e1"`): one user has one spelling;
//! - `exp` is required and not past; `nbf` and `iat`, when present, are not in the future; each
//!   comparison allows the configured leeway;
//! - `iss` and `aud` are required and checked when the deployment configures them.
//!
//! Every refusal is the same 401 to the client (`Problem::from(&AuthError)`, one fixed detail);
//! which rule failed is an [`AuthError`] variant, for the log only.

mod claims;
mod compact;
mod error;
pub mod hs256;
pub mod jwks;
pub mod key_cache;
mod rules;
mod user;

pub use claims::{Audience, ClaimSet, Claims};
pub use compact::{CompactToken, MAX_TOKEN_LEN, TokenHeader, VerifiedToken, bearer_token};
pub use error::{AuthError, SecretError};
pub use hs256::{
    DEVELOPMENT_JWT_SECRET, JWT_SECRET_SETTING, MIN_SECRET_BYTES, TokenVerifier, check_secret,
    sign_claims, sign_token, verify_signature,
};
pub use rules::{
    DEFAULT_LEEWAY_SECONDS, DEFAULT_USER_CLAIM, JWT_AUDIENCE_SETTING, JWT_ISSUER_SETTING,
    JWT_LEEWAY_SETTING, MAX_LEEWAY_SECONDS, TokenRules, TokenRulesError, USER_CLAIM_SETTING,
};
pub use user::{SubjectError, UserId};
