//! The identity settings: where customers' and operators' tokens get their keys (an identity
//! provider's JWKS, or an HS256 secret), what their claims must hold, and whether public API
//! requests must carry the edge's proof ([`IdentitySettings`] as read, [`Identity`] checked).
//! docs/identity.md explains them with a worked example.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;
use clap::{ArgAction, Args};
use shared::auth::key_cache::CachePolicy;
use shared::auth::{
    DEFAULT_LEEWAY_SECONDS, DEVELOPMENT_JWT_SECRET, JWT_AUDIENCE_SETTING, JWT_ISSUER_SETTING,
    JWT_LEEWAY_SETTING, JWT_SECRET_SETTING, TokenRules, USER_CLAIM_SETTING, check_secret,
};
use shared::edge_proof::{
    Accepted, MIN_PROOF_SECRET_BYTES, PREVIOUS_PROOF_SECRET_SETTING, PROOF_SECRET_SETTING,
};

use crate::identity::{
    DEFAULT_MAX_LIFETIME, DEFAULT_OPERATOR_ROLE, DEFAULT_ROLE_CLAIM, DEVELOPMENT_OPERATOR_SECRET,
    KeySource, OPERATOR_SECRET_SETTING, OperatorRules, check_operator_secret,
};
use crate::transport_security::refuse_plaintext_url;
use secret_settings::{
    ExposeSecret, SecretString, process_environment, read_rotating_secret, read_secret,
};

/// The setting that turns the edge's proof off (or on, in development).
pub const REQUIRE_EDGE_PROOF_SETTING: &str = "REQUIRE_EDGE_PROOF";

/// The identity settings as read from flags and environment (the secrets are read by
/// [`IdentitySettings::into_identity`], from the environment or files only).
#[derive(Debug, Clone, Args)]
pub struct IdentitySettings {
    /// The identity provider's JWKS URL (its `jwks_uri`): customers' tokens are then RS256 or
    /// ES256, each naming its key by `kid`, and `AUTH_JWT_SECRET` must not be set.
    #[arg(long, env = "AUTH_JWKS_URL")]
    pub jwks_url: Option<String>,
    /// A JWKS file instead of a URL (read again whenever the keys are due).
    #[arg(long, env = "AUTH_JWKS_FILE")]
    pub jwks_file: Option<PathBuf>,
    /// The least time between two fetches of a key set, in seconds (a token naming an unknown
    /// `kid` triggers one at most this often).
    #[arg(long, env = "AUTH_JWKS_REFETCH_SECONDS", default_value_t = 5)]
    pub jwks_refetch_seconds: u64,
    /// Seconds past its `max-age` a key set is still used while the provider is unreachable;
    /// after that, 503 until it replies.
    #[arg(long, env = "AUTH_JWKS_MAX_STALE_SECONDS", default_value_t = 3600)]
    pub jwks_max_stale_seconds: u64,
    /// The claim holding the user id (the provider's subject, 1-255 printable ASCII characters).
    #[arg(long, env = USER_CLAIM_SETTING, default_value = "sub")]
    pub user_claim: String,
    /// Clock leeway allowed on a token's `exp`, `nbf` and `iat`, in seconds (at most 300).
    #[arg(long, env = JWT_LEEWAY_SETTING, default_value_t = DEFAULT_LEEWAY_SECONDS)]
    pub jwt_leeway_seconds: u64,
    /// When set, every token's `iss` must equal it; not checked when unset.
    #[arg(long, env = JWT_ISSUER_SETTING)]
    pub jwt_issuer: Option<String>,
    /// When set, every token's `aud` (a string or an array) must name it; not checked when unset.
    #[arg(long, env = JWT_AUDIENCE_SETTING)]
    pub jwt_audience: Option<String>,
    /// Operators' JWKS URL, when not the customers' (`AUTH_JWKS_URL`).
    #[arg(long, env = "OPERATOR_JWKS_URL")]
    pub operator_jwks_url: Option<String>,
    /// Operators' JWKS file, when not the customers'.
    #[arg(long, env = "OPERATOR_JWKS_FILE")]
    pub operator_jwks_file: Option<PathBuf>,
    /// The `iss` of operators' tokens, when not `AUTH_JWT_ISSUER`.
    #[arg(long, env = "OPERATOR_JWT_ISSUER")]
    pub operator_jwt_issuer: Option<String>,
    /// The `aud` operators' tokens must name, when not `AUTH_JWT_AUDIENCE` (a console's own
    /// audience keeps customers' tokens out).
    #[arg(long, env = "OPERATOR_JWT_AUDIENCE")]
    pub operator_jwt_audience: Option<String>,
    /// The claim of operators' tokens holding their roles (a string or an array).
    #[arg(long, env = "OPERATOR_ROLE_CLAIM", default_value = DEFAULT_ROLE_CLAIM)]
    pub operator_role_claim: String,
    /// The role that opens the operator console.
    #[arg(long, env = "OPERATOR_ROLE", default_value = DEFAULT_OPERATOR_ROLE)]
    pub operator_role: String,
    /// The longest an operator's token may live (`exp − iat`), in seconds.
    #[arg(long, env = "OPERATOR_TOKEN_MAX_LIFETIME_SECONDS", default_value_t = DEFAULT_MAX_LIFETIME.as_secs())]
    pub operator_token_max_lifetime_seconds: u64,
    /// Whether `/v1` requests must carry the edge's proof (`EDGE_PROOF_SECRET`); `true` by
    /// default in production, `false` in development.
    #[arg(long, env = REQUIRE_EDGE_PROOF_SETTING, action = ArgAction::Set)]
    pub require_edge_proof: Option<bool>,
    /// Whether 0.9.0's `v1` edge proof (no token or key in it) is accepted, for the upgrade:
    /// backends first, then the edge; `false` once every edge signs `v2`.
    #[arg(long, env = "EDGE_PROOF_ACCEPT_V1", default_value_t = true, action = ArgAction::Set)]
    pub edge_proof_accept_v1: bool,
}

