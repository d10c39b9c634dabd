//! The edge's settings: the backend's URL, the forward timeout, the run mode, where tokens get
//! their keys (the identity provider's JWKS URL, or the HS256 secret), the token rules, the
//! rate limits and where the edge's spans are exported, if anywhere (`[vars]` in
//! `wrangler.toml`), the secrets (the JWT secret and the edge proof's,
//! wrangler secrets; `.dev.vars` in development) and the idempotency policy, compiled in from the
//! repository's `policy.yaml` (the file the backend reads).
//!
//! The values arrive as strings from the runtime's environment; [`EdgeConfig::from_settings`]
//! checks them once per request, so a misconfigured Worker replies with a clear 500 and logs which
//! setting is wrong instead of misbehaving. The secret and the token rules are checked by the
//! same `shared` code as the backend's, with the same setting names. The policy is parsed and
//! checked by the build (`edge/build.rs`), so an invalid file stops the build with a message
//! naming the field, and the Worker holds the checked value.

use std::sync::OnceLock;
use std::time::Duration;

use shared::Policy;
use shared::auth::key_cache::CachePolicy;
use shared::auth::{
    DEFAULT_LEEWAY_SECONDS, JWT_AUDIENCE_SETTING, JWT_ISSUER_SETTING, JWT_LEEWAY_SETTING,
    JWT_SECRET_SETTING, SecretError, TokenRules, TokenRulesError, TokenVerifier,
    USER_CLAIM_SETTING, check_secret,
};
use shared::cors::{AllowedOrigins, CORS_ALLOWED_ORIGINS_SETTING, OriginError};
use shared::edge_proof::{MIN_PROOF_SECRET_BYTES, PROOF_SECRET_SETTING};

use crate::rate_limit::Limit;

/// The `[vars]` entry holding the backend's base URL, e.g. `http://127.0.0.1:8080`.
pub const BACKEND_URL_VAR: &str = "BACKEND_URL";

/// The secret holding the HS256 key that bearer tokens are signed with (the backend's
/// `AUTH_JWT_SECRET`).
pub const JWT_SECRET_VAR: &str = JWT_SECRET_SETTING;

/// The `[vars]` entry holding the identity provider's JWKS URL (the backend's `AUTH_JWKS_URL`).
pub const JWKS_URL_VAR: &str = "AUTH_JWKS_URL";

/// The `[vars]` entry bounding how often the key set is fetched, in seconds.
pub const JWKS_REFETCH_VAR: &str = "AUTH_JWKS_REFETCH_SECONDS";

/// The `[vars]` entry bounding how long past its `max-age` the key set is used while the
/// provider is unreachable, in seconds (the backend's setting of the same name).
pub const JWKS_MAX_STALE_VAR: &str = "AUTH_JWKS_MAX_STALE_SECONDS";

/// The secret the edge signs its proof with (the backend's `EDGE_PROOF_SECRET`).
pub const PROOF_SECRET_VAR: &str = PROOF_SECRET_SETTING;

/// The optional `[vars]` entry bounding one forward to the backend, in milliseconds.
pub const BACKEND_TIMEOUT_VAR: &str = "BACKEND_TIMEOUT_MS";

/// The `[vars]` entry naming the run mode, as the backend's: `production` (the default) or
/// `development`, which alone accepts the published development secret.
pub const APP_ENV_VAR: &str = "APP_ENV";

/// Whether each key's Durable Object keeps the backend's final reply and replays it (`true`, the
/// default), or keeps only what coordination needs, the in-flight mark, the fingerprint and the
/// expiry, and sends repeats on to the backend to replay (`false`: no payment data stored at
/// the edge, for deployments whose payment data must stay in one country; docs/edge.md).
pub const KEEPS_REPLIES_VAR: &str = "EDGE_KEEPS_REPLIES";

/// The `[vars]` entry turning on the export of the edge's spans (OpenTelemetry's standard
/// name): the OTLP/HTTP collector's base URL, to which `/v1/traces` is appended; empty or unset,
/// nothing is exported.
pub const OTLP_ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";

/// The optional `[vars]` entry giving the full URL spans are sent to, used as it is; it wins
/// over [`OTLP_ENDPOINT_VAR`] (and turns the export on by itself), as OpenTelemetry specifies.
pub const OTLP_TRACES_ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";

/// The optional `[vars]` entry naming the service the spans come from.
pub const SERVICE_NAME_VAR: &str = "OTEL_SERVICE_NAME";

