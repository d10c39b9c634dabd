//! The settings of the backend's side of the partner bank beyond its URL and timeout: the
//! proxy its calls go through (none unless set), the circuit breaker that refuses new
//! payments while the bank is failing (docs/design.md, "The bank port"), and the secrets the
//! bank signs its callbacks with (`BANK_CALLBACK_SECRET`, and `BANK_CALLBACK_SECRET_PREVIOUS`
//! while it rotates; read from the environment or a mounted file).

/// The setting of the secret the bank signs its callbacks with.
pub const CALLBACK_SECRET_SETTING: &str = "BANK_CALLBACK_SECRET";
/// The setting of the secret the bank signed with before its latest rotation.
pub const PREVIOUS_CALLBACK_SECRET_SETTING: &str = "BANK_CALLBACK_SECRET_PREVIOUS";
/// The shortest callback secret accepted.
const MIN_CALLBACK_SECRET_BYTES: usize = 32;

use std::time::Duration;

use anyhow::{Context, bail};
use clap::{ArgAction, Args};
use secret_settings::{SecretString, read_rotating_secret};

use crate::bank::BreakerSettings;

/// The bank settings as read from flags and environment.
#[derive(Debug, Clone, Args)]
pub struct BankSettings {
    /// An HTTP(S) proxy every bank call goes through. Unset, bank calls go direct: the
    /// process's `HTTP_PROXY`/`HTTPS_PROXY` are never honoured for the bank.
    #[arg(long, env = "BANK_PROXY_URL")]
    pub bank_proxy_url: Option<String>,
    /// `false` turns the bank breaker off: every payment is sent to a failing bank and waits
    /// out its timeout.
    #[arg(long, env = "BANK_BREAKER", default_value_t = true, action = ArgAction::Set)]
    pub bank_breaker: bool,
    /// How far back, in seconds, the breaker counts money-moving calls.
    #[arg(long, env = "BANK_BREAKER_WINDOW_SECONDS", default_value_t = defaults().window.as_secs())]
    pub bank_breaker_window_seconds: u64,
    /// The fewest calls in the window before the breaker may open.
    #[arg(long, env = "BANK_BREAKER_MIN_CALLS", default_value_t = defaults().min_calls)]
    pub bank_breaker_min_calls: u32,
    /// The share of calls in the window without a final reply (errors, timeouts) that opens
    /// the breaker, from 0 to 1.
    #[arg(long, env = "BANK_BREAKER_FAILURE_SHARE", default_value_t = defaults().failure_share)]
    pub bank_breaker_failure_share: f64,
    /// A call that took at least this many milliseconds is slow.
    #[arg(long, env = "BANK_BREAKER_SLOW_CALL_MS", default_value_t = millis(defaults().slow_call))]
    pub bank_breaker_slow_call_ms: u64,
    /// The share of slow calls in the window that opens the breaker, from 0 to 1.
    #[arg(long, env = "BANK_BREAKER_SLOW_SHARE", default_value_t = defaults().slow_share)]
    pub bank_breaker_slow_share: f64,
    /// Seconds the breaker stays open before it admits a probe (a real payment, one at a time).
    #[arg(long, env = "BANK_BREAKER_OPEN_SECONDS", default_value_t = defaults().open_for.as_secs())]
    pub bank_breaker_open_seconds: u64,
    /// Probes in a row that must get a final reply, in time, to close the breaker.
    #[arg(long, env = "BANK_BREAKER_PROBES", default_value_t = defaults().probes_to_close)]
    pub bank_breaker_probes: u32,
}

/// Each field of [`BreakerSettings`] with the setting that sets it, to name it in an error.
const BREAKER_SETTINGS: [(&str, &str); 7] = [
    ("window", "BANK_BREAKER_WINDOW_SECONDS"),
    ("min_calls", "BANK_BREAKER_MIN_CALLS"),
    ("failure_share", "BANK_BREAKER_FAILURE_SHARE"),
    ("slow_call", "BANK_BREAKER_SLOW_CALL_MS"),
    ("slow_share", "BANK_BREAKER_SLOW_SHARE"),
    ("open_for", "BANK_BREAKER_OPEN_SECONDS"),
    ("probes_to_close", "BANK_BREAKER_PROBES"),
];

fn defaults() -> BreakerSettings {
    BreakerSettings::default()
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The checked bank settings.
#[derive(Debug, Clone)]
pub struct BankConfig {
    /// The proxy bank calls go through; `None`: direct.
    pub proxy_url: Option<reqwest::Url>,
    /// The breaker's settings; `None`: no breaker.
    pub breaker: Option<BreakerSettings>,
    /// The secrets a callback's signature is checked under, the current first; empty: the
    /// callback route is closed.
    pub callback_secrets: Vec<SecretString>,
}

impl Default for BankConfig {
    /// Direct, with the default breaker.
    fn default() -> Self {
        BankConfig {
            proxy_url: None,
            breaker: Some(BreakerSettings::default()),
            callback_secrets: Vec::new(),
        }
    }
}

impl BankSettings {
    /// The checked settings; a bad one is named.
    pub(super) fn into_bank_config(
        self,
        environment: impl Fn(&str) -> Option<std::ffi::OsString>,
    ) -> anyhow::Result<BankConfig> {
        let proxy_url = self
            .bank_proxy_url
            .map(|url| reqwest::Url::parse(&url).context("BANK_PROXY_URL is not a URL"))
            .transpose()?;
        if let Some(url) = &proxy_url
            && !matches!(url.scheme(), "http" | "https")
        {
            bail!("BANK_PROXY_URL must be an http:// or https:// URL");
        }
        let breaker = BreakerSettings {
            window: Duration::from_secs(self.bank_breaker_window_seconds),
            min_calls: self.bank_breaker_min_calls,
            failure_share: self.bank_breaker_failure_share,
            slow_call: Duration::from_millis(self.bank_breaker_slow_call_ms),
            slow_share: self.bank_breaker_slow_share,
            open_for: Duration::from_secs(self.bank_breaker_open_seconds),
            probes_to_close: self.bank_breaker_probes,
        };
        breaker.check().map_err(|problem| {
            let setting = BREAKER_SETTINGS
                .iter()
                .find(|(field, _)| problem.starts_with(field))
                .map_or("BANK_BREAKER_*", |(_, setting)| setting);
            anyhow::anyhow!("{setting}: {problem}")
        })?;
        Ok(BankConfig {
            proxy_url,
            breaker: self.bank_breaker.then_some(breaker),
            callback_secrets: callback_secrets(environment)?,
        })
    }
}

/// The callback secrets, the current first: none, the current alone, or both while the bank
/// rotates; each at least 32 bytes, and a previous one only beside a current one.
fn callback_secrets(
    environment: impl Fn(&str) -> Option<std::ffi::OsString>,
) -> anyhow::Result<Vec<SecretString>> {
    read_rotating_secret(
        CALLBACK_SECRET_SETTING,
        PREVIOUS_CALLBACK_SECRET_SETTING,
        MIN_CALLBACK_SECRET_BYTES,
        environment,
    )
}
