//! Who the phone is: a bearer token, or a development token signed here from a user id and the
//! backend's secret (as `backend dev-token` does). Neither secret is ever a flag (every user of
//! the machine sees a command line in the process list): the token comes from `PHONE_TOKEN` or
//! the file `PHONE_TOKEN_FILE` names, the secret from `AUTH_JWT_SECRET` or
//! `AUTH_JWT_SECRET_FILE`, read as the backend reads its own (`secret-settings`). Saved actions
//! carry the user, so the phone needs the user id behind a given token too; it reads it from the
//! token's claims without verifying them (only the server can).

use std::ffi::OsString;

use anyhow::{Context, bail};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use clap::Args;
use secret_settings::{ExposeSecret, read_secret};
use shared::UserId;
use shared::auth::sign_token;

/// How long a development token signed here is valid.
const DEV_TOKEN_HOURS: i64 = 24;

/// The setting holding a bearer token (or `PHONE_TOKEN_FILE`, a file holding it).
pub const TOKEN_SETTING: &str = "PHONE_TOKEN";
/// The setting holding the backend's development secret (or `AUTH_JWT_SECRET_FILE`).
pub const SECRET_SETTING: &str = "AUTH_JWT_SECRET";

/// The identity flag: only the user id; the secrets come from the environment.
#[derive(Debug, Args)]
pub struct Identity {
    /// Development: the user id to sign a token for, with the backend's secret from
    /// AUTH_JWT_SECRET (or AUTH_JWT_SECRET_FILE). Without it, the token is PHONE_TOKEN (or
    /// PHONE_TOKEN_FILE).
    #[arg(long)]
    user: Option<u64>,
}

impl Identity {
    /// The user and the token to send, the secrets read through `lookup` (the environment).
    pub fn resolve(
        &self,
        lookup: impl Fn(&str) -> Option<OsString>,
    ) -> anyhow::Result<(UserId, String)> {
        let token = read_secret(TOKEN_SETTING, &lookup)?;
        match (token, self.user) {
            (Some(_), Some(_)) => bail!("give --user (development) or {TOKEN_SETTING}, not both"),
            (Some(token), None) => {
                let token = token.expose_secret().to_owned();
                Ok((user_in_token(&token)?, token))
            }
            (None, Some(user)) => {
                let user = UserId::numbered(user);
                let secret = read_secret(SECRET_SETTING, &lookup)?.with_context(|| {
                    format!("--user needs the backend's development secret in {SECRET_SETTING}")
                })?;
                let exp = time::OffsetDateTime::now_utc().unix_timestamp() + DEV_TOKEN_HOURS * 3600;
                let token = sign_token(user.clone(), exp, secret.expose_secret().as_bytes());
                Ok((user, token))
            }
            (None, None) => bail!(
                "no identity: set {TOKEN_SETTING} (or {TOKEN_SETTING}_FILE), or give --user with \
                 {SECRET_SETTING} (development)"
            ),
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
    let subject = claims["sub"]
        .as_str()
        .context("the token has no string `sub`")?;
    UserId::from_subject(subject).context("the token's `sub` is not a user id")
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "a-development-secret-of-32-bytes-or-more";

    fn environment(pairs: &[(&'static str, String)]) -> impl Fn(&str) -> Option<OsString> {
        let pairs = pairs.to_vec();
        move |name| {
            pairs
                .iter()
                .find(|(set, _)| *set == name)
                .map(|(_, value)| OsString::from(value))
        }
    }

    #[test]
    fn the_user_is_read_from_a_token_and_signed_into_a_dev_token() {
        let with_user = Identity { user: Some(42) };
        let (user, token) = with_user
            .resolve(environment(&[(SECRET_SETTING, SECRET.to_owned())]))
            .expect("signs");
        assert_eq!(user.as_str(), "42");
        assert_eq!(user_in_token(&token).expect("reads"), user);
        assert!(user_in_token("not-a-token").is_err());

        let with_token = Identity { user: None };
        let (user, same) = with_token
            .resolve(environment(&[(TOKEN_SETTING, token.clone())]))
            .expect("reads the token");
        assert_eq!((user.as_str(), same), ("42", token));
    }

    #[test]
    fn a_missing_or_doubled_identity_is_refused_by_name() {
        let refused = |user: Option<u64>, pairs: &[(&'static str, String)]| {
            Identity { user }
                .resolve(environment(pairs))
                .expect_err("refused")
                .to_string()
        };
        assert!(refused(None, &[]).contains(TOKEN_SETTING));
        assert!(refused(Some(42), &[]).contains(SECRET_SETTING));
        let both = [
            (TOKEN_SETTING, "a.b.c".to_owned()),
            ("PHONE_TOKEN_FILE", "/tmp/token".to_owned()),
        ];
        assert!(refused(None, &both).contains("not both"));
        assert!(refused(Some(7), &[(TOKEN_SETTING, "a.b.c".to_owned())]).contains("not both"));
    }
}
