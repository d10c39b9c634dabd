//! [`ProviderKeys`]: the identity provider's published keys (`AUTH_JWKS_URL`, or a file), held
//! in `shared`'s [`KeySetCache`] and fetched when it says so: at the first token, when the set
//! is past its `max-age`, and for a `kid` the set lacks (a key rotated in), never more than once
//! per few seconds. One fetch at a time: requests that need the same fetch wait for it rather
//! than each starting one. A fetch that fails keeps the last good set.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use shared::auth::jwks::{KeySet, PublicKey};
use shared::auth::key_cache::{CachePolicy, KeyChoice, KeySetCache, max_age};
use shared::auth::{AuthError, TokenHeader};

/// How long one fetch of the key set may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(3);

/// The largest key set read (a real one is a few kilobytes).
const MAX_KEY_SET_BYTES: usize = 1 << 20;

/// Where the keys are published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// A JWKS URL (the provider's `jwks_uri`).
    Url(String),
    /// A JWKS file (mounted beside the process), read again whenever a fetch is due.
    File(PathBuf),
}

/// The provider's keys, as this process last fetched them.
#[derive(Debug)]
pub struct ProviderKeys {
    source: KeySource,
    http: reqwest::Client,
    cache: Mutex<KeySetCache>,
    /// Held by the one fetch in flight.
    fetching: tokio::sync::Mutex<()>,
    /// The cache's clock starts here.
    started: Instant,
    fetches: AtomicU64,
}

impl ProviderKeys {
    /// The keys at `source`, cached under `policy`, fetched with `http`.
    pub fn new(source: KeySource, policy: CachePolicy, http: reqwest::Client) -> ProviderKeys {
        ProviderKeys {
            source,
            http,
            cache: Mutex::new(KeySetCache::new(policy)),
            fetching: tokio::sync::Mutex::new(()),
            started: Instant::now(),
            fetches: AtomicU64::new(0),
        }
    }

    /// The key a token's header names, fetching the set first if the cache says so.
    pub async fn key_for(&self, header: &TokenHeader) -> Result<PublicKey, AuthError> {
        if let Some(chosen) = self.choose(header) {
            return chosen;
        }
        let _only_fetch = self.fetching.lock().await;
        if let Some(chosen) = self.choose(header) {
            return chosen; // fetched meanwhile by whoever held the lock
        }
        let fetched = self.fetch().await;
        self.lock().record_fetch(fetched, self.now_ms());
        self.choose(header)
            .unwrap_or(Err(AuthError::KeysUnavailable))
    }

    /// How many fetches were made (for the tests' and operators' eyes).
    pub fn fetches(&self) -> u64 {
        self.fetches.load(Ordering::Relaxed)
    }

    /// The cache's reply: a key or a refusal, or `None` to fetch first.
    fn choose(&self, header: &TokenHeader) -> Option<Result<PublicKey, AuthError>> {
        match self.lock().choose(header, self.now_ms()) {
            KeyChoice::Use(key) => Some(Ok(key.clone())),
            KeyChoice::Refuse(refused) => Some(Err(refused)),
            KeyChoice::Fetch => None,
        }
    }

    /// One fetch: the set and its `max-age`, or `None` (logged) if it failed.
    async fn fetch(&self) -> Option<(KeySet, Option<Duration>)> {
        self.fetches.fetch_add(1, Ordering::Relaxed);
        let fetched = match &self.source {
            KeySource::Url(url) => self.fetch_url(url).await,
            KeySource::File(path) => std::fs::read(path)
                .map(|bytes| (bytes, None))
                .map_err(|error| format!("reading {}: {error}", path.display())),
        };
        let parsed = fetched.and_then(|(bytes, max_age)| {
            KeySet::parse(&bytes)
                .map(|keys| (keys, max_age))
                .map_err(|error| error.to_string())
        });
        match parsed {
            Ok((keys, max_age)) => {
                for (kid, reason) in keys.left_out() {
                    tracing::warn!(kid = kid.as_deref(), %reason, "a published key is left out");
                }
                tracing::info!(keys = keys.keys().len(), "identity provider's keys fetched");
                Some((keys, max_age))
            }
            Err(error) => {
                tracing::warn!(%error, "could not fetch the identity provider's keys; the last good ones stay");
                None
            }
        }
    }

    async fn fetch_url(&self, url: &str) -> Result<(Vec<u8>, Option<Duration>), String> {
        let response = self
            .http
            .get(url)
            .timeout(FETCH_TIMEOUT)
            .send()
            .await
            .map_err(|error| format!("GET {url}: {error}"))?;
        if !response.status().is_success() {
            return Err(format!("GET {url} replied {}", response.status()));
        }
        let max_age = response
            .headers()
            .get(reqwest::header::CACHE_CONTROL)
            .and_then(|value| value.to_str().ok())
            .and_then(max_age);
        let bytes = response
            .bytes()
            .await
            .map_err(|error| format!("reading {url}: {error}"))?;
        if bytes.len() > MAX_KEY_SET_BYTES {
            return Err(format!("{url} is over {MAX_KEY_SET_BYTES} bytes"));
        }
        Ok((bytes.to_vec(), max_age))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, KeySetCache> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
}
