//! Who the phone is: a bearer token given as is, or a development token signed here from a user
//! id and the backend's secret (as `backend dev-token` does). Saved actions carry the user, so
//! the phone needs the user id behind a given token too; it reads it from the token's claims
//! without verifying them (only the server can).

use anyhow::{Context, bail};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use clap::Args;
use shared::UserId;
use shared::auth::sign_token;

/// How long a development token signed here is valid.
const DEV_TOKEN_HOURS: i64 = 24;

/// The identity flags.
#[derive(Debug, Args)]
pub struct Identity {
    /// A bearer token (HS256 JWT whose `sub` is the user id).
    #[arg(long, env = "PHONE_TOKEN", conflicts_with = "user")]
    token: Option<String>,
    /// Development: the user id to sign a token for (needs --secret).
    #[arg(long, requires = "secret")]
    user: Option<u64>,
    /// Development: the backend's AUTH_JWT_SECRET, to sign a token for --user.
    #[arg(long, env = "AUTH_JWT_SECRET", hide_env_values = true)]
    secret: Option<String>,
}

impl Identity {
    /// The user and the token to send.
    pub fn resolve(&self) -> anyhow::Result<(UserId, String)> {
        match (&self.token, self.user, &self.secret) {
            (Some(token), _, _) => Ok((user_in_token(token)?, token.clone())),
            (None, Some(user), Some(secret)) => {
                let user = UserId::new(user).context("--user must be a positive integer")?;
                let exp = time::OffsetDateTime::now_utc().unix_timestamp() + DEV_TOKEN_HOURS * 3600;
                Ok((user, sign_token(user, exp, secret.as_bytes())))
            }
            _ => bail!("give --token, or --user with --secret (development)"),
        }
    }
}

/// The `sub` claim of a JWT, unverified.
fn user_in_token(token: &str) -> anyhow::Result<UserId> {
    let claims = token
        .split('.')
        .nth(1)
        .context("the token is not a JWT (header.claims.signature)")?;
    let claims = URL_SAFE_NO_PAD
        .decode(claims)
        .context("the token's claims are not base64url")?;
    let claims: serde_json::Value =
        serde_json::from_slice(&claims).context("the token's claims are not JSON")?;
    claims["sub"]
        .as_str()
        .and_then(|sub| sub.parse().ok())
        .and_then(UserId::new)
        .context("the token's `sub` is not a positive integer user id")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_is_read_from_a_token_and_signed_into_a_dev_token() {
        let identity = Identity {
            token: None,
            user: Some(42),
            secret: Some("a-development-secret-of-32-bytes-or-more".to_owned()),
        };
        let (user, token) = identity.resolve().expect("signs");
        assert_eq!(user.get(), 42);
        assert_eq!(user_in_token(&token).expect("reads"), user);
        assert!(user_in_token("not-a-token").is_err());
    }
}