/// Where a kind of token gets its keys.
#[derive(Debug, Clone)]
pub enum TokenKeys {
    /// An identity provider's published keys.
    Provider(KeySource),
    /// One HS256 secret.
    Secret(SecretString),
}

impl TokenKeys {
    /// The HS256 secret, if that is how tokens are signed (`dev-token` signs with it).
    pub fn secret(&self) -> Option<&SecretString> {
        match self {
            TokenKeys::Secret(secret) => Some(secret),
            TokenKeys::Provider(_) => None,
        }
    }
}

/// The checked identity configuration.
#[derive(Debug, Clone)]
pub struct Identity {
    /// Customers' tokens' keys.
    pub customer_keys: TokenKeys,
    /// What customers' tokens must carry (the edge reads the same settings).
    pub token_rules: TokenRules,
    /// Operators' tokens' keys; `None`: the operator API is closed to every token.
    pub operator_keys: Option<TokenKeys>,
    /// What operators' tokens must carry.
    pub operator_rules: OperatorRules,
    /// How key sets are cached.
    pub key_cache: CachePolicy,
    /// The edge proof's secrets, the current first (and the previous during a rotation); empty
    /// when `/v1` requests need no proof.
    pub edge_proof_secrets: Vec<SecretString>,
    /// Which proof versions are accepted.
    pub edge_proof_versions: Accepted,
}

impl Identity {
    /// HS256 tokens of `secret` for customers and `operator_secret` for operators (none: the
    /// console closed), under the default rules, no edge proof required: for tests and tools
    /// that build a backend in-process.
    pub fn with_secrets(secret: &str, operator_secret: Option<&str>) -> Identity {
        let token_rules = TokenRules::default();
        Identity {
            customer_keys: TokenKeys::Secret(SecretString::from(secret)),
            operator_keys: operator_secret
                .map(|secret| TokenKeys::Secret(SecretString::from(secret))),
            operator_rules: OperatorRules {
                tokens: token_rules.clone(),
                role_claim: DEFAULT_ROLE_CLAIM.to_owned(),
                role: DEFAULT_OPERATOR_ROLE.to_owned(),
                max_lifetime: DEFAULT_MAX_LIFETIME,
            },
            token_rules,
            key_cache: CachePolicy::default(),
            edge_proof_secrets: Vec::new(),
            edge_proof_versions: Accepted::V2Only,
        }
    }
}

