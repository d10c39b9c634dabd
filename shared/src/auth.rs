//! Bearer tokens (SPEC §7): HS256 JWTs whose `sub` is the user id and whose `exp` bounds them.
//!
//! Both the edge and the backend verify every token with the same [`TokenVerifier`]; the backend
//! never trusts an identity the edge merely asserts. Only HS256 is implemented, on purpose: the
//! header's `alg` must say `HS256` (so `none` and algorithm-confusion tokens are refused), and the
//! signature is checked in constant time by `hmac`. Once the signature holds, the claims must
//! pass every rule of RFC 7519 this system relies on ([`TokenRules`]):
//!
//! - `sub` is the canonical decimal of a positive integer (`"42"`, never `"042"`, `"+42"`,
//!   `" 42"` or `"4.2e1"`): one user has one spelling, so two spellings can never be two users;
//! - `exp` is required and not past; `nbf` and `iat`, when present, are not in the future; each
//!   comparison allows the configured leeway for clocks that disagree a little;
//! - `iss` and `aud` are required and checked when the deployment configures them (`aud` may be
//!   one string or an array of strings).
//!
//! Every refusal is the same 401 to the client (`Problem::from(&AuthError)`, one fixed detail);
//! which rule failed is an [`AuthError`] variant, for the log only.
//!
//! The secret itself is checked once at start-up by [`check_secret`]: at least
//! [`MIN_SECRET_BYTES`], and never the published [`DEVELOPMENT_JWT_SECRET`] outside development.
//! Written on `hmac` + `sha2` rather than a general JWT crate to keep RSA and ECDSA code out of
//! the Wasm module.

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

/// The setting (environment variable at the backend, secret at the edge) holding the secret.
pub const JWT_SECRET_SETTING: &str = "AUTH_JWT_SECRET";

/// The setting of the clock leeway, in whole seconds.
pub const JWT_LEEWAY_SETTING: &str = "AUTH_JWT_LEEWAY_SECONDS";

/// The setting of the expected `iss`; unset or blank: not checked.
pub const JWT_ISSUER_SETTING: &str = "AUTH_JWT_ISSUER";

/// The setting of the expected `aud`; unset or blank: not checked.
pub const JWT_AUDIENCE_SETTING: &str = "AUTH_JWT_AUDIENCE";

/// The development secret, published in this repository: clearly not a secret. Edge and backend
/// refuse it unless they run in development mode (`APP_ENV=development`).
pub const DEVELOPMENT_JWT_SECRET: &str = "development-only-jwt-secret-never-use-in-production";

/// The shortest secret accepted: 256 bits, the size of the HMAC-SHA-256 output.
pub const MIN_SECRET_BYTES: usize = 32;

/// The clock leeway when none is configured: enough for servers and identity provider whose
/// clocks are kept by NTP, far too short to make an expired token useful.
pub const DEFAULT_LEEWAY_SECONDS: u64 = 30;

/// The largest leeway accepted: beyond it `exp` would stop meaning much.
pub const MAX_LEEWAY_SECONDS: u64 = 300;

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

    /// The user id a token's `sub` names, if it is the canonical decimal of a valid id: ASCII
    /// digits only, no sign, no leading zero, no white space, no exponent.
    pub fn from_subject(sub: &str) -> Option<UserId> {
        let canonical = sub.bytes().all(|byte| byte.is_ascii_digit()) && !sub.starts_with('0');
        if !canonical {
            return None;
        }
        sub.parse::<u64>().ok().and_then(UserId::new)
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
    /// The token is not three base64url parts with JSON header and claims of the right types.
    #[error("the token is malformed")]
    Malformed,
    /// The header names another algorithm than HS256.
    #[error("the token's algorithm is not HS256")]
    WrongAlgorithm,
    /// The signature does not match the secret.
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
    /// `sub` is not the canonical decimal of a positive integer.
    #[error("the token's subject is not a canonical positive integer user id")]
    BadSubject,
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

/// Refuses a secret that would make tokens forgeable: the published development secret
/// (unless `development_mode`), or one shorter than [`MIN_SECRET_BYTES`].
pub fn check_secret(secret: &[u8], development_mode: bool) -> Result<(), SecretError> {
    if secret == DEVELOPMENT_JWT_SECRET.as_bytes() && !development_mode {
        return Err(SecretError::DevelopmentSecret);
    }
    if secret.len() < MIN_SECRET_BYTES {
        return Err(SecretError::TooShort);
    }
    Ok(())
}

/// What a token must carry besides a valid signature, beyond the fixed rules (`sub`, `exp`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRules {
    /// How far `exp`, `nbf` and `iat` may be off the verifier's clock, in seconds.
    leeway_seconds: u64,
    /// The required `iss`, when configured.
    issuer: Option<String>,
    /// The audience `aud` must name, when configured.
    audience: Option<String>,
}