/// The service the edge's spans come from when [`SERVICE_NAME_VAR`] is not set.
pub const DEFAULT_SERVICE_NAME: &str = "safe-retries-edge";

/// The path OTLP/HTTP takes traces at, appended to [`OTLP_ENDPOINT_VAR`].
pub const OTLP_TRACES_PATH: &str = "/v1/traces";

/// The `[vars]` entries of the per-user rate limit: the steady rate and the burst.
pub const USER_RATE_VARS: LimitVars = LimitVars {
    per_minute: "RATE_LIMIT_USER_PER_MINUTE",
    burst: "RATE_LIMIT_USER_BURST",
};

/// The `[vars]` entries of the per-address rate limit.
pub const ADDRESS_RATE_VARS: LimitVars = LimitVars {
    per_minute: "RATE_LIMIT_ADDRESS_PER_MINUTE",
    burst: "RATE_LIMIT_ADDRESS_BURST",
};

/// How long the edge waits for the backend by default. Longer than the backend needs in the
/// worst case it still replies (a 3 s wait for a database connection plus a 5 s bank timeout,
/// `BANK_TIMEOUT_MS`), so a slow but live backend is not cut off.
pub const DEFAULT_BACKEND_TIMEOUT: Duration = Duration::from_secs(15);

/// How much longer than the forward timeout an in-flight mark lives. The Worker clears its own
/// mark when the forward ends (replied, failed or timed out); the mark's alarm only matters if
/// the Worker died mid-forward, and the margin covers the round trips to the Durable Object.
pub const IN_FLIGHT_MARK_MARGIN: Duration = Duration::from_secs(5);

/// A user's payments and refunds: 2 a second, 10 at once. A customer pays a few bills at a time;
/// the client library's retries (409 replies after `Retry-After: 1`, backoff from 500 ms) stay
/// well under it, while a script looping on the API is stopped within a second.
pub const DEFAULT_USER_LIMIT: Limit = Limit {
    per_minute: 120,
    burst: 10,
};

/// One client address: 20 requests a second, 200 at once. High, because mobile carriers put many
/// customers behind one public IPv4 address (carrier-grade NAT): this stops one machine's flood,
/// not one customer, which is the per-user limit's job.
pub const DEFAULT_ADDRESS_LIMIT: Limit = Limit {
    per_minute: 1200,
    burst: 200,
};

/// The names of the two settings of one rate limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitVars {
    /// The steady rate, requests per minute.
    pub per_minute: &'static str,
    /// The burst, requests at once.
    pub burst: &'static str,
}

/// The rate limits the Worker applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimits {
    /// Per authenticated user, on guarded operations.
    pub per_user: Limit,
    /// Per client address, on every request.
    pub per_address: Limit,
}

/// How bearer tokens are checked at the edge, as at the backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EdgeTokens {
    /// With the identity provider's published keys: verified by WebCrypto
    /// (`runtime::identity`).
    Provider {
        /// The JWKS URL.
        jwks_url: String,
        /// How the key set is cached.
        cache: CachePolicy,
        /// What the claims must hold.
        rules: TokenRules,
    },
    /// With one HS256 secret, under these rules.
    Secret(TokenVerifier),
}

impl EdgeTokens {
    /// What the claims must hold.
    pub fn rules(&self) -> &TokenRules {
        match self {
            EdgeTokens::Provider { rules, .. } => rules,
            EdgeTokens::Secret(verifier) => verifier.rules(),
        }
    }
}

/// Where the edge's spans go, and as which service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanExport {
    /// The collector's URL for traces (`…/v1/traces`).
    pub traces_url: String,
    /// The `service.name` of the spans.
    pub service_name: String,
}

/// The edge proof's secret; its `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
struct ProofSecret(String);

impl std::fmt::Debug for ProofSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProofSecret([REDACTED])")
    }
}

/// The checked settings of the Worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EdgeConfig {
    /// The backend's base URL without a trailing slash; request paths are appended to it.
    backend_base: String,
    /// Checks bearer tokens as the backend does.
    tokens: EdgeTokens,
    /// The secret of the proof the edge adds to every forward, when the backend asks for one.
    proof_secret: Option<ProofSecret>,
    /// The bound on one forward to the backend.
    backend_timeout: Duration,
    /// The rate limits.
    rate_limits: RateLimits,
    /// Where the edge's spans are exported; `None`: they are not.
    span_export: Option<SpanExport>,
    /// The origins whose pages may read the edge's own replies (`CORS_ALLOWED_ORIGINS`, the
    /// backend's list; none: CORS off).
    allowed_origins: AllowedOrigins,
    /// Whether keys' objects keep final replies ([`KEEPS_REPLIES_VAR`]).
    keeps_replies: bool,
}

