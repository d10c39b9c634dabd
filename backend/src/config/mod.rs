//! Configuration: the policy file plus environment (SPEC §3, §7). Everything a deployment
//! changes is here; nothing else in the code is a setting.
//!
//! Every setting, its default and meaning: docs/configuration.md, generated from the
//! definitions below by [`reference`] (a test fails when the two differ), and `backend --help`.
//!
//! The three settings that hold secrets (the two token secrets, and the database URL with its
//! password) are read from the environment or from a mounted file, never from a flag
//! ([`secret_settings`]); every other setting is also a flag.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{ArgAction, Args, ValueEnum};
use shared::Policy;

pub mod bank;
pub mod cors;
pub mod drain;
pub mod identity;
pub mod limits;
pub mod reference;

pub use bank::{BankConfig, BankSettings};
pub use cors::{AllowedOrigins, CORS_ALLOWED_ORIGINS_SETTING};
pub use drain::{Drain, DrainSettings};
pub use identity::{Identity, IdentitySettings, TokenKeys};
pub use limits::{LimitSettings, Limits};

use crate::durability::{REPLICATION_SETTING, Replication};
use crate::telemetry::{LOG_FORMAT_SETTING, LogFormat};
use crate::transport_security::{ALLOW_PLAINTEXT_SETTING, BANK_CA_FILE_SETTING, refuse_plaintext};
use secret_settings::{ExposeSecret, SecretString, process_environment, read_secret};

/// The store when `DATABASE_URL` is not set: an embedded SQLite file under the working
/// directory, so a fresh machine needs nothing else installed.
pub const DEFAULT_DATABASE_URL: &str = "sqlite://data/payments.sqlite";

/// The setting naming the database (a secret: [`secret_settings`]).
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
    /// Origins whose web pages may call the public API (CORS), separated by commas, each as a
    /// browser sends it (`https://app.example.in`); never `*`. Unset or empty: CORS off.
    #[arg(long, env = CORS_ALLOWED_ORIGINS_SETTING)]
    pub cors_allowed_origins: Option<String>,
    /// How log lines are written: `text` for people, `json` (one object per line, with the
    /// request id and trace id) for a log pipeline.
    #[arg(long, env = LOG_FORMAT_SETTING, value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// `development` allows the development secrets; production refuses them.
    #[arg(long, env = "APP_ENV", value_enum, default_value = "production")]
    pub mode: RunMode,
    /// How commits must be replicated before they count (docs/operations.md, "A database that
    /// fails over"): `synchronous` (on a synchronous standby; the production default),
    /// `synchronous-strict` (and not ready while no standby acknowledges), or `none` (one
    /// server or SQLite; the development default, and production only when set).
    #[arg(long, env = REPLICATION_SETTING, value_enum)]
    pub database_replication: Option<Replication>,
    /// `false`: `serve` applies no migrations, and refuses to start until `backend migrate` (a
    /// release step, with a role that may change the schema) has applied them all, so the
    /// runtime role needs no DDL rights.
    #[arg(long, env = "MIGRATE_ON_START", default_value_t = true, action = ArgAction::Set)]
    pub migrate_on_start: bool,
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
    /// The bank's proxy and breaker.
    #[command(flatten)]
    pub bank: BankSettings,
    /// Tokens' keys and rules, and the edge's proof.
    #[command(flatten)]
    pub identity: IdentitySettings,
    /// How the backend stops on SIGTERM.
    #[command(flatten)]
    pub drain: DrainSettings,
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
    /// The origins whose pages may call the public API from a browser; none: CORS off.
    pub cors_allowed_origins: AllowedOrigins,
    /// Tokens' keys and rules (customers' and operators'), and the edge's proof.
    pub identity: Identity,
    /// How commits must be replicated, checked at start-up and by readiness.
    pub replication: Replication,
    /// The idempotency policy.
    pub policy: Policy,
    /// Bank call timeout.
    pub bank_timeout: Duration,
    /// The bank's proxy and breaker.
    pub bank: BankConfig,
    /// How long a request waits for a database connection before replying 503.
    pub database_acquire_timeout: Duration,
    /// Reconciler pause when idle.
    pub reconcile_interval: Duration,
    /// Janitor pause between sweeps.
    pub janitor_interval: Duration,
    /// How long a key's audit trail outlives the key.
    pub trail_kept_after_key: Duration,
    /// Whether the background workers run inside the server process.
    pub run_workers: bool,
    /// Whether `serve` applies the migrations (else it checks they were applied).
    pub migrate_on_start: bool,
    /// The bounds on requests and bank calls.
    pub limits: Limits,
    /// How the backend stops on SIGTERM.
    pub drain: Drain,
}

impl Settings {
    /// Reads the secret settings from the environment and the policy file, and checks the
    /// settings; refuses the development secret outside development mode.
    pub fn into_config(self) -> anyhow::Result<Config> {
        let development = self.mode == RunMode::Development;
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
        let identity = self
            .identity
            .into_identity(development, self.allow_plaintext_transport)?;
        let cors_allowed_origins =
            AllowedOrigins::parse(self.cors_allowed_origins.as_deref().unwrap_or_default())?;
        Ok(Config {
            limits: self.limits.into_limits(bank_timeout, policy.max_wait)?,
            identity,
            database_url,
            bank_url: self.bank_url,
            bank_ca_file: self.bank_ca_file,
            listen_addr: self.listen_addr,
            admin_addr: self.admin_addr,
            cors_allowed_origins,
            replication: self.database_replication.unwrap_or(if development {
                Replication::None
            } else {
                Replication::Synchronous
            }),
            policy,
            bank_timeout,
            bank: self.bank.into_bank_config(process_environment)?,
            database_acquire_timeout: Duration::from_secs(3),
            reconcile_interval: Duration::from_millis(self.reconcile_interval_ms),
            janitor_interval: Duration::from_secs(self.janitor_interval_seconds),
            trail_kept_after_key: Duration::from_secs(self.audit_trail_keep_days * 86_400),
            run_workers: true,
            migrate_on_start: self.migrate_on_start,
            drain: self.drain.into_drain(development)?,
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