/// A token rule setting that cannot be used. The message names the setting.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TokenRulesError {
    /// The leeway is above [`MAX_LEEWAY_SECONDS`].
    #[error("{JWT_LEEWAY_SETTING} must be at most {MAX_LEEWAY_SECONDS} seconds, not {0}")]
    LeewayTooLong(u64),
}

impl Default for TokenRules {
    /// [`DEFAULT_LEEWAY_SECONDS`], no issuer or audience required.
    fn default() -> Self {
        TokenRules {
            leeway_seconds: DEFAULT_LEEWAY_SECONDS,
            issuer: None,
            audience: None,
        }
    }
}

impl TokenRules {
    /// Rules from the settings; a blank issuer or audience is not configured.
    pub fn new(
        leeway_seconds: u64,
        issuer: Option<String>,
        audience: Option<String>,
    ) -> Result<TokenRules, TokenRulesError> {
        if leeway_seconds > MAX_LEEWAY_SECONDS {
            return Err(TokenRulesError::LeewayTooLong(leeway_seconds));
        }
        let configured = |value: Option<String>| {
            value
                .map(|text| text.trim().to_owned())
                .filter(|text| !text.is_empty())
        };
        Ok(TokenRules {
            leeway_seconds,
            issuer: configured(issuer),
            audience: configured(audience),
        })
    }

    /// The leeway, in seconds.
    pub fn leeway_seconds(&self) -> u64 {
        self.leeway_seconds
    }

    /// The required issuer, if any.
    pub fn issuer(&self) -> Option<&str> {
        self.issuer.as_deref()
    }

    /// The required audience, if any.
    pub fn audience(&self) -> Option<&str> {
        self.audience.as_deref()
    }

    /// Claims for `user` until `exp_unix` that these rules accept: with `iss` and `aud` when
    /// they are required (`backend dev-token`, tests).
    pub fn claims_for(&self, user: UserId, exp_unix: i64) -> Claims {
        Claims {
            iss: self.issuer.clone(),
            aud: self.audience.clone().map(Audience::One),
            ..Claims::new(user, exp_unix)
        }
    }

    /// Checks the claims of a correctly signed token at `now_unix`.
    fn check(&self, claims: &Claims, now_unix: i64) -> Result<UserId, AuthError> {
        let leeway = i64::try_from(self.leeway_seconds).unwrap_or(i64::MAX);
        let user = UserId::from_subject(&claims.sub).ok_or(AuthError::BadSubject)?;
        if claims.exp.saturating_add(leeway) <= now_unix {
            return Err(AuthError::Expired);
        }
        if claims
            .nbf
            .is_some_and(|nbf| nbf.saturating_sub(leeway) > now_unix)
        {
            return Err(AuthError::NotYetValid);
        }
        if claims
            .iat
            .is_some_and(|iat| iat.saturating_sub(leeway) > now_unix)
        {
            return Err(AuthError::IssuedInFuture);
        }
        if let Some(issuer) = &self.issuer
            && claims.iss.as_ref() != Some(issuer)
        {
            return Err(AuthError::WrongIssuer);
        }
        if let Some(audience) = &self.audience
            && !claims.aud.as_ref().is_some_and(|aud| aud.names(audience))
        {
            return Err(AuthError::WrongAudience);
        }
        Ok(user)
    }
}