/// A setting that is missing or unusable. The message names the setting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A required setting is not set.
    #[error("{0} is not set")]
    Missing(&'static str),
    /// `CORS_ALLOWED_ORIGINS` lists something that is not an origin.
    #[error(transparent)]
    BadOrigins(#[from] OriginError),
    /// The backend URL is not an `http://` or `https://` URL.
    #[error("{BACKEND_URL_VAR} must be an http:// or https:// URL, not {0:?}")]
    BadBackendUrl(String),
    /// A collector's URL is not an `http://` or `https://` URL.
    #[error("{setting} must be an http:// or https:// URL, not {value:?}")]
    BadOtlpEndpoint {
        /// The setting.
        setting: &'static str,
        /// Its value.
        value: String,
    },
    /// The run mode is neither `production` nor `development`.
    #[error("{APP_ENV_VAR} must be production or development, not {0:?}")]
    BadAppEnv(String),
    /// Whether replies are kept is neither `true` nor `false`.
    #[error("{KEEPS_REPLIES_VAR} must be true or false, not {0:?}")]
    BadKeepsReplies(String),
    /// The secret is the development one outside development, or too short.
    #[error(transparent)]
    Secret(#[from] SecretError),
    /// Both a JWKS URL and a JWT secret are set.
    #[error("set {JWKS_URL_VAR} or {JWT_SECRET_VAR}, not both: tokens are signed one way")]
    TwoKeySources,
    /// The JWKS URL is not an `https://` URL (or `http://` to this machine, or in development).
    #[error(
        "{JWKS_URL_VAR} must be an https:// URL (http:// only to this machine, or in \
         development), not {0:?}"
    )]
    BadJwksUrl(String),
    /// The key set's refetch bound is not a positive whole number of seconds.
    #[error("{JWKS_REFETCH_VAR} must be a positive whole number of seconds, not {0:?}")]
    BadRefetch(String),
    /// The key set's staleness bound is not a positive whole number of seconds.
    #[error("{JWKS_MAX_STALE_VAR} must be a positive whole number of seconds, not {0:?}")]
    BadMaxStale(String),
    /// The edge proof's secret is too short.
    #[error("{PROOF_SECRET_VAR} must be at least {MIN_PROOF_SECRET_BYTES} bytes")]
    ShortProofSecret,
    /// The leeway is not a whole number of seconds.
    #[error("{JWT_LEEWAY_SETTING} must be a whole number of seconds, not {0:?}")]
    BadLeeway(String),
    /// A token rule is out of bounds.
    #[error(transparent)]
    TokenRules(#[from] TokenRulesError),
    /// The timeout is not a positive whole number of milliseconds.
    #[error("{BACKEND_TIMEOUT_VAR} must be a positive whole number of milliseconds, not {0:?}")]
    BadTimeout(String),
    /// A rate limit setting is not a positive whole number.
    #[error("{setting} must be a positive whole number, not {value:?}")]
    BadRateLimit {
        /// The setting.
        setting: &'static str,
        /// Its value.
        value: String,
    },
    /// The in-flight mark (timeout plus [`IN_FLIGHT_MARK_MARGIN`]) would outlive the policy's
    /// `stuck_after`: the edge would reply 409 for a key the backend already reconciles.
    #[error(
        "{BACKEND_TIMEOUT_VAR} plus the in-flight mark's {}-second margin must be shorter than the \
         policy's stuck_after_minutes ({stuck_after_ms} ms); {BACKEND_TIMEOUT_VAR} is {timeout_ms} ms",
        IN_FLIGHT_MARK_MARGIN.as_secs()
    )]
    TimeoutNotUnderStuckAfter {
        /// The configured forward timeout, in milliseconds.
        timeout_ms: u128,
        /// The policy's `stuck_after`, in milliseconds.
        stuck_after_ms: u128,
    },
}

