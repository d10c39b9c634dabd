//! [`TokenRules`]: what a verified token's claims must hold, the same at the edge and the
//! backend: the user claim (canonical decimal), `exp`, `nbf` and `iat` within a leeway, and the
//! issuer and audience when configured.

use thiserror::Error;

use super::claims::{Audience, ClaimSet, Claims};
use super::compact::VerifiedToken;
use super::error::AuthError;
use super::user::{SubjectError, UserId};

/// The setting of the clock leeway, in whole seconds.
pub const JWT_LEEWAY_SETTING: &str = "AUTH_JWT_LEEWAY_SECONDS";

/// The setting of the expected `iss`; unset or blank: not checked.
pub const JWT_ISSUER_SETTING: &str = "AUTH_JWT_ISSUER";

/// The setting of the expected `aud`; unset or blank: not checked.
pub const JWT_AUDIENCE_SETTING: &str = "AUTH_JWT_AUDIENCE";

/// The setting naming the claim that holds the user id.
pub const USER_CLAIM_SETTING: &str = "AUTH_USER_CLAIM";

/// The claim that holds the user id when none is configured.
pub const DEFAULT_USER_CLAIM: &str = "sub";

/// The clock leeway when none is configured: enough for servers and identity provider whose
/// clocks are kept by NTP, far too short to make an expired token useful.
pub const DEFAULT_LEEWAY_SECONDS: u64 = 30;

/// The largest leeway accepted: beyond it `exp` would stop meaning much.
pub const MAX_LEEWAY_SECONDS: u64 = 300;

/// What a token must carry besides a valid signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRules {
    /// How far `exp`, `nbf` and `iat` may be off the verifier's clock, in seconds.
    leeway_seconds: u64,
    /// The required `iss`, when configured.
    issuer: Option<String>,
    /// The audience `aud` must name, when configured.
    audience: Option<String>,
    /// The claim holding the user id.
    user_claim: String,
}

/// A token rule setting that cannot be used. The message names the setting.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TokenRulesError {
    /// The leeway is above [`MAX_LEEWAY_SECONDS`].
    #[error("{JWT_LEEWAY_SETTING} must be at most {MAX_LEEWAY_SECONDS} seconds, not {0}")]
    LeewayTooLong(u64),
}

impl Default for TokenRules {
    /// [`DEFAULT_LEEWAY_SECONDS`], the user in `sub`, no issuer or audience required.
    fn default() -> Self {
        TokenRules {
            leeway_seconds: DEFAULT_LEEWAY_SECONDS,
            issuer: None,
            audience: None,
            user_claim: DEFAULT_USER_CLAIM.to_owned(),
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
        Ok(TokenRules {
            leeway_seconds,
            issuer: configured(issuer),
            audience: configured(audience),
            ..TokenRules::default()
        })
    }

    /// These rules with the user id read from `claim` (`AUTH_USER_CLAIM`; blank: `sub`).
    pub fn with_user_claim(self, claim: Option<String>) -> TokenRules {
        TokenRules {
            user_claim: configured(claim).unwrap_or_else(|| DEFAULT_USER_CLAIM.to_owned()),
            ..self
        }
    }

    /// These rules with another issuer and audience (operators' tokens may be for another
    /// audience than customers'); `None` keeps the current one.
    pub fn for_issuer_and_audience(
        self,
        issuer: Option<String>,
        audience: Option<String>,
    ) -> TokenRules {
        TokenRules {
            issuer: configured(issuer).or(self.issuer),
            audience: configured(audience).or(self.audience),
            ..self
        }
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

    /// The claim holding the user id.
    pub fn user_claim(&self) -> &str {
        &self.user_claim
    }

    /// Claims for `user` until `exp_unix` that these rules accept (with `iss` and `aud` when
    /// they are required): `backend dev-token`, tests. Only for the `sub` user claim.
    pub fn claims_for(&self, user: UserId, exp_unix: i64) -> Claims {
        Claims {
            iss: self.issuer.clone(),
            aud: self.audience.clone().map(Audience::One),
            ..Claims::new(user, exp_unix)
        }
    }

    /// The user a verified token names, at `now_unix`, if its claims hold every rule.
    pub fn user_of(&self, token: &VerifiedToken, now_unix: i64) -> Result<UserId, AuthError> {
        let claims = token.claims();
        let subject = claims.string(&self.user_claim)?;
        self.check_standard(claims, now_unix)?;
        let subject = subject.ok_or(AuthError::BadSubject(SubjectError::Missing))?;
        UserId::from_subject(subject).map_err(AuthError::BadSubject)
    }

    /// The standard claims' rules: `exp` required and not past, `nbf` and `iat` not in the
    /// future (each within the leeway), `iss` and `aud` as configured.
    pub fn check_standard(&self, claims: &ClaimSet, now_unix: i64) -> Result<(), AuthError> {
        let leeway = i64::try_from(self.leeway_seconds).unwrap_or(i64::MAX);
        let exp = claims.seconds("exp")?.ok_or(AuthError::Malformed)?;
        let nbf = claims.seconds("nbf")?;
        let iat = claims.seconds("iat")?;
        let iss = claims.string("iss")?;
        let aud = claims.strings("aud")?;
        if exp.saturating_add(leeway) <= now_unix {
            return Err(AuthError::Expired);
        }
        if nbf.is_some_and(|nbf| nbf.saturating_sub(leeway) > now_unix) {
            return Err(AuthError::NotYetValid);
        }
        if iat.is_some_and(|iat| iat.saturating_sub(leeway) > now_unix) {
            return Err(AuthError::IssuedInFuture);
        }
        if let Some(issuer) = &self.issuer
            && iss != Some(issuer.as_str())
        {
            return Err(AuthError::WrongIssuer);
        }
        if let Some(audience) = &self.audience
            && !aud.contains(&audience.as_str())
        {
            return Err(AuthError::WrongAudience);
        }
        Ok(())
    }
}

fn configured(value: Option<String>) -> Option<String> {
    value
        .map(|text| text.trim().to_owned())
        .filter(|text| !text.is_empty())
}