impl IdentitySettings {
    /// The checked configuration: at most one key source per kind of token, no development
    /// secret outside development, keys fetched over TLS from another machine unless
    /// `allow_plaintext`, and the edge proof's secret where the proof is required.
    pub fn into_identity(
        self,
        development: bool,
        allow_plaintext: bool,
    ) -> anyhow::Result<Identity> {
        let customer_secret = read_secret(JWT_SECRET_SETTING, process_environment)?;
        let customer_keys = match (
            key_source("AUTH_JWKS", self.jwks_url, self.jwks_file)?,
            customer_secret,
        ) {
            (Some(_), Some(_)) => bail!(
                "set AUTH_JWKS_URL (or AUTH_JWKS_FILE) or {JWT_SECRET_SETTING}, not both: \
                 customers' tokens are signed one way"
            ),
            (Some(source), None) => TokenKeys::Provider(source),
            (None, secret) => {
                let secret = secret.unwrap_or_else(|| SecretString::from(DEVELOPMENT_JWT_SECRET));
                check_secret(secret.expose_secret().as_bytes(), development)?;
                TokenKeys::Secret(secret)
            }
        };
        let operator_secret = read_secret(OPERATOR_SECRET_SETTING, process_environment)?;
        let operator_source = key_source(
            "OPERATOR_JWKS",
            self.operator_jwks_url,
            self.operator_jwks_file,
        )?;
        let operator_keys = match (operator_source, operator_secret) {
            (Some(_), Some(_)) => bail!(
                "set OPERATOR_JWKS_URL (or OPERATOR_JWKS_FILE) or {OPERATOR_SECRET_SETTING}, not both"
            ),
            (Some(source), None) => Some(TokenKeys::Provider(source)),
            (None, Some(secret)) => Some(TokenKeys::Secret(secret)),
            (None, None) => match &customer_keys {
                TokenKeys::Provider(source) => Some(TokenKeys::Provider(source.clone())),
                TokenKeys::Secret(_) if development => Some(TokenKeys::Secret(SecretString::from(
                    DEVELOPMENT_OPERATOR_SECRET,
                ))),
                TokenKeys::Secret(_) => None,
            },
        };
        if let Some(TokenKeys::Secret(secret)) = &operator_keys {
            check_operator_secret(
                secret.expose_secret().as_bytes(),
                customer_keys
                    .secret()
                    .map(|secret| secret.expose_secret().as_bytes()),
                development,
            )?;
        }
        if !(allow_plaintext || development) {
            for keys in [Some(&customer_keys), operator_keys.as_ref()]
                .into_iter()
                .flatten()
            {
                if let TokenKeys::Provider(KeySource::Url(url)) = keys {
                    refuse_plaintext_url("the JWKS URL", url)?;
                }
            }
        }
        let token_rules =
            TokenRules::new(self.jwt_leeway_seconds, self.jwt_issuer, self.jwt_audience)?
                .with_user_claim(Some(self.user_claim));
        let operator_rules = OperatorRules {
            tokens: token_rules
                .clone()
                .for_issuer_and_audience(self.operator_jwt_issuer, self.operator_jwt_audience),
            role_claim: self.operator_role_claim,
            role: self.operator_role,
            max_lifetime: Duration::from_secs(self.operator_token_max_lifetime_seconds),
        };
        if self.jwks_refetch_seconds == 0 {
            bail!("AUTH_JWKS_REFETCH_SECONDS must be above 0");
        }
        let key_cache = CachePolicy {
            refetch_every: Duration::from_secs(self.jwks_refetch_seconds),
            max_stale: Duration::from_secs(self.jwks_max_stale_seconds),
            ..CachePolicy::default()
        };
        Ok(Identity {
            customer_keys,
            token_rules,
            operator_keys,
            operator_rules,
            key_cache,
            edge_proof_secrets: edge_proof_secrets(
                self.require_edge_proof.unwrap_or(!development),
            )?,
            edge_proof_versions: if self.edge_proof_accept_v1 {
                Accepted::V1AndV2
            } else {
                Accepted::V2Only
            },
        })
    }
}

/// The key source `{prefix}_URL` or `{prefix}_FILE` names, if one; both is refused.
fn key_source(
    prefix: &str,
    url: Option<String>,
    file: Option<PathBuf>,
) -> anyhow::Result<Option<KeySource>> {
    let url = url.filter(|url| !url.trim().is_empty());
    match (url, file) {
        (Some(_), Some(_)) => bail!("set {prefix}_URL or {prefix}_FILE, not both"),
        (Some(url), None) => Ok(Some(KeySource::Url(url))),
        (None, Some(file)) => Ok(Some(KeySource::File(file))),
        (None, None) => Ok(None),
    }
}

/// The edge proof's secrets when the proof is `required`, the current first: refused when the
/// current is missing, or either is short.
fn edge_proof_secrets(required: bool) -> anyhow::Result<Vec<SecretString>> {
    if !required {
        return Ok(Vec::new());
    }
    let secrets = read_rotating_secret(
        PROOF_SECRET_SETTING,
        PREVIOUS_PROOF_SECRET_SETTING,
        MIN_PROOF_SECRET_BYTES,
        process_environment,
    )?;
    if secrets.is_empty() {
        bail!(
            "{PROOF_SECRET_SETTING} is not set: public API requests must prove they came \
             through the edge; set it (the edge's secret of the same name), or \
             {REQUIRE_EDGE_PROOF_SETTING}=false where nothing but the edge can reach this \
             listener"
        );
    }
    Ok(secrets)
}