impl EdgeConfig {
    /// Checks the settings, read by name through `setting` (the runtime's environment, or a map
    /// in tests). The backend URL and the secret are required; the secret is refused as the
    /// backend refuses it (the development secret outside `APP_ENV=development`, or too short);
    /// the rest have defaults. The forward timeout's in-flight mark must end before the policy's
    /// `stuck_after`, so a key the edge holds is never one the backend reconciles.
    pub fn from_settings(
        setting: impl Fn(&str) -> Option<String>,
    ) -> Result<EdgeConfig, ConfigError> {
        let backend_url = setting(BACKEND_URL_VAR).ok_or(ConfigError::Missing(BACKEND_URL_VAR))?;
        let backend_base = backend_url.trim().trim_end_matches('/').to_owned();
        if !is_http_url(&backend_base) {
            return Err(ConfigError::BadBackendUrl(backend_url));
        }
        let development_mode = match setting(APP_ENV_VAR) {
            None => false,
            Some(mode) => match mode.trim() {
                "production" => false,
                "development" => true,
                _ => return Err(ConfigError::BadAppEnv(mode)),
            },
        };
        let leeway_seconds = match setting(JWT_LEEWAY_SETTING) {
            None => DEFAULT_LEEWAY_SECONDS,
            Some(text) => text
                .trim()
                .parse::<u64>()
                .map_err(|_| ConfigError::BadLeeway(text))?,
        };
        let token_rules = TokenRules::new(
            leeway_seconds,
            setting(JWT_ISSUER_SETTING),
            setting(JWT_AUDIENCE_SETTING),
        )?
        .with_user_claim(setting(USER_CLAIM_SETTING));
        let tokens = tokens(&setting, token_rules, development_mode)?;
        let proof_secret = setting(PROOF_SECRET_VAR).filter(|secret| !secret.is_empty());
        if proof_secret
            .as_ref()
            .is_some_and(|secret| secret.len() < MIN_PROOF_SECRET_BYTES)
        {
            return Err(ConfigError::ShortProofSecret);
        }
        let proof_secret = proof_secret.map(ProofSecret);
        let backend_timeout = match setting(BACKEND_TIMEOUT_VAR) {
            None => DEFAULT_BACKEND_TIMEOUT,
            Some(text) => positive(&text)
                .map(Duration::from_millis)
                .ok_or(ConfigError::BadTimeout(text))?,
        };
        let stuck_after = compiled_policy().stuck_after;
        if backend_timeout + IN_FLIGHT_MARK_MARGIN >= stuck_after {
            return Err(ConfigError::TimeoutNotUnderStuckAfter {
                timeout_ms: backend_timeout.as_millis(),
                stuck_after_ms: stuck_after.as_millis(),
            });
        }
        let keeps_replies = match setting(KEEPS_REPLIES_VAR).as_deref().map(str::trim) {
            None | Some("true") => true,
            Some("false") => false,
            Some(other) => return Err(ConfigError::BadKeepsReplies(other.to_owned())),
        };
        let rate_limits = RateLimits {
            per_user: limit(&setting, USER_RATE_VARS, DEFAULT_USER_LIMIT)?,
            per_address: limit(&setting, ADDRESS_RATE_VARS, DEFAULT_ADDRESS_LIMIT)?,
        };
        Ok(EdgeConfig {
            backend_base,
            tokens,
            proof_secret,
            backend_timeout,
            rate_limits,
            span_export: span_export(&setting)?,
            allowed_origins: AllowedOrigins::parse(
                &setting(CORS_ALLOWED_ORIGINS_SETTING).unwrap_or_default(),
            )?,
            keeps_replies,
        })
    }

    /// The backend URL for a request's path and query (`/v1/...?...`).
    pub fn backend_url_for(&self, path_and_query: &str) -> String {
        format!("{}{path_and_query}", self.backend_base)
    }

    /// How bearer tokens are checked.
    pub fn tokens(&self) -> &EdgeTokens {
        &self.tokens
    }

    /// The edge proof's secret, if the edge signs its forwards.
    pub fn proof_secret(&self) -> Option<&[u8]> {
        self.proof_secret.as_ref().map(|secret| secret.0.as_bytes())
    }

    /// The bound on one forward to the backend.
    pub fn backend_timeout(&self) -> Duration {
        self.backend_timeout
    }

    /// How long an in-flight mark holds a key when nobody clears it: the forward timeout plus
    /// [`IN_FLIGHT_MARK_MARGIN`] (20 s by default).
    pub fn in_flight_mark_lifetime(&self) -> Duration {
        self.backend_timeout + IN_FLIGHT_MARK_MARGIN
    }