/// The claims this system reads, and writes in the tokens it signs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// The user id, as the canonical decimal string.
    pub sub: String,
    /// Expiry, Unix seconds; required.
    pub exp: i64,
    /// Not valid before, Unix seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<i64>,
    /// Issued at, Unix seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iat: Option<i64>,
    /// The issuer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iss: Option<String>,
    /// The audience.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aud: Option<Audience>,
}

impl Claims {
    /// `sub` and `exp` only.
    pub fn new(user: UserId, exp_unix: i64) -> Claims {
        Claims {
            sub: user.to_string(),
            exp: exp_unix,
            nbf: None,
            iat: None,
            iss: None,
            aud: None,
        }
    }
}

/// `aud`: one string or an array of strings (RFC 7519 §4.1.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Audience {
    /// One audience.
    One(String),
    /// Several audiences.
    Many(Vec<String>),
}

/// Read by hand rather than derived as `untagged`: serde's untagged reading buffers the value
/// in a generic form first, code the Worker's Wasm module would carry for this one field.
impl<'de> Deserialize<'de> for Audience {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct AudienceVisitor;

        impl<'de> serde::de::Visitor<'de> for AudienceVisitor {
            type Value = Audience;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or an array of strings")
            }

            fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<Audience, E> {
                Ok(Audience::One(value.to_owned()))
            }

            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut items: A,
            ) -> Result<Audience, A::Error> {
                let mut many = Vec::new();
                while let Some(item) = items.next_element::<String>()? {
                    many.push(item);
                }
                Ok(Audience::Many(many))
            }
        }

        deserializer.deserialize_any(AudienceVisitor)
    }
}

impl Audience {
    /// Whether `audience` is among these.
    fn names(&self, audience: &str) -> bool {
        match self {
            Audience::One(one) => one == audience,
            Audience::Many(many) => many.iter().any(|one| one == audience),
        }
    }
}

#[derive(Serialize, Deserialize)]
struct Header {
    alg: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    typ: Option<String>,
}

/// Verifies bearer tokens with one secret under one set of [`TokenRules`].
#[derive(Clone, PartialEq, Eq)]
pub struct TokenVerifier {
    secret: Vec<u8>,
    rules: TokenRules,
}

impl TokenVerifier {
    /// A verifier for tokens signed with `secret` (checked at start-up by [`check_secret`]).
    pub fn new(secret: impl Into<Vec<u8>>, rules: TokenRules) -> TokenVerifier {
        TokenVerifier {
            secret: secret.into(),
            rules,
        }
    }

    /// The rules tokens are held to.
    pub fn rules(&self) -> &TokenRules {
        &self.rules
    }

    /// Verifies an `Authorization` header value and returns the user it names.
    pub fn verify_authorization(
        &self,
        header: Option<&[u8]>,
        now_unix: i64,
    ) -> Result<UserId, AuthError> {
        self.verify_token(bearer_token(header)?, now_unix)
    }

    /// Verifies an HS256 token and returns the user in its `sub`.
    pub fn verify_token(&self, token: &[u8], now_unix: i64) -> Result<UserId, AuthError> {
        let claims: Claims = verify_signature(&self.secret, token)?;
        self.rules.check(&claims, now_unix)
    }
}

/// The token of an `Authorization: Bearer <token>` header value.
pub fn bearer_token(header: Option<&[u8]>) -> Result<&[u8], AuthError> {
    let header = header.ok_or(AuthError::Missing)?;
    let token = header
        .strip_prefix(b"Bearer ")
        .or_else(|| header.strip_prefix(b"bearer "))
        .ok_or(AuthError::NotBearer)?;
    Ok(token.trim_ascii())
}

/// Checks an HS256 token's signature with `secret` and only then reads its claims as `C`
/// (the claims' own rules, such as `exp`, are the caller's to check).
pub fn verify_signature<C: serde::de::DeserializeOwned>(
    secret: &[u8],
    token: &[u8],
) -> Result<C, AuthError> {
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
    decode_json(claims)
}

/// Not derived: the secret must never reach a log.
impl fmt::Debug for TokenVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenVerifier")
            .field("rules", &self.rules)
            .finish_non_exhaustive()
    }
}

