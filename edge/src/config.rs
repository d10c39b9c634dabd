//! The edge's settings: the backend's URL and the forward timeout (`[vars]` in `wrangler.toml`),
//! the JWT secret (a wrangler secret; `.dev.vars` in development) and the idempotency policy,
//! compiled in from the repository's `policy.yaml` (the file the backend reads).
//!
//! The values arrive as strings from the runtime's environment; [`EdgeConfig::from_settings`]
//! checks them once per request, so a misconfigured Worker answers a clear 500 and logs which
//! setting is wrong instead of misbehaving. The policy is parsed and checked by the build
//! (`edge/build.rs`), so an invalid file stops the build with a message naming the field, and
//! the Worker holds the checked value.

use std::sync::OnceLock;
use std::time::Duration;

use shared::Policy;

/// The `[vars]` entry holding the backend's base URL, e.g. `http://127.0.0.1:8080`.
pub const BACKEND_URL_VAR: &str = "BACKEND_URL";

/// The secret holding the HS256 key that bearer tokens are signed with (the backend's
/// `AUTH_JWT_SECRET`).
pub const JWT_SECRET_VAR: &str = "AUTH_JWT_SECRET";

/// The optional `[vars]` entry bounding one forward to the backend, in milliseconds.
pub const BACKEND_TIMEOUT_VAR: &str = "BACKEND_TIMEOUT_MS";

/// How long the edge waits for the backend by default. Longer than the backend needs in the
/// worst case it still answers (a 3 s wait for a database connection plus a 5 s bank timeout,
/// `BANK_TIMEOUT_MS`), so a slow but live backend is not cut off.
pub const DEFAULT_BACKEND_TIMEOUT: Duration = Duration::from_secs(15);

/// How much longer than the forward timeout an in-flight mark lives. The Worker clears its own
/// mark when the forward ends (answered, failed or timed out); the mark's alarm only matters if
/// the Worker died mid-forward, and the margin covers the round trips to the Durable Object.
pub const IN_FLIGHT_MARK_MARGIN: Duration = Duration::from_secs(5);

/// The shortest secret accepted, as the backend requires.
pub const MIN_SECRET_LEN: usize = 32;

/// The checked settings of the Worker.
#[derive(Clone, PartialEq, Eq)]
pub struct EdgeConfig {
    /// The backend's base URL without a trailing slash; request paths are appended to it.
    backend_base: String,
    /// The HS256 secret, as bytes.
    jwt_secret: Vec<u8>,
    /// The bound on one forward to the backend.
    backend_timeout: Duration,
}

/// A setting that is missing or unusable. The message names the setting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A required setting is not set.
    #[error("{0} is not set")]
    Missing(&'static str),
    /// The backend URL is not an `http://` or `https://` URL.
    #[error("{BACKEND_URL_VAR} must be an http:// or https:// URL, not {0:?}")]
    BadBackendUrl(String),
    /// The secret is shorter than [`MIN_SECRET_LEN`].
    #[error("{JWT_SECRET_VAR} must be at least {MIN_SECRET_LEN} bytes")]
    ShortSecret,
    /// The timeout is not a positive whole number of milliseconds.
    #[error("{BACKEND_TIMEOUT_VAR} must be a positive whole number of milliseconds, not {0:?}")]
    BadTimeout(String),
    /// The in-flight mark (timeout plus [`IN_FLIGHT_MARK_MARGIN`]) would outlive the policy's
    /// `stuck_after`: the edge would answer 409 for a key the backend already reconciles.
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
    /// Checks the raw settings: the backend URL and the secret are required, the timeout is
    /// optional ([`DEFAULT_BACKEND_TIMEOUT`]) and its in-flight mark must end before the
    /// policy's `stuck_after`, so a key the edge holds is never one the backend reconciles.
    pub fn from_settings(
        backend_url: Option<String>,
        jwt_secret: Option<String>,
        backend_timeout_ms: Option<String>,
    ) -> Result<EdgeConfig, ConfigError> {
        let backend_url = backend_url.ok_or(ConfigError::Missing(BACKEND_URL_VAR))?;
        let backend_base = backend_url.trim().trim_end_matches('/').to_owned();
        let has_host = ["http://", "https://"]
            .iter()
            .filter_map(|scheme| backend_base.strip_prefix(scheme))
            .any(|rest| !rest.is_empty() && !rest.starts_with('/'));
        if !has_host {
            return Err(ConfigError::BadBackendUrl(backend_url));
        }
        let jwt_secret = jwt_secret.ok_or(ConfigError::Missing(JWT_SECRET_VAR))?;
        if jwt_secret.len() < MIN_SECRET_LEN {
            return Err(ConfigError::ShortSecret);
        }
        let backend_timeout = match backend_timeout_ms {
            None => DEFAULT_BACKEND_TIMEOUT,
            Some(text) => text
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|ms| *ms > 0)
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
        Ok(EdgeConfig {
            backend_base,
            jwt_secret: jwt_secret.into_bytes(),
            backend_timeout,
        })
    }

    /// The backend URL for a request's path and query (`/v1/...?...`).
    pub fn backend_url_for(&self, path_and_query: &str) -> String {
        format!("{}{path_and_query}", self.backend_base)
    }

    /// The HS256 secret.
    pub fn jwt_secret(&self) -> &[u8] {
        &self.jwt_secret
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
}

/// Not derived: the secret must never reach a log.
impl std::fmt::Debug for EdgeConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EdgeConfig")
            .field("backend_base", &self.backend_base)
            .field("backend_timeout", &self.backend_timeout)
            .finish_non_exhaustive()
    }
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

    use super::*;

    const SECRET: &str = "a-secret-that-is-at-least-32-bytes-long";

    fn config(url: &str, timeout: Option<&str>) -> Result<EdgeConfig, ConfigError> {
        EdgeConfig::from_settings(
            Some(url.to_owned()),
            Some(SECRET.to_owned()),
            timeout.map(str::to_owned),
        )
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
            EdgeConfig::from_settings(None, Some(SECRET.to_owned()), None),
            Err(ConfigError::Missing(BACKEND_URL_VAR))
        );
        assert_eq!(
            EdgeConfig::from_settings(Some("http://b".to_owned()), None, None),
            Err(ConfigError::Missing(JWT_SECRET_VAR))
        );
        for url in ["127.0.0.1:8080", "ftp://b", "http://", "http:///x"] {
            assert!(
                matches!(config(url, None), Err(ConfigError::BadBackendUrl(_))),
                "{url}"
            );
        }
        assert_eq!(
            EdgeConfig::from_settings(Some("http://b".to_owned()), Some("short".to_owned()), None),
            Err(ConfigError::ShortSecret)
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
    fn debug_output_never_shows_the_secret() {
        let edge = config("http://b", None).expect("valid");
        assert!(!format!("{edge:?}").contains(SECRET));
    }
}