    /// The rate limits.
    pub fn rate_limits(&self) -> RateLimits {
        self.rate_limits
    }

    /// Where the edge's spans are exported, if they are.
    pub fn span_export(&self) -> Option<&SpanExport> {
        self.span_export.as_ref()
    }

    /// The origins whose pages may read the edge's replies.
    pub fn allowed_origins(&self) -> &AllowedOrigins {
        &self.allowed_origins
    }

    /// Whether keys' objects keep final replies to replay them ([`KEEPS_REPLIES_VAR`]).
    pub fn keeps_replies(&self) -> bool {
        self.keeps_replies
    }
}

/// Whether `url` is an `http://` or `https://` URL with a host.
fn is_http_url(url: &str) -> bool {
    ["http://", "https://"]
        .iter()
        .filter_map(|scheme| url.strip_prefix(scheme))
        .any(|rest| !rest.is_empty() && !rest.starts_with('/'))
}

/// Where spans are exported: the traces endpoint as it is, or else the base endpoint with
/// `/v1/traces` appended; neither set (or both empty), nowhere.
fn span_export(
    setting: &impl Fn(&str) -> Option<String>,
) -> Result<Option<SpanExport>, ConfigError> {
    let set = |name: &str| {
        setting(name)
            .map(|value| value.trim().to_owned())
            .filter(|value| !value.is_empty())
    };
    let (endpoint_var, traces_url) = match (set(OTLP_TRACES_ENDPOINT_VAR), set(OTLP_ENDPOINT_VAR)) {
        (Some(url), _) => (OTLP_TRACES_ENDPOINT_VAR, url),
        (None, Some(base)) => (
            OTLP_ENDPOINT_VAR,
            format!("{}{OTLP_TRACES_PATH}", base.trim_end_matches('/')),
        ),
        (None, None) => return Ok(None),
    };
    if !is_http_url(&traces_url) {
        return Err(ConfigError::BadOtlpEndpoint {
            setting: endpoint_var,
            value: setting(endpoint_var).unwrap_or_default(),
        });
    }
    Ok(Some(SpanExport {
        traces_url,
        service_name: set(SERVICE_NAME_VAR).unwrap_or_else(|| DEFAULT_SERVICE_NAME.to_owned()),
    }))
}

/// Where tokens get their keys: the JWKS URL, or else the JWT secret (required then, and
/// refused as the backend refuses it); both set is refused.
fn tokens(
    setting: &impl Fn(&str) -> Option<String>,
    rules: TokenRules,
    development_mode: bool,
) -> Result<EdgeTokens, ConfigError> {
    let jwks_url = setting(JWKS_URL_VAR).filter(|url| !url.trim().is_empty());
    let secret = setting(JWT_SECRET_VAR).filter(|secret| !secret.is_empty());
    match (jwks_url, secret) {
        (Some(_), Some(_)) => Err(ConfigError::TwoKeySources),
        (Some(url), None) => {
            let url = url.trim().to_owned();
            let loopback = [
                "http://127.",
                "http://localhost:",
                "http://localhost/",
                "http://[::1]",
            ]
            .iter()
            .any(|prefix| url.starts_with(prefix));
            let allowed = url.starts_with("https://")
                || loopback
                || (development_mode && url.starts_with("http://"));
            if !allowed {
                return Err(ConfigError::BadJwksUrl(url));
            }
            let mut cache = CachePolicy::default();
            if let Some(text) = setting(JWKS_REFETCH_VAR) {
                let seconds = positive(&text).ok_or(ConfigError::BadRefetch(text))?;
                cache.refetch_every = Duration::from_secs(seconds);
            }
            if let Some(text) = setting(JWKS_MAX_STALE_VAR) {
                let seconds = positive(&text).ok_or(ConfigError::BadMaxStale(text))?;
                cache.max_stale = Duration::from_secs(seconds);
            }
            Ok(EdgeTokens::Provider {
                jwks_url: url,
                cache,
                rules,
            })
        }
        (None, Some(secret)) => {
            check_secret(secret.as_bytes(), development_mode)?;
            Ok(EdgeTokens::Secret(TokenVerifier::new(secret, rules)))
        }
        (None, None) => Err(ConfigError::Missing(JWT_SECRET_VAR)),
    }
}

