//! Operators' tokens (SPEC §8): the console's, never the customers'. In production they come
//! from the identity provider, from the customers' JWKS or a second one (`OPERATOR_JWKS_URL`),
//! usually for an audience of their own (`OPERATOR_JWT_AUDIENCE`), and carry the operator role
//! in a claim (`OPERATOR_ROLE_CLAIM`, `roles` by default, holding `OPERATOR_ROLE`,
//! `payments-operator` by default, as a string or in an array: Auth0's and Keycloak's `roles`,
//! Cognito's `cognito:groups`, Entra ID's `roles`). A token may live at most
//! `OPERATOR_TOKEN_MAX_LIFETIME_SECONDS` (`exp − iat`; one without `iat` is refused), so a
//! leaked console token is short-lived. In development they may instead be HS256 tokens of
//! their own secret (`OPERATOR_JWT_SECRET`, `backend dev-operator-token`), which must differ
//! from the customers'. The token's `sub` names the operator in the audit trail.
//!
//! Replies: no token, a forged, malformed, expired or too long-lived one, or one for another
//! audience (a customer's), 401; a genuine operator-audience token without the role, 403. A
//! production backend with no operator keys and no secret has no operator: every token is
//! refused (401, saying so), so the console is closed unless it is configured.

use std::time::Duration;

use shared::auth::{AuthError, MIN_SECRET_BYTES, SubjectError, TokenRules, UserId, bearer_token};

use super::tokens::Signing;

/// The setting (and `…_FILE`) that holds the operator tokens' HS256 secret.
pub const OPERATOR_SECRET_SETTING: &str = "OPERATOR_JWT_SECRET";

/// The published development default, refused outside development mode.
pub const DEVELOPMENT_OPERATOR_SECRET: &str =
    "development-only-operator-secret-never-use-in-production";

/// The claim holding the role, unless configured.
pub const DEFAULT_ROLE_CLAIM: &str = "roles";

/// The role that opens the console, unless configured.
pub const DEFAULT_OPERATOR_ROLE: &str = "payments-operator";

/// The longest an operator's token may live, unless configured.
pub const DEFAULT_MAX_LIFETIME: Duration = Duration::from_secs(3600);

/// The longest operator name kept in the trail.
const MAX_NAME_LENGTH: usize = 128;

/// Refuses an operator secret that would let tokens be forged or confused with customers':
/// the development default outside development, a short one, or the customers' own secret.
pub fn check_operator_secret(
    secret: &[u8],
    customer_secret: Option<&[u8]>,
    development_mode: bool,
) -> anyhow::Result<()> {
    if secret == DEVELOPMENT_OPERATOR_SECRET.as_bytes() && !development_mode {
        anyhow::bail!(
            "{OPERATOR_SECRET_SETTING} is the development default; set a real secret, or \
             APP_ENV=development on a developer machine"
        );
    }
    if secret.len() < MIN_SECRET_BYTES {
        anyhow::bail!("{OPERATOR_SECRET_SETTING} must be at least {MIN_SECRET_BYTES} bytes");
    }
    if Some(secret) == customer_secret {
        anyhow::bail!(
            "{OPERATOR_SECRET_SETTING} must differ from AUTH_JWT_SECRET, or a customer's token \
             could be taken for an operator's"
        );
    }
    Ok(())
}

/// An operator, as their token names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operator {
    /// The token's `sub`.
    pub name: String,
}

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// 401: no token, or not a genuine, current operator-audience one.
    Unauthenticated(AuthError),
    /// 403: a genuine token, but without the operator role.
    NotOperator,
    /// 401: no operator keys or secret are configured, so no token can be an operator's.
    NotConfigured,
}

/// What an operator's token must carry besides a valid signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorRules {
    /// The standard claims' rules (issuer, audience, leeway).
    pub tokens: TokenRules,
    /// The claim holding the role.
    pub role_claim: String,
    /// The role that opens the console.
    pub role: String,
    /// The longest `exp − iat`.
    pub max_lifetime: Duration,
}

/// Checks operator tokens.
#[derive(Debug)]
pub struct OperatorTokens {
    signing: Option<Signing>,
    rules: OperatorRules,
}

impl OperatorTokens {
    /// Tokens signed as `signing` says (none: every token is refused), under `rules`.
    pub fn new(signing: Option<Signing>, rules: OperatorRules) -> OperatorTokens {
        OperatorTokens { signing, rules }
    }

