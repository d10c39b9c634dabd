//! The operator token (SPEC §8): an HS256 token signed with its own secret
//! (`OPERATOR_JWT_SECRET`), never the customers', and carrying `role: "operator"`; its `sub`
//! names the operator in the audit trail. A customer's token fails the signature check (the
//! secrets must differ: start-up refuses equal ones), and a token of the operator secret without
//! the role is refused too, so no customer token can ever open the console.
//!
//! Answers: no token, a forged, malformed or expired one, 401; a genuine token without the
//! operator role, 403. A production backend without `OPERATOR_JWT_SECRET` has no operator:
//! every token is refused (401, saying so), so the console is closed unless it is configured.

use serde::Deserialize;
use shared::auth::{AuthError, MIN_SECRET_BYTES, bearer_token, verify_signature};

/// The setting (and `…_FILE`) that holds the operator tokens' secret.
pub const OPERATOR_SECRET_SETTING: &str = "OPERATOR_JWT_SECRET";

/// The published development default, refused outside development mode.
pub const DEVELOPMENT_OPERATOR_SECRET: &str =
    "development-only-operator-secret-never-use-in-production";

/// The claim value that makes a token an operator's.
const OPERATOR_ROLE: &str = "operator";

/// The longest operator name kept in the trail.
const MAX_NAME_LENGTH: usize = 64;

/// Refuses an operator secret that would let tokens be forged or confused with customers':
/// the development default outside development, a short one, or the customers' own secret.
pub fn check_operator_secret(
    secret: &[u8],
    customer_secret: &[u8],
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
    if secret == customer_secret {
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
    /// 401: no token, or not a genuine, current one.
    Unauthenticated(AuthError),
    /// 403: a genuine token, but not an operator's.
    NotOperator,
    /// 401: no operator secret is configured, so no token can be an operator's.
    NotConfigured,
}

#[derive(Deserialize)]
struct OperatorClaims {
    sub: String,
    exp: i64,
    #[serde(default)]
    nbf: Option<i64>,
    #[serde(default)]
    role: Option<String>,
}

/// Checks operator tokens.
pub struct OperatorTokens {
    secret: Option<Vec<u8>>,
    leeway_seconds: i64,
}

impl OperatorTokens {
    /// Tokens signed with `secret` (none: every token is refused), with `leeway_seconds` of
    /// clock leeway.
    pub fn new(secret: Option<Vec<u8>>, leeway_seconds: u64) -> OperatorTokens {
        OperatorTokens {
            secret,
            leeway_seconds: i64::try_from(leeway_seconds).unwrap_or(i64::MAX),
        }
    }

    /// The operator an `Authorization` header names, at `now_unix`.
    pub fn verify(&self, header: Option<&[u8]>, now_unix: i64) -> Result<Operator, Refusal> {
        let secret = self.secret.as_deref().ok_or(Refusal::NotConfigured)?;
        let token = bearer_token(header).map_err(Refusal::Unauthenticated)?;
        let claims: OperatorClaims =
            verify_signature(secret, token).map_err(Refusal::Unauthenticated)?;
        if claims.exp.saturating_add(self.leeway_seconds) < now_unix {
            return Err(Refusal::Unauthenticated(AuthError::Expired));
        }
        if claims
            .nbf
            .is_some_and(|nbf| nbf.saturating_sub(self.leeway_seconds) > now_unix)
        {
            return Err(Refusal::Unauthenticated(AuthError::NotYetValid));
        }
        let name_fits = !claims.sub.is_empty()
            && claims.sub.len() <= MAX_NAME_LENGTH
            && claims.sub.bytes().all(|b| b.is_ascii_graphic());
        if !name_fits {
            return Err(Refusal::Unauthenticated(AuthError::BadSubject));
        }
        if claims.role.as_deref() != Some(OPERATOR_ROLE) {
            return Err(Refusal::NotOperator);
        }
        Ok(Operator { name: claims.sub })
    }
}

/// Not derived: the secret must never reach a log.
impl std::fmt::Debug for OperatorTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OperatorTokens").finish_non_exhaustive()
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

    #[test]
    fn only_a_current_operator_token_of_the_operator_secret_passes() {
        let tokens = OperatorTokens::new(Some(SECRET.to_vec()), 30);
        let good = json!({"sub": "asha", "role": "operator", "exp": NOW + 60});
        assert_eq!(
            tokens.verify(Some(&header(good.clone(), SECRET)), NOW),
            Ok(Operator {
                name: "asha".into()
            })
        );
        let forged = header(good, b"the-customers-secret-or-a-guess-0000");
        assert_eq!(
            tokens.verify(Some(&forged), NOW),
            Err(Refusal::Unauthenticated(AuthError::BadSignature))
        );
        let expired = json!({"sub": "asha", "role": "operator", "exp": NOW - 31});
        assert_eq!(
            tokens.verify(Some(&header(expired, SECRET)), NOW),
            Err(Refusal::Unauthenticated(AuthError::Expired))
        );
        let customer_shaped = json!({"sub": "42", "exp": NOW + 60});
        assert_eq!(
            tokens.verify(Some(&header(customer_shaped, SECRET)), NOW),
            Err(Refusal::NotOperator)
        );
        let odd_name = json!({"sub": "a\nb", "role": "operator", "exp": NOW + 60});
        assert_eq!(
            tokens.verify(Some(&header(odd_name, SECRET)), NOW),
            Err(Refusal::Unauthenticated(AuthError::BadSubject))
        );
        assert_eq!(
            tokens.verify(None, NOW),
            Err(Refusal::Unauthenticated(AuthError::Missing))
        );
    }

    #[test]
    fn without_a_secret_no_token_is_an_operators() {
        let tokens = OperatorTokens::new(None, 30);
        let good = json!({"sub": "asha", "role": "operator", "exp": NOW + 60});
        assert_eq!(
            tokens.verify(Some(&header(good, SECRET)), NOW),
            Err(Refusal::NotConfigured)
        );
    }

    #[test]
    fn the_secret_must_be_real_long_and_not_the_customers() {
        let customer = b"the-customers-secret-is-long-enough";
        assert!(check_operator_secret(SECRET, customer, false).is_ok());
        assert!(check_operator_secret(customer, customer, true).is_err());
        assert!(check_operator_secret(b"short", customer, true).is_err());
        let development = DEVELOPMENT_OPERATOR_SECRET.as_bytes();
        assert!(check_operator_secret(development, customer, false).is_err());
        assert!(check_operator_secret(development, customer, true).is_ok());
    }
}
