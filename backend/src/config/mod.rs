//! Configuration: the policy file plus environment (SPEC §3, §7). Everything a deployment
//! changes is here; nothing else in the code is a setting.
//!
//! Every setting, its default and meaning: docs/configuration.md, generated from the
//! definitions below by [`reference`] (a test fails when the two differ), and `backend --help`.
//!
//! The three settings that hold secrets (the two token secrets, and the database URL with its
//! password) are read from the environment or from a mounted file, never from a flag
//! ([`crate::secret_settings`]); every other setting is also a flag.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{ArgAction, Args, ValueEnum};
use shared::Policy;

pub mod limits;
pub mod reference;

pub use limits::{LimitSettings, Limits};

use crate::operator_tokens::{
    DEVELOPMENT_OPERATOR_SECRET, OPERATOR_SECRET_SETTING, check_operator_secret,
};
use crate::secret_settings::{ExposeSecret, SecretString, process_environment, read_secret};
use crate::transport_security::{ALLOW_PLAINTEXT_SETTING, BANK_CA_FILE_SETTING, refuse_plaintext};
use shared::auth::{
    DEFAULT_LEEWAY_SECONDS, DEVELOPMENT_JWT_SECRET, JWT_AUDIENCE_SETTING, JWT_ISSUER_SETTING,
    JWT_LEEWAY_SETTING, JWT_SECRET_SETTING, TokenRules, check_secret,
};

/// The store when `DATABASE_URL` is not set: an embedded SQLite file under the working
/// directory, so a fresh machine needs nothing else installed.
pub const DEFAULT_DATABASE_URL: &str = "sqlite://data/payments.sqlite";

/// The setting naming the database (a secret: [`crate::secret_settings`]).
pub const DATABASE_URL_SETTING: &str = "DATABASE_URL";

/// The longest `AUDIT_TRAIL_KEEP_DAYS` (ten years).
const MAX_AUDIT_TRAIL_KEEP_DAYS: u64 = 3_650;

/// Whether this is a developer's machine or a real deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RunMode {
    /// A developer's machine: the development secret is allowed.
    Development,
    /// A real deployment: a real secret is required.
    Production,
}

/// The settings as read from flags and environment (the secret ones are read by
/// [`Settings::into_config`], from the environment only).
#[derive(Debug, Clone, Args)]
pub struct Settings {
    /// The partner bank's base URL; `https://…` for TLS.
    #[arg(long, env = "BANK_URL", default_value = "http://127.0.0.1:8081")]
    pub bank_url: String,
    /// A PEM file of the CA certificates the bank's certificate must chain to (those only); the
    /// Mozilla roots compiled in when unset.
    #[arg(long, env = BANK_CA_FILE_SETTING)]
    pub bank_ca_file: Option<PathBuf>,
    /// `true` lets production use plaintext or unverified TLS to a remote bank or database (a
    /// layer below, such as a mesh's mutual TLS, protects the link).
    #[arg(long, env = ALLOW_PLAINTEXT_SETTING, default_value_t = false, action = ArgAction::Set)]
    pub allow_plaintext_transport: bool,
    /// The API's address.
    #[arg(long, env = "LISTEN_ADDR", default_value = "127.0.0.1:8080")]
    pub listen_addr: SocketAddr,
    /// The admin listener: `/metrics`, detailed `/readyz`, the operator console and its API, for
    /// operators only (SPEC §8).
    #[arg(long, env = "ADMIN_ADDR", default_value = "127.0.0.1:9090")]
    pub admin_addr: SocketAddr,
    /// Clock leeway allowed on a token's `exp`, `nbf` and `iat`, in seconds (at most 300).
    #[arg(long, env = JWT_LEEWAY_SETTING, default_value_t = DEFAULT_LEEWAY_SECONDS)]
    pub jwt_leeway_seconds: u64,
    /// When set, every token's `iss` must equal it; not checked when unset.
    #[arg(long, env = JWT_ISSUER_SETTING)]
    pub jwt_issuer: Option<String>,
    /// When set, every token's `aud` (a string or an array) must name it; not checked when unset.
    #[arg(long, env = JWT_AUDIENCE_SETTING)]
    pub jwt_audience: Option<String>,
    /// `development` allows the development secrets; production refuses them.
    #[arg(long, env = "APP_ENV", value_enum, default_value = "production")]
    pub mode: RunMode,
    /// The idempotency policy file (SPEC §3).
    #[arg(long, env = "POLICY_FILE", default_value = "policy.yaml")]
    pub policy_file: PathBuf,
    /// Give up on a bank call after this many milliseconds (the key becomes `unknown`); shorter
    /// than the policy's `stuck_after_minutes`.
    #[arg(long, env = "BANK_TIMEOUT_MS", default_value_t = 5000)]
    pub bank_timeout_ms: u64,
    /// The reconciler's pause when nothing is due, in milliseconds (above 0).
    #[arg(long, env = "RECONCILE_INTERVAL_MS", default_value_t = 1000)]
    pub reconcile_interval_ms: u64,
    /// The janitor's pause between expiry sweeps, in seconds (above 0).
    #[arg(long, env = "JANITOR_INTERVAL_SECONDS", default_value_t = 3600)]
    pub janitor_interval_seconds: u64,
    /// Days a key's audit trail is kept after the key expired (at most 3,650).
    #[arg(long, env = "AUDIT_TRAIL_KEEP_DAYS", default_value_t = 90)]
    pub audit_trail_keep_days: u64,
    /// The bounds on requests and bank calls.
    #[command(flatten)]
    pub limits: LimitSettings,
}