    /// The operator an `Authorization` header names, at `now_unix`.
    pub async fn verify(&self, header: Option<&[u8]>, now_unix: i64) -> Result<Operator, Refusal> {
        let signing = self.signing.as_ref().ok_or(Refusal::NotConfigured)?;
        let unauthenticated = Refusal::Unauthenticated;
        let token = bearer_token(header).map_err(unauthenticated)?;
        let verified = signing.verify(token).await.map_err(unauthenticated)?;
        let claims = verified.claims();
        self.rules
            .tokens
            .check_standard(claims, now_unix)
            .map_err(unauthenticated)?;
        let lifetime = match (claims.seconds("iat"), claims.seconds("exp")) {
            (Ok(Some(iat)), Ok(Some(exp))) => exp.saturating_sub(iat),
            _ => return Err(unauthenticated(AuthError::LivesTooLong)),
        };
        let longest = i64::try_from(self.rules.max_lifetime.as_secs()).unwrap_or(i64::MAX);
        if lifetime > longest {
            return Err(unauthenticated(AuthError::LivesTooLong));
        }
        let name = claims.string("sub").map_err(unauthenticated)?;
        let name = name.ok_or(AuthError::BadSubject(SubjectError::Missing));
        let name = name
            .and_then(|name| UserId::from_subject(name).map_err(AuthError::BadSubject))
            .map_err(unauthenticated)?;
        if name.as_str().len() > MAX_NAME_LENGTH {
            return Err(unauthenticated(AuthError::BadSubject(
                SubjectError::TooLong,
            )));
        }
        let name = name.as_str();
        let roles = claims
            .strings(&self.rules.role_claim)
            .map_err(unauthenticated)?;
        if !roles.contains(&self.rules.role.as_str()) {
            return Err(Refusal::NotOperator);
        }
        Ok(Operator {
            name: name.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use shared::auth::sign_claims;

    use super::*;

    const SECRET: &[u8] = b"operator-secret-for-these-unit-tests";
    const NOW: i64 = 1_800_000_000;

    fn header(claims: serde_json::Value, secret: &[u8]) -> Vec<u8> {
        format!("Bearer {}", sign_claims(&claims, secret)).into_bytes()
    }

    fn rules() -> OperatorRules {
        OperatorRules {
            tokens: TokenRules::default(),
            role_claim: DEFAULT_ROLE_CLAIM.to_owned(),
            role: DEFAULT_OPERATOR_ROLE.to_owned(),
            max_lifetime: DEFAULT_MAX_LIFETIME,
        }
    }

    fn tokens() -> OperatorTokens {
        OperatorTokens::new(Some(Signing::Secret(SECRET.to_vec())), rules())
    }

    fn operator(extra: serde_json::Value) -> serde_json::Value {
        let mut claims = json!({
            "sub": "asha@ops", "roles": ["support", "payments-operator"],
            "iat": NOW - 60, "exp": NOW + 600,
        });
        for (name, value) in extra.as_object().expect("an object") {
            claims[name] = value.clone();
        }
        claims
    }

    #[tokio::test]
    async fn only_a_current_short_lived_token_with_the_role_passes() {
        let tokens = tokens();
        assert_eq!(
            tokens
                .verify(Some(&header(operator(json!({})), SECRET)), NOW)
                .await,
            Ok(Operator {
                name: "asha@ops".into()
            })
        );
        let as_string = operator(json!({"roles": "payments-operator"}));
        assert!(
            tokens
                .verify(Some(&header(as_string, SECRET)), NOW)
                .await
                .is_ok()
        );
        let forged = header(operator(json!({})), b"the-customers-secret-or-a-guess-0000");
        assert_eq!(
            tokens.verify(Some(&forged), NOW).await,
            Err(Refusal::Unauthenticated(AuthError::BadSignature))
        );
        for (claims, reason) in [
            (operator(json!({"exp": NOW - 31})), AuthError::Expired),
            (
                operator(json!({"iat": NOW - 3600, "exp": NOW + 1})),
                AuthError::LivesTooLong,
            ),
            (operator(json!({"iat": null})), AuthError::Malformed),
            (
                operator(json!({"sub": "a\nb"})),
                AuthError::BadSubject(SubjectError::BadCharacter),
            ),
        ] {
            assert_eq!(
                tokens
                    .verify(Some(&header(claims.clone(), SECRET)), NOW)
                    .await,
                Err(Refusal::Unauthenticated(reason)),
                "{claims}"
            );
        }
        let mut no_iat = operator(json!({}));
        no_iat.as_object_mut().map(|claims| claims.remove("iat"));
        assert_eq!(
            tokens.verify(Some(&header(no_iat, SECRET)), NOW).await,
            Err(Refusal::Unauthenticated(AuthError::LivesTooLong))
        );
        for roles in [json!(["support"]), json!([]), json!("operator")] {
            let claims = operator(json!({ "roles": roles }));
            assert_eq!(
                tokens.verify(Some(&header(claims, SECRET)), NOW).await,
                Err(Refusal::NotOperator),
                "{roles}"
            );
        }
        assert_eq!(
            tokens.verify(None, NOW).await,
            Err(Refusal::Unauthenticated(AuthError::Missing))
        );
    }

    #[tokio::test]
    async fn without_keys_or_a_secret_no_token_is_an_operators() {
        let tokens = OperatorTokens::new(None, rules());
        assert_eq!(
            tokens
                .verify(Some(&header(operator(json!({})), SECRET)), NOW)
                .await,
            Err(Refusal::NotConfigured)
        );
    }

    #[test]
    fn the_secret_must_be_real_long_and_not_the_customers() {
        let customer: &[u8] = b"the-customers-secret-is-long-enough";
        assert!(check_operator_secret(SECRET, Some(customer), false).is_ok());
        assert!(check_operator_secret(SECRET, None, false).is_ok());
        assert!(check_operator_secret(customer, Some(customer), true).is_err());
        assert!(check_operator_secret(b"short", Some(customer), true).is_err());
        let development = DEVELOPMENT_OPERATOR_SECRET.as_bytes();
        assert!(check_operator_secret(development, Some(customer), false).is_err());
        assert!(check_operator_secret(development, Some(customer), true).is_ok());
    }
}
