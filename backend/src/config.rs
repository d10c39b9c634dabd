//! Configuration: the policy file plus environment (SPEC §3, §7). Everything a deployment
//! changes is here; nothing else in the code is a setting.
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `DATABASE_URL` | `sqlite://data/payments.sqlite` | where keys and payments live: `postgres://…` for PostgreSQL (production; required for more than one replica), or `sqlite://PATH` for an embedded SQLite file (created if missing; one process only) |
//! | `BANK_URL` | `http://127.0.0.1:8081` | the partner bank (simulator) |
//! | `LISTEN_ADDR` | `127.0.0.1:8080` | where the API listens |
//! | `AUTH_JWT_SECRET` | a development default | HS256 secret for bearer tokens |
//! | `AUTH_JWT_LEEWAY_SECONDS` | `30` | clock leeway for `exp`, `nbf` and `iat` (at most 300) |
//! | `AUTH_JWT_ISSUER` | not checked | when set, every token's `iss` must equal it |
//! | `AUTH_JWT_AUDIENCE` | not checked | when set, every token's `aud` must name it |
//! | `APP_ENV` | `production` | `development` allows the development secret |
//! | `POLICY_FILE` | `policy.yaml` | the idempotency policy |
//! | `BANK_TIMEOUT_MS` | `5000` | give up on a bank call after this |
//! | `RECONCILE_INTERVAL_MS` | `1000` | pause of the reconciler when it finds nothing |
//! | `JANITOR_INTERVAL_SECONDS` | `3600` | pause of the janitor between sweeps |

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use shared::Policy;
use shared::auth::{
    DEFAULT_LEEWAY_SECONDS, DEVELOPMENT_JWT_SECRET, JWT_AUDIENCE_SETTING, JWT_ISSUER_SETTING,
    JWT_LEEWAY_SETTING, JWT_SECRET_SETTING, TokenRules, check_secret,
};

/// The store when `DATABASE_URL` is not set: an embedded SQLite file under the working
/// directory, so a fresh machine needs nothing else installed.
pub const DEFAULT_DATABASE_URL: &str = "sqlite://data/payments.sqlite";

/// Whether this is a developer's machine or a real deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RunMode {
    /// A developer's machine: the development secret is allowed.
    Development,
    /// A real deployment: a real secret is required.
    Production,
}

/// The settings as read from flags and environment.
#[derive(Debug, Clone, Args)]
pub struct Settings {
    /// `postgres://…` (production, several replicas) or `sqlite://PATH` (embedded, one process).
    #[arg(long, env = "DATABASE_URL", default_value = DEFAULT_DATABASE_URL)]
    pub database_url: String,
    /// The bank's base URL.
    #[arg(long, env = "BANK_URL", default_value = "http://127.0.0.1:8081")]
    pub bank_url: String,
    /// Listen address of the API.
    #[arg(long, env = "LISTEN_ADDR", default_value = "127.0.0.1:8080")]
    pub listen_addr: SocketAddr,
    /// HS256 secret for bearer tokens.
    #[arg(long, env = JWT_SECRET_SETTING, default_value = DEVELOPMENT_JWT_SECRET, hide_default_value = true)]
    pub jwt_secret: String,
    /// Clock leeway for a token's `exp`, `nbf` and `iat`, in seconds.
    #[arg(long, env = JWT_LEEWAY_SETTING, default_value_t = DEFAULT_LEEWAY_SECONDS)]
    pub jwt_leeway_seconds: u64,
    /// The `iss` every token must carry; not checked when unset.
    #[arg(long, env = JWT_ISSUER_SETTING)]
    pub jwt_issuer: Option<String>,
    /// The audience every token's `aud` must name; not checked when unset.
    #[arg(long, env = JWT_AUDIENCE_SETTING)]
    pub jwt_audience: Option<String>,
    /// `development` or `production`.
    #[arg(long, env = "APP_ENV", value_enum, default_value = "production")]
    pub mode: RunMode,
    /// The idempotency policy file.
    #[arg(long, env = "POLICY_FILE", default_value = "policy.yaml")]
    pub policy_file: PathBuf,
    /// Bank call timeout, in milliseconds.
    #[arg(long, env = "BANK_TIMEOUT_MS", default_value_t = 5000)]
    pub bank_timeout_ms: u64,
    /// Reconciler pause when idle, in milliseconds.
    #[arg(long, env = "RECONCILE_INTERVAL_MS", default_value_t = 1000)]
    pub reconcile_interval_ms: u64,
    /// Janitor pause between sweeps, in seconds.
    #[arg(long, env = "JANITOR_INTERVAL_SECONDS", default_value_t = 3600)]
    pub janitor_interval_seconds: u64,
}

/// The validated configuration the application is built from.
#[derive(Debug, Clone)]
pub struct Config {
    /// `postgres://…` or `sqlite://PATH`.
    pub database_url: String,
    /// The bank's base URL.
    pub bank_url: String,
    /// Listen address (port 0 picks a free port, as tests do).
    pub listen_addr: SocketAddr,
    /// HS256 secret for bearer tokens.
    pub jwt_secret: Vec<u8>,
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
    /// Whether the background workers run inside the server process.
    pub run_workers: bool,
}

impl Settings {
    /// What every bearer token must carry besides a valid signature: the leeway, and the issuer
    /// and audience when set. The edge reads the same settings (`wrangler.toml`), so both verify
    /// alike. Kept beside [`Config`] rather than in it: a `Config` built in code (tests) verifies
    /// with [`TokenRules::default`], and only a deployment configures more.
    pub fn token_rules(&self) -> anyhow::Result<TokenRules> {
        Ok(TokenRules::new(
            self.jwt_leeway_seconds,
            self.jwt_issuer.clone(),
            self.jwt_audience.clone(),
        )?)
    }

    /// Reads the policy file and checks the settings; refuses the development secret outside
    /// development mode.
    pub fn into_config(self) -> anyhow::Result<Config> {
        check_secret(
            self.jwt_secret.as_bytes(),
            self.mode == RunMode::Development,
        )?;
        let policy_text = std::fs::read_to_string(&self.policy_file)
            .with_context(|| format!("reading the policy file {}", self.policy_file.display()))?;
        let policy = Policy::from_yaml(&policy_text)
            .with_context(|| format!("in {}", self.policy_file.display()))?;
        self.refuse_unsafe_timings(&policy)?;
        Ok(Config {
            database_url: self.database_url,
            bank_url: self.bank_url,
            listen_addr: self.listen_addr,
            jwt_secret: self.jwt_secret.into_bytes(),
            policy,
            bank_timeout: Duration::from_millis(self.bank_timeout_ms),
            database_acquire_timeout: Duration::from_secs(3),
            reconcile_interval: Duration::from_millis(self.reconcile_interval_ms),
            janitor_interval: Duration::from_secs(self.janitor_interval_seconds),
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
        Ok(())
    }
}