/// The validated configuration the application is built from.
#[derive(Debug, Clone)]
pub struct Config {
    /// `postgres://…` or `sqlite://PATH` (a secret: it may carry the database's password).
    pub database_url: SecretString,
    /// The bank's base URL.
    pub bank_url: String,
    /// The CA certificates the bank's certificate must chain to; the Mozilla roots if `None`.
    pub bank_ca_file: Option<PathBuf>,
    /// Listen address (port 0 picks a free port, as tests do).
    pub listen_addr: SocketAddr,
    /// Listen address of the admin listener (port 0 picks a free port).
    pub admin_addr: SocketAddr,
    /// HS256 secret for bearer tokens.
    pub jwt_secret: SecretString,
    /// HS256 secret for operator tokens (never the customers'); `None` (production without
    /// `OPERATOR_JWT_SECRET`): the operator API is closed to every token.
    pub operator_secret: Option<SecretString>,
    /// What every bearer token must carry besides a valid signature: the clock leeway, and
    /// the issuer and audience when set (the edge reads the same settings and verifies alike).
    pub token_rules: TokenRules,
    /// The idempotency policy.
    pub policy: Policy,
    /// Bank call timeout.
    pub bank_timeout: Duration,
    /// How long a request waits for a database connection before answering 503.
    pub database_acquire_timeout: Duration,
    /// Reconciler pause when idle.
    pub reconcile_interval: Duration,
    /// Janitor pause between sweeps.
    pub janitor_interval: Duration,
    /// How long a key's audit trail outlives the key.
    pub trail_kept_after_key: Duration,
    /// Whether the background workers run inside the server process.
    pub run_workers: bool,
    /// The bounds on requests and bank calls.
    pub limits: Limits,
}

impl Settings {
    /// Reads the secret settings from the environment and the policy file, and checks the
    /// settings; refuses the development secret outside development mode.
    pub fn into_config(self) -> anyhow::Result<Config> {
        let jwt_secret = read_secret(JWT_SECRET_SETTING, process_environment)?
            .unwrap_or_else(|| SecretString::from(DEVELOPMENT_JWT_SECRET));
        check_secret(
            jwt_secret.expose_secret().as_bytes(),
            self.mode == RunMode::Development,
        )?;
        let development = self.mode == RunMode::Development;
        let operator_secret = read_secret(OPERATOR_SECRET_SETTING, process_environment)?
            .or_else(|| development.then(|| SecretString::from(DEVELOPMENT_OPERATOR_SECRET)));
        if let Some(operator_secret) = &operator_secret {
            check_operator_secret(
                operator_secret.expose_secret().as_bytes(),
                jwt_secret.expose_secret().as_bytes(),
                development,
            )?;
        }
        let database_url = read_secret(DATABASE_URL_SETTING, process_environment)?
            .unwrap_or_else(|| SecretString::from(DEFAULT_DATABASE_URL));
        if self.mode == RunMode::Production && !self.allow_plaintext_transport {
            refuse_plaintext(&self.bank_url, database_url.expose_secret())?;
        }
        let policy_text = std::fs::read_to_string(&self.policy_file)
            .with_context(|| format!("reading the policy file {}", self.policy_file.display()))?;
        let policy = Policy::from_yaml(&policy_text)
            .with_context(|| format!("in {}", self.policy_file.display()))?;
        self.refuse_unsafe_timings(&policy)?;
        let bank_timeout = Duration::from_millis(self.bank_timeout_ms);
        let token_rules = TokenRules::new(
            self.jwt_leeway_seconds,
            self.jwt_issuer.clone(),
            self.jwt_audience.clone(),
        )?;
        Ok(Config {
            limits: self.limits.into_limits(bank_timeout, policy.max_wait)?,
            token_rules,
            database_url,
            bank_url: self.bank_url,
            bank_ca_file: self.bank_ca_file,
            listen_addr: self.listen_addr,
            admin_addr: self.admin_addr,
            jwt_secret,
            operator_secret,
            policy,
            bank_timeout,
            database_acquire_timeout: Duration::from_secs(3),
            reconcile_interval: Duration::from_millis(self.reconcile_interval_ms),
            janitor_interval: Duration::from_secs(self.janitor_interval_seconds),
            trail_kept_after_key: Duration::from_secs(self.audit_trail_keep_days * 86_400),
            run_workers: true,
        })
    }

    /// Refuses timings that would break the promise rather than merely slow things down: a
    /// bank call that may outlive `stuck_after` could still reach the bank after its claim was
    /// looked up and released (docs/design.md, "Configuration that cannot be unsafe"), and a
    /// zero interval would spin a worker.
    fn refuse_unsafe_timings(&self, policy: &Policy) -> anyhow::Result<()> {
        let bank_timeout = Duration::from_millis(self.bank_timeout_ms);
        if bank_timeout.is_zero() || bank_timeout >= policy.stuck_after {
            bail!(
                "BANK_TIMEOUT_MS must be above 0 and shorter than the policy's stuck_after_minutes \
                 ({} ms); it is {} ms",
                policy.stuck_after.as_millis(),
                self.bank_timeout_ms
            );
        }
        if self.reconcile_interval_ms == 0 {
            bail!("RECONCILE_INTERVAL_MS must be above 0");
        }
        if self.janitor_interval_seconds == 0 {
            bail!("JANITOR_INTERVAL_SECONDS must be above 0");
        }
        if self.audit_trail_keep_days > MAX_AUDIT_TRAIL_KEEP_DAYS {
            bail!("AUDIT_TRAIL_KEEP_DAYS must be at most {MAX_AUDIT_TRAIL_KEEP_DAYS}");
        }
        Ok(())
    }
}