/// Signs an HS256 token for `user`, expiring at `exp_unix`, with no other claims. For
/// development tokens and tests; production tokens come from the identity provider.
pub fn sign_token(user: UserId, exp_unix: i64, secret: &[u8]) -> String {
    sign_claims(&Claims::new(user, exp_unix), secret)
}

/// Signs any claims as an HS256 token: [`Claims`], or a JSON value a test wants to see
/// refused.
pub fn sign_claims(claims: &impl Serialize, secret: &[u8]) -> String {
    let header = Header {
        alg: "HS256".to_owned(),
        typ: Some("JWT".to_owned()),
    };
    let signing_input = format!("{}.{}", encode_part(&header), encode_part(claims));
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

    use serde_json::json;

    use super::*;

    const SECRET: &[u8] = b"test-secret-of-at-least-thirty-two-bytes";
    const NOW: i64 = 1_800_000_000;

    #[test]
    fn a_verifier_never_prints_its_secret() {
        let verifier = TokenVerifier::new(SECRET, TokenRules::default());
        let printed = format!("{verifier:?}");
        assert!(!printed.contains("test-secret"), "{printed}");
    }

    fn user(id: u64) -> UserId {
        UserId::new(id).expect("positive")
    }

    fn verifier() -> TokenVerifier {
        TokenVerifier::new(SECRET, TokenRules::default())
    }

    fn verifier_with(issuer: Option<&str>, audience: Option<&str>) -> TokenVerifier {
        let rules = TokenRules::new(
            DEFAULT_LEEWAY_SECONDS,
            issuer.map(str::to_owned),
            audience.map(str::to_owned),
        )
        .expect("valid rules");
        TokenVerifier::new(SECRET, rules)
    }

    /// Verifies a token carrying exactly `claims` (any JSON), signed with the right secret.
    fn verify_claims(
        verifier: &TokenVerifier,
        claims: serde_json::Value,
    ) -> Result<UserId, AuthError> {
        verifier.verify_token(sign_claims(&claims, SECRET).as_bytes(), NOW)
    }

    #[test]
    fn signed_token_verifies_to_its_user() {
        let token = sign_token(user(42), NOW + 60, SECRET);
        assert_eq!(verifier().verify_token(token.as_bytes(), NOW), Ok(user(42)));
        let header = format!("Bearer {token}");
        assert_eq!(
            verifier().verify_authorization(Some(header.as_bytes()), NOW),
            Ok(user(42))
        );
    }

    #[test]
    fn missing_and_non_bearer_headers_are_refused() {
        assert_eq!(
            verifier().verify_authorization(None, NOW),
            Err(AuthError::Missing)
        );
        assert_eq!(
            verifier().verify_authorization(Some(b"Basic YTpi"), NOW),
            Err(AuthError::NotBearer)
        );
    }

    #[test]
    fn a_token_expired_by_more_than_the_leeway_is_refused() {
        let leeway = i64::try_from(DEFAULT_LEEWAY_SECONDS).expect("small");
        let just_inside = sign_token(user(1), NOW - leeway + 1, SECRET);
        assert_eq!(
            verifier().verify_token(just_inside.as_bytes(), NOW),
            Ok(user(1))
        );
        let just_outside = sign_token(user(1), NOW - leeway, SECRET);
        assert_eq!(
            verifier().verify_token(just_outside.as_bytes(), NOW),
            Err(AuthError::Expired)
        );
        let strict = TokenVerifier::new(SECRET, TokenRules::new(0, None, None).expect("valid"));
        assert_eq!(
            strict.verify_token(sign_token(user(1), NOW, SECRET).as_bytes(), NOW),
            Err(AuthError::Expired)
        );
        assert_eq!(
            verify_claims(&verifier(), json!({"sub": "1", "exp": i64::MIN})),
            Err(AuthError::Expired)
        );
    }

    #[test]
    fn a_token_not_valid_yet_is_refused_beyond_the_leeway() {
        let exp = NOW + 600;
        assert_eq!(
            verify_claims(
                &verifier(),
                json!({"sub": "1", "exp": exp, "nbf": NOW + 30})
            ),
            Ok(user(1))
        );
        assert_eq!(
            verify_claims(
                &verifier(),
                json!({"sub": "1", "exp": exp, "nbf": NOW + 31})
            ),
            Err(AuthError::NotYetValid)
        );
        assert_eq!(
            verify_claims(
                &verifier(),
                json!({"sub": "1", "exp": exp, "nbf": NOW - 3600})
            ),
            Ok(user(1))
        );
    }

    #[test]
    fn a_token_issued_in_the_future_is_refused_beyond_the_leeway() {
        let exp = NOW + 600;
        assert_eq!(
            verify_claims(
                &verifier(),
                json!({"sub": "1", "exp": exp, "iat": NOW + 30})
            ),
            Ok(user(1))
        );
        assert_eq!(
            verify_claims(
                &verifier(),
                json!({"sub": "1", "exp": exp, "iat": NOW + 31})
            ),
            Err(AuthError::IssuedInFuture)
        );
        assert_eq!(
            verify_claims(
                &verifier(),
                json!({"sub": "1", "exp": exp, "iat": i64::MAX})
            ),
            Err(AuthError::IssuedInFuture)
        );
    }

    #[test]
    fn the_leeway_is_configurable_up_to_its_maximum() {
        let wide = TokenRules::new(120, None, None).expect("valid");
        assert_eq!(wide.leeway_seconds(), 120);
        let verifier = TokenVerifier::new(SECRET, wide);
        assert_eq!(
            verify_claims(
                &verifier,
                json!({"sub": "1", "exp": NOW - 119, "nbf": NOW + 120})
            ),
            Ok(user(1))
        );
        assert_eq!(
            TokenRules::new(MAX_LEEWAY_SECONDS + 1, None, None),
            Err(TokenRulesError::LeewayTooLong(MAX_LEEWAY_SECONDS + 1))
        );
        let message = TokenRulesError::LeewayTooLong(301).to_string();
        assert!(message.contains(JWT_LEEWAY_SETTING), "{message}");
    }

    #[test]
    fn a_configured_issuer_is_required_and_must_match() {
        let verifier = verifier_with(Some("https://id.example"), None);
        let exp = NOW + 60;
        assert_eq!(
            verify_claims(
                &verifier,
                json!({"sub": "1", "exp": exp, "iss": "https://id.example"})
            ),
            Ok(user(1))
        );
        for claims in [
            json!({"sub": "1", "exp": exp}),
            json!({"sub": "1", "exp": exp, "iss": "https://evil.example"}),
            json!({"sub": "1", "exp": exp, "iss": "https://id.example/"}),
        ] {
            assert_eq!(
                verify_claims(&verifier, claims.clone()),
                Err(AuthError::WrongIssuer),
                "{claims}"
            );
        }
        // Without a configured issuer, any iss (or none) is accepted.
        assert_eq!(
            verify_claims(
                &verifier_with(None, None),
                json!({"sub": "1", "exp": exp, "iss": "x"})
            ),
            Ok(user(1))
        );
    }

    #[test]
    fn a_configured_audience_is_required_as_a_string_or_in_an_array() {
        let verifier = verifier_with(None, Some("payments"));
        let exp = NOW + 60;
        for aud in [
            json!("payments"),
            json!(["crm", "payments"]),
            json!(["payments"]),
        ] {
            assert_eq!(
                verify_claims(&verifier, json!({"sub": "1", "exp": exp, "aud": aud})),
                Ok(user(1)),
                "{aud}"
            );
        }
        for aud in [json!("crm"), json!(["crm"]), json!([]), json!("PAYMENTS")] {
            assert_eq!(
                verify_claims(&verifier, json!({"sub": "1", "exp": exp, "aud": aud})),
                Err(AuthError::WrongAudience),
                "{aud}"
            );
        }
        assert_eq!(
            verify_claims(&verifier, json!({"sub": "1", "exp": exp})),
            Err(AuthError::WrongAudience)
        );
        // An aud of another type is not a JWT this system reads.
        assert_eq!(
            verify_claims(&verifier, json!({"sub": "1", "exp": exp, "aud": 7})),
            Err(AuthError::Malformed)
        );
    }

    #[test]
    fn blank_issuer_and_audience_settings_are_not_configured() {
        let rules = TokenRules::new(30, Some("  ".to_owned()), Some(String::new())).expect("valid");
        assert_eq!(rules, TokenRules::default());
        let rules = TokenRules::new(30, Some(" id ".to_owned()), None).expect("valid");
        assert_eq!(rules.issuer(), Some("id"));
    }

    #[test]
    fn claims_for_a_user_carry_what_the_rules_require() {
        let verifier = verifier_with(Some("https://id.example"), Some("payments"));
        let claims = verifier.rules().claims_for(user(7), NOW + 60);
        assert_eq!(claims.iss.as_deref(), Some("https://id.example"));
        assert_eq!(claims.aud, Some(Audience::One("payments".to_owned())));
        let token = sign_claims(&claims, SECRET);
        assert_eq!(verifier.verify_token(token.as_bytes(), NOW), Ok(user(7)));
        assert_eq!(
            TokenRules::default().claims_for(user(7), NOW + 60),
            Claims::new(user(7), NOW + 60)
        );
    }

    #[test]
    fn token_signed_with_another_secret_is_refused() {
        let token = sign_token(user(1), NOW + 60, b"another-secret-of-at-least-32-bytes!!");
        assert_eq!(
            verifier().verify_token(token.as_bytes(), NOW),
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
            verifier().verify_token(forged.as_bytes(), NOW),
            Err(AuthError::BadSignature)
        );
    }

    #[test]
    fn alg_none_is_refused() {
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#);
        let claims = URL_SAFE_NO_PAD.encode(br#"{"sub":"1","exp":1900000000}"#);
        let token = format!("{header}.{claims}.");
        assert_eq!(
            verifier().verify_token(token.as_bytes(), NOW),
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
                verifier().verify_token(token, NOW),
                Err(AuthError::Malformed),
                "{token:?}"
            );
        }
        for claims in [
            json!({"sub": 42, "exp": NOW + 60}),
            json!({"sub": "42"}),
            json!({"sub": "42", "exp": "soon"}),
            json!({"sub": "42", "exp": NOW + 60, "nbf": 1.5}),
            json!(["42"]),
        ] {
            assert_eq!(
                verify_claims(&verifier(), claims.clone()),
                Err(AuthError::Malformed),
                "{claims}"
            );
        }
    }

    #[test]
    fn only_the_canonical_decimal_of_a_positive_user_id_is_a_subject() {
        for sub in [
            "asha",
            "0",
            "-3",
            "042",
            "+42",
            " 42",
            "42 ",
            "4.2e1",
            "42.0",
            "0x2a",
            "",
            "9223372036854775808",
            "18446744073709551616",
        ] {
            assert_eq!(
                verify_claims(&verifier(), json!({"sub": sub, "exp": NOW + 60})),
                Err(AuthError::BadSubject),
                "{sub:?}"
            );
        }
        for (sub, id) in [
            ("1", 1),
            ("42", 42),
            ("9223372036854775807", i64::MAX as u64),
        ] {
            assert_eq!(UserId::from_subject(sub), Some(user(id)), "{sub}");
        }
    }

    #[test]
    fn the_development_secret_is_refused_outside_development() {
        let development = DEVELOPMENT_JWT_SECRET.as_bytes();
        assert_eq!(
            check_secret(development, false),
            Err(SecretError::DevelopmentSecret)
        );
        assert_eq!(check_secret(development, true), Ok(()));
        assert_eq!(check_secret(SECRET, false), Ok(()));
        assert_eq!(check_secret(b"short", true), Err(SecretError::TooShort));
        let message = SecretError::DevelopmentSecret.to_string();
        assert!(message.contains(JWT_SECRET_SETTING), "{message}");
        assert!(message.contains("APP_ENV=development"), "{message}");
    }

    #[test]
    fn debug_output_never_shows_the_secret() {
        let shown = format!("{:?}", verifier());
        assert!(!shown.contains("test-secret"), "{shown}");
    }
}
