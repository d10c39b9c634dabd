//! Who a guarded request comes from: the bearer token checked as the backend checks it, with
//! `shared`'s rules: with the HS256 secret, or with the identity provider's published key that
//! the token's `kid` names (the key decides the algorithm; [`super::provider_keys`] caches the
//! set in the isolate) and a signature checked by the platform's WebCrypto
//! ([`super::web_crypto`]), so no RSA or ECDSA code is in the Worker's module.

use shared::UserId;
use shared::auth::{AuthError, CompactToken, bearer_token};

use super::clock::now_unix;
use super::{provider_keys, web_crypto};
use crate::config::{EdgeConfig, EdgeTokens};

/// The user an `Authorization` header's token names, or why it was refused.
pub async fn user_of(
    config: &EdgeConfig,
    authorization: Option<&[u8]>,
) -> Result<UserId, AuthError> {
    match config.tokens() {
        EdgeTokens::Secret(verifier) => verifier.verify_authorization(authorization, now_unix()),
        EdgeTokens::Provider {
            jwks_url,
            cache,
            rules,
        } => {
            let token = CompactToken::parse(bearer_token(authorization)?)?;
            let key = provider_keys::key_for(jwks_url, *cache, token.header()).await?;
            let holds =
                web_crypto::signature_holds(&key, token.signing_input(), token.signature()).await;
            rules.user_of(&token.verified(holds)?, now_unix())
        }
    }
}
