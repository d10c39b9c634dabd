//! [`Signing`]: how tokens are signed (the identity provider's keys, or one HS256 secret), and
//! the check every bearer token goes through: split, signature, then claims
//! ([`CustomerTokens`] for customers; `operators` for the console). The rules are `shared`'s,
//! the same as the edge's.

use std::sync::Arc;

use shared::UserId;
use shared::auth::{AuthError, CompactToken, TokenRules, VerifiedToken, bearer_token, hs256};

use super::provider_keys::ProviderKeys;
use super::signatures::signature_holds;

/// What signs the tokens a verifier accepts.
pub enum Signing {
    /// An identity provider's published keys (RS256, ES256).
    Provider(Arc<ProviderKeys>),
    /// One shared HS256 secret.
    Secret(Vec<u8>),
}

impl Signing {
    /// The token, verified: its signature holds under the key its `kid` names (with that key's
    /// algorithm), or under the secret.
    pub async fn verify(&self, token: &[u8]) -> Result<VerifiedToken, AuthError> {
        let token = CompactToken::parse(token)?;
        let holds = match self {
            Signing::Secret(secret) => hs256::signature_holds(secret, &token)?,
            Signing::Provider(keys) => {
                let key = keys.key_for(token.header()).await?;
                signature_holds(&key, token.signing_input(), token.signature())
            }
        };
        token.verified(holds)
    }
}

/// Not derived: the secret must never reach a log.
impl std::fmt::Debug for Signing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Signing::Provider(keys) => f.debug_tuple("Provider").field(keys).finish(),
            Signing::Secret(_) => f.write_str("Secret([REDACTED])"),
        }
    }
}

/// Customers' bearer tokens: signed as [`Signing`] says, held to [`TokenRules`].
#[derive(Debug)]
pub struct CustomerTokens {
    signing: Signing,
    rules: TokenRules,
}

impl CustomerTokens {
    /// Tokens signed as `signing` says, under `rules`.
    pub fn new(signing: Signing, rules: TokenRules) -> CustomerTokens {
        CustomerTokens { signing, rules }
    }

    /// The user an `Authorization` header's token names, at `now_unix`.
    pub async fn user_of(
        &self,
        authorization: Option<&[u8]>,
        now_unix: i64,
    ) -> Result<UserId, AuthError> {
        let verified = self.signing.verify(bearer_token(authorization)?).await?;
        self.rules.user_of(&verified, now_unix)
    }
}