/// A positive whole number, if `text` is one.
fn positive(text: &str) -> Option<u64> {
    text.trim().parse::<u64>().ok().filter(|value| *value > 0)
}

/// One rate limit from its two settings, each defaulting to `default`'s.
fn limit(
    setting: &impl Fn(&str) -> Option<String>,
    vars: LimitVars,
    default: Limit,
) -> Result<Limit, ConfigError> {
    let read = |name: &'static str, default: u32| match setting(name) {
        None => Ok(default),
        Some(text) => positive(&text)
            .and_then(|value| u32::try_from(value).ok())
            .ok_or(ConfigError::BadRateLimit {
                setting: name,
                value: text,
            }),
    };
    Ok(Limit {
        per_minute: read(vars.per_minute, default.per_minute)?,
        burst: read(vars.burst, default.burst)?,
    })
}

/// The policy compiled in from `policy.yaml` (checked by the build), made once per Worker
/// instance.
pub fn compiled_policy() -> &'static Policy {
    static POLICY: OnceLock<Policy> = OnceLock::new();
    POLICY.get_or_init(policy_from_build)
}

include!(concat!(env!("OUT_DIR"), "/compiled_policy.rs"));

#[cfg(test)]
mod tests {
    // Under wasm32 the same tests run in Node through wasm-bindgen-test (`.cargo/config.toml`).
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use std::collections::HashMap;

    use shared::auth::DEVELOPMENT_JWT_SECRET;

    use super::*;

    const SECRET: &str = "a-secret-that-is-at-least-32-bytes-long";

    /// The settings of a working Worker, with `changes` applied (`None` removes a setting).
    fn settings(changes: &[(&str, Option<&str>)]) -> Result<EdgeConfig, ConfigError> {
        let mut values: HashMap<&str, String> = HashMap::from([
            (BACKEND_URL_VAR, "http://127.0.0.1:8080".to_owned()),
            (JWT_SECRET_VAR, SECRET.to_owned()),
        ]);
        for (name, value) in changes {
            match value {
                Some(value) => values.insert(name, (*value).to_owned()),
                None => values.remove(name),
            };
        }
        EdgeConfig::from_settings(|name| values.get(name).cloned())
    }

    fn config(url: &str, timeout: Option<&str>) -> Result<EdgeConfig, ConfigError> {
        settings(&[(BACKEND_URL_VAR, Some(url)), (BACKEND_TIMEOUT_VAR, timeout)])
    }

    #[test]
    fn backend_url_joins_request_paths_without_a_double_slash() {
        let edge = config("http://127.0.0.1:8080/", None).expect("valid");
        assert_eq!(
            edge.backend_url_for("/v1/payments/7?x=1"),
            "http://127.0.0.1:8080/v1/payments/7?x=1"
        );
    }

    #[test]
    fn missing_or_unusable_settings_are_named() {
        assert_eq!(
            settings(&[(BACKEND_URL_VAR, None)]),
            Err(ConfigError::Missing(BACKEND_URL_VAR))
        );
        assert_eq!(
            settings(&[(JWT_SECRET_VAR, None)]),
            Err(ConfigError::Missing(JWT_SECRET_VAR))
        );
        for url in ["127.0.0.1:8080", "ftp://b", "http://", "http:///x"] {
            assert!(
                matches!(config(url, None), Err(ConfigError::BadBackendUrl(_))),
                "{url}"
            );
        }
        assert_eq!(
            settings(&[(JWT_SECRET_VAR, Some("short"))]),
            Err(ConfigError::Secret(SecretError::TooShort))
        );
        for timeout in ["0", "-5", "soon"] {
            assert!(
                matches!(
                    config("http://b", Some(timeout)),
                    Err(ConfigError::BadTimeout(_))
                ),
                "{timeout}"
            );
        }
        for (name, value) in [
            (JWT_LEEWAY_SETTING, "half a minute"),
            (JWT_LEEWAY_SETTING, "301"),
            (APP_ENV_VAR, "staging"),
            (USER_RATE_VARS.per_minute, "0"),
            (USER_RATE_VARS.burst, "-1"),
            (ADDRESS_RATE_VARS.per_minute, "many"),
            (ADDRESS_RATE_VARS.burst, "4294967296"),
        ] {
            let error = settings(&[(name, Some(value))]).expect_err("refused");
            assert!(error.to_string().contains(name), "{name}={value}: {error}");
        }
    }

