//! HS256 tokens: one shared secret signs and verifies (development, and deployments that choose
//! it explicitly; production normally uses an identity provider's keys, [`super::jwks`]).
//!
//! [`TokenVerifier`] verifies a bearer token with the secret under [`TokenRules`]: the header's
//! `alg` must say `HS256` (so `none` and any public-key algorithm are refused), and the
//! signature is checked in constant time by `hmac`. The secret itself is checked once at
//! start-up by [`check_secret`]: at least [`MIN_SECRET_BYTES`], and never the published
//! [`DEVELOPMENT_JWT_SECRET`] outside development.

use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde::Serialize;
use sha2::Sha256;

use super::compact::{CompactToken, bearer_token};
use super::error::{AuthError, SecretError};
use super::rules::TokenRules;
use super::user::UserId;
use super::{ClaimSet, Claims};

type HmacSha256 = Hmac<Sha256>;

/// The setting (environment variable at the backend, secret at the edge) holding the secret.
pub const JWT_SECRET_SETTING: &str = "AUTH_JWT_SECRET";

/// The development secret, published in this repository: clearly not a secret. Edge and backend
/// refuse it unless they run in development mode (`APP_ENV=development`).
pub const DEVELOPMENT_JWT_SECRET: &str = "development-only-jwt-secret-never-use-in-production";

/// The shortest secret accepted: 256 bits, the size of the HMAC-SHA-256 output.
pub const MIN_SECRET_BYTES: usize = 32;

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

    /// Verifies an HS256 token and returns the user its user claim names.
    pub fn verify_token(&self, token: &[u8], now_unix: i64) -> Result<UserId, AuthError> {
        let token = CompactToken::parse(token)?;
        let holds = signature_holds(&self.secret, &token)?;
        self.rules.user_of(&token.verified(holds)?, now_unix)
    }
}

/// Whether an HS256 token's signature holds under `secret`; any other algorithm is refused.
pub fn signature_holds(secret: &[u8], token: &CompactToken<'_>) -> Result<bool, AuthError> {
    if token.header().alg != "HS256" {
        return Err(AuthError::WrongAlgorithm);
    }
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(token.signing_input());
    Ok(mac.verify_slice(token.signature()).is_ok())
}

/// Checks an HS256 token's signature with `secret` and only then reads its claims (the claims'
/// own rules, such as `exp`, are the caller's to check).
pub fn verify_signature(secret: &[u8], token: &[u8]) -> Result<ClaimSet, AuthError> {
    let token = CompactToken::parse(token)?;
    let holds = signature_holds(secret, &token)?;
    Ok(token.verified(holds)?.claims().clone())
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
    let header = serde_json::json!({ "alg": "HS256", "typ": "JWT" });
    let signing_input = format!("{}.{}", encode_part(&header), encode_part(claims));
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(signing_input.as_bytes());
    let signature = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
    format!("{signing_input}.{signature}")
}

fn encode_part(value: &impl Serialize) -> String {
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(value).expect("token parts always serialise"))
}

#[cfg(test)]
mod tests {
    // Under wasm32 the same tests run through wasm-bindgen-test (see `.cargo/config.toml`).
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use serde_json::json;

    use super::*;
    use crate::auth::SubjectError;
    use crate::auth::{
        Audience, DEFAULT_LEEWAY_SECONDS, JWT_LEEWAY_SETTING, MAX_LEEWAY_SECONDS, TokenRulesError,
    };

    const SECRET: &[u8] = b"test-secret-of-at-least-thirty-two-bytes";
    const NOW: i64 = 1_800_000_000;

    #[test]
    fn a_verifier_never_prints_its_secret() {
        let verifier = TokenVerifier::new(SECRET, TokenRules::default());
        let printed = format!("{verifier:?}");
        assert!(!printed.contains("test-secret"), "{printed}");
    }

    fn user(id: u64) -> UserId {
        UserId::numbered(id)
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
    fn the_user_may_be_read_from_another_claim() {
        let rules = TokenRules::default().with_user_claim(Some("customer_id".to_owned()));
        let verifier = TokenVerifier::new(SECRET, rules);
        let exp = NOW + 60;
        assert_eq!(
            verify_claims(
                &verifier,
                json!({"sub": "auth0|5f7c", "customer_id": "42", "exp": exp})
            ),
            Ok(user(42))
        );
        assert_eq!(
            verify_claims(&verifier, json!({"sub": "42", "exp": exp})),
            Err(AuthError::BadSubject(SubjectError::Missing)),
            "sub is not read when another claim is configured"
        );
        assert_eq!(
            verify_claims(&verifier, json!({"customer_id": "", "exp": exp})),
            Err(AuthError::BadSubject(SubjectError::Empty))
        );
        let blank = TokenRules::default().with_user_claim(Some(" ".to_owned()));
        assert_eq!(blank.user_claim(), "sub");
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
    fn a_subject_is_a_user_as_written_or_refused_saying_why() {
        for (sub, why) in crate::auth::user::NOT_USER_IDS {
            assert_eq!(
                verify_claims(&verifier(), json!({"sub": sub, "exp": NOW + 60})),
                Err(AuthError::BadSubject(why)),
                "{sub:?}"
            );
        }
        assert_eq!(
            verify_claims(&verifier(), json!({"exp": NOW + 60})),
            Err(AuthError::BadSubject(SubjectError::Missing))
        );
        for sub in [
            "1",
            "042",
            "auth0|64b1f3a2c9e7",
            "8e03978e-40d5-43e8-bc93-6894a57f9324",
        ] {
            assert_eq!(
                verify_claims(&verifier(), json!({"sub": sub, "exp": NOW + 60})).ok(),
                UserId::from_subject(sub).ok(),
                "{sub}"
            );
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