    #[test]
    fn the_development_secret_is_refused_outside_development_naming_the_settings() {
        let development = Some(DEVELOPMENT_JWT_SECRET);
        for mode in [None, Some("production")] {
            let error = settings(&[(JWT_SECRET_VAR, development), (APP_ENV_VAR, mode)])
                .expect_err("refused");
            assert_eq!(error, ConfigError::Secret(SecretError::DevelopmentSecret));
            let message = error.to_string();
            assert!(message.contains(JWT_SECRET_VAR), "{message}");
            assert!(message.contains("APP_ENV=development"), "{message}");
        }
        assert!(
            settings(&[
                (JWT_SECRET_VAR, development),
                (APP_ENV_VAR, Some("development"))
            ])
            .is_ok()
        );
    }

    #[test]
    fn token_rules_come_from_the_backends_settings() {
        let defaults = settings(&[]).expect("valid");
        assert_eq!(defaults.tokens().rules(), &TokenRules::default());
        let configured = settings(&[
            (JWT_LEEWAY_SETTING, Some("10")),
            (JWT_ISSUER_SETTING, Some("https://id.example")),
            (JWT_AUDIENCE_SETTING, Some("payments")),
        ])
        .expect("valid");
        let rules = configured.tokens().rules();
        assert_eq!(rules.leeway_seconds(), 10);
        assert_eq!(rules.issuer(), Some("https://id.example"));
        assert_eq!(rules.audience(), Some("payments"));
    }

    #[test]
    fn a_jwks_url_replaces_the_secret_and_the_proof_secret_is_checked() {
        let provider = settings(&[
            (JWT_SECRET_VAR, None),
            (
                JWKS_URL_VAR,
                Some("https://id.example/.well-known/jwks.json"),
            ),
            (USER_CLAIM_SETTING, Some("customer_id")),
            (JWKS_REFETCH_VAR, Some("2")),
            (JWKS_MAX_STALE_VAR, Some("900")),
        ])
        .expect("a provider's keys");
        let EdgeTokens::Provider {
            jwks_url,
            cache,
            rules,
        } = provider.tokens()
        else {
            panic!("expected the provider's keys: {provider:?}");
        };
        assert_eq!(jwks_url, "https://id.example/.well-known/jwks.json");
        assert_eq!(cache.refetch_every, Duration::from_secs(2));
        assert_eq!(cache.max_stale, Duration::from_secs(900));
        assert_eq!(rules.user_claim(), "customer_id");
        assert_eq!(
            settings(&[(JWKS_URL_VAR, Some("https://id.example/jwks"))]),
            Err(ConfigError::TwoKeySources)
        );
        let plaintext = [
            (JWT_SECRET_VAR, None),
            (JWKS_URL_VAR, Some("http://id.example/jwks")),
        ];
        assert!(matches!(
            settings(&plaintext),
            Err(ConfigError::BadJwksUrl(_))
        ));
        let in_development = [plaintext.as_slice(), &[(APP_ENV_VAR, Some("development"))]].concat();
        assert!(settings(&in_development).is_ok());
        assert_eq!(
            settings(&[(PROOF_SECRET_VAR, Some("short"))]),
            Err(ConfigError::ShortProofSecret)
        );
        let proving = settings(&[(PROOF_SECRET_VAR, Some(SECRET))]).expect("a proof secret");
        assert_eq!(proving.proof_secret(), Some(SECRET.as_bytes()));
        assert_eq!(settings(&[]).expect("defaults").proof_secret(), None);
    }

    #[test]
    fn replies_are_kept_unless_told_not_to() {
        assert!(settings(&[]).expect("defaults").keeps_replies());
        let residency = settings(&[(KEEPS_REPLIES_VAR, Some("false"))]).expect("valid");
        assert!(!residency.keeps_replies());
        assert_eq!(
            settings(&[(KEEPS_REPLIES_VAR, Some("no"))]),
            Err(ConfigError::BadKeepsReplies("no".to_owned()))
        );
    }

    #[test]
    fn rate_limits_have_defaults_and_can_be_set() {
        let defaults = settings(&[]).expect("valid").rate_limits();
        assert_eq!(defaults.per_user, DEFAULT_USER_LIMIT);
        assert_eq!(defaults.per_address, DEFAULT_ADDRESS_LIMIT);
        let set = settings(&[
            (USER_RATE_VARS.per_minute, Some("12")),
            (USER_RATE_VARS.burst, Some("3")),
            (ADDRESS_RATE_VARS.per_minute, Some("600")),
            (ADDRESS_RATE_VARS.burst, Some("50")),
        ])
        .expect("valid")
        .rate_limits();
        assert_eq!(
            set.per_user,
            Limit {
                per_minute: 12,
                burst: 3
            }
        );
        assert_eq!(
            set.per_address,
            Limit {
                per_minute: 600,
                burst: 50
            }
        );
    }

    #[test]
    fn spans_are_exported_only_to_a_configured_collector() {
        assert_eq!(settings(&[]).expect("valid").span_export(), None);
        let empty = settings(&[(OTLP_ENDPOINT_VAR, Some("")), (SERVICE_NAME_VAR, Some("x"))]);
        assert_eq!(empty.expect("valid").span_export(), None);
        for base in ["http://127.0.0.1:4318", "http://127.0.0.1:4318/"] {
            let export = settings(&[(OTLP_ENDPOINT_VAR, Some(base))]).expect("valid");
            assert_eq!(
                export.span_export(),
                Some(&SpanExport {
                    traces_url: "http://127.0.0.1:4318/v1/traces".to_owned(),
                    service_name: DEFAULT_SERVICE_NAME.to_owned(),
                }),
                "{base}"
            );
        }
        let under_a_path = settings(&[(OTLP_ENDPOINT_VAR, Some("https://otel.example/otlp/"))]);
        let export = under_a_path.expect("valid");
        let export = export.span_export().expect("exported");
        assert_eq!(export.traces_url, "https://otel.example/otlp/v1/traces");
        let full = settings(&[
            (OTLP_ENDPOINT_VAR, Some("https://ignored.example")),
            (
                OTLP_TRACES_ENDPOINT_VAR,
                Some("https://otel.example/traces"),
            ),
            (SERVICE_NAME_VAR, Some("edge-eu")),
        ])
        .expect("valid");
        assert_eq!(
            full.span_export(),
            Some(&SpanExport {
                traces_url: "https://otel.example/traces".to_owned(),
                service_name: "edge-eu".to_owned(),
            })
        );
        for name in [OTLP_ENDPOINT_VAR, OTLP_TRACES_ENDPOINT_VAR] {
            let error = settings(&[(name, Some("otel:4318"))]).expect_err("refused");
            assert_eq!(
                error,
                ConfigError::BadOtlpEndpoint {
                    setting: name,
                    value: "otel:4318".to_owned(),
                }
            );
            assert!(error.to_string().contains(name), "{error}");
        }
    }

    #[test]
    fn a_timeout_whose_mark_reaches_stuck_after_is_refused_naming_it() {
        // The shipped policy's stuck_after is 5 minutes; the mark adds 5 s to the timeout.
        for timeout in ["295000", "600000"] {
            let error = config("http://b", Some(timeout)).expect_err("refused");
            assert!(
                matches!(error, ConfigError::TimeoutNotUnderStuckAfter { .. }),
                "{timeout}"
            );
            assert!(error.to_string().contains(BACKEND_TIMEOUT_VAR), "{error}");
        }
        assert!(config("http://b", Some("294999")).is_ok());
    }

    #[test]
    fn in_flight_mark_outlives_the_forward_timeout() {
        let default = config("http://b", None).expect("valid");
        assert_eq!(default.backend_timeout(), DEFAULT_BACKEND_TIMEOUT);
        assert_eq!(default.in_flight_mark_lifetime(), Duration::from_secs(20));
        let short = config("http://b", Some("500")).expect("valid");
        assert_eq!(short.backend_timeout(), Duration::from_millis(500));
        assert!(short.in_flight_mark_lifetime() > short.backend_timeout());
    }

    #[test]
    fn the_compiled_in_policy_is_the_repository_file() {
        assert_eq!(compiled_policy(), &Policy::default_policy());
    }

    #[test]
    fn debug_output_never_shows_the_secrets() {
        let edge = config("http://b", None).expect("valid");
        assert!(!format!("{edge:?}").contains(SECRET));
        let proof = "an-edge-proof-secret-of-at-least-32-bytes";
        let proving = settings(&[(PROOF_SECRET_VAR, Some(proof))]).expect("valid");
        assert!(!format!("{proving:?}").contains(proof));
    }
}
