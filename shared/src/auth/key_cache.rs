//! When to fetch an identity provider's keys again: [`KeySetCache`], the same rules at the edge
//! (whose isolate keeps one) and the backend (one per process). No I/O here: the cache says
//! [`KeyChoice::Fetch`], the caller fetches the JWKS and hands the result to
//! [`KeySetCache::record_fetch`], and asks again.
//!
//! - The set is kept for its response's `Cache-Control: max-age`, held within
//!   [`CachePolicy`]'s bounds (a provider that says `no-store` is still not fetched on every
//!   request; one that says a year is still looked at daily).
//! - A token naming a `kid` the set lacks (a key just rotated in) triggers a fetch, but fetches
//!   are at most one per [`CachePolicy::refetch_every`]: a flood of tokens with random `kid`s
//!   is a flood of 401s, not a flood of requests to the provider.
//! - A fetch that fails keeps the last good set, so keys keep verifying while the provider is
//!   unreachable, but only for [`CachePolicy::max_stale`] past the set's `max-age`: after that a
//!   key the provider has revoked meanwhile could still be in it, so tokens are refused
//!   ([`AuthError::ProviderKeysTooOld`]) until a fetch succeeds. With no set at all, tokens are
//!   refused until a fetch succeeds.

use std::time::Duration;

use super::compact::TokenHeader;
use super::error::AuthError;
use super::jwks::{KeySet, PublicKey};

/// The bounds of the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CachePolicy {
    /// The shortest a set is kept, whatever its `max-age` says.
    pub min_max_age: Duration,
    /// The longest a set is kept.
    pub max_max_age: Duration,
    /// How long a set is kept when its response says nothing.
    pub default_max_age: Duration,
    /// The least time between two fetches (for an unknown `kid`, a stale set, or after a
    /// failure).
    pub refetch_every: Duration,
    /// How long past its `max-age` a set is still used while fetches fail.
    pub max_stale: Duration,
}

impl Default for CachePolicy {
    /// Kept 5 minutes unless the provider says otherwise (within 1 minute and 1 day); at most
    /// one fetch every 5 seconds; used up to an hour past that while the provider is down.
    fn default() -> Self {
        CachePolicy {
            min_max_age: Duration::from_secs(60),
            max_max_age: Duration::from_secs(24 * 3600),
            default_max_age: Duration::from_secs(300),
            refetch_every: Duration::from_secs(5),
            max_stale: Duration::from_secs(3600),
        }
    }
}

/// What to do for one token's key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyChoice<'k> {
    /// Verify with this key.
    Use(&'k PublicKey),
    /// Fetch the set first (then record it and choose again).
    Fetch,
    /// Refuse the token (401) for this reason.
    Refuse(AuthError),
}

/// The last good key set and when to look again; time is in milliseconds on the caller's
/// monotonic clock.
#[derive(Debug, Clone, Default)]
pub struct KeySetCache {
    policy: CachePolicy,
    keys: Option<KeySet>,
    fresh_until_ms: u64,
    last_fetch_ms: Option<u64>,
}

impl KeySetCache {
    /// An empty cache under `policy`.
    pub fn new(policy: CachePolicy) -> KeySetCache {
        KeySetCache {
            policy,
            ..KeySetCache::default()
        }
    }

    /// The key for a token with `header` at `now_ms`, or whether to fetch first.
    pub fn choose(&self, header: &TokenHeader, now_ms: u64) -> KeyChoice<'_> {
        let may_fetch = self
            .last_fetch_ms
            .is_none_or(|last| now_ms >= last.saturating_add(millis(self.policy.refetch_every)));
        let Some(keys) = &self.keys else {
            return if may_fetch {
                KeyChoice::Fetch
            } else {
                KeyChoice::Refuse(AuthError::KeysUnavailable)
            };
        };
        let too_old = now_ms
            >= self
                .fresh_until_ms
                .saturating_add(millis(self.policy.max_stale));
        if too_old {
            return if may_fetch {
                KeyChoice::Fetch
            } else {
                KeyChoice::Refuse(AuthError::ProviderKeysTooOld)
            };
        }
        match keys.key_for(header) {
            Ok(_) if may_fetch && now_ms >= self.fresh_until_ms => KeyChoice::Fetch,
            Ok(key) => KeyChoice::Use(key),
            Err(AuthError::UnknownKey) if may_fetch => KeyChoice::Fetch,
            Err(refused) => KeyChoice::Refuse(refused),
        }
    }

    /// Records a fetch that ended at `now_ms`: the set and the `max-age` its response gave,
    /// or `None` if it failed (the last good set is kept).
    pub fn record_fetch(&mut self, fetched: Option<(KeySet, Option<Duration>)>, now_ms: u64) {
        self.last_fetch_ms = Some(now_ms);
        if let Some((keys, max_age)) = fetched {
            let kept = max_age
                .unwrap_or(self.policy.default_max_age)
                .clamp(self.policy.min_max_age, self.policy.max_max_age);
            self.fresh_until_ms = now_ms.saturating_add(millis(kept));
            self.keys = Some(keys);
        }
    }

    /// The set held now, if any.
    pub fn keys(&self) -> Option<&KeySet> {
        self.keys.as_ref()
    }
}

/// The `max-age` of a `Cache-Control` header value (`no-store` and `no-cache` count as 0).
pub fn max_age(cache_control: &str) -> Option<Duration> {
    cache_control
        .split(',')
        .map(str::trim)
        .find_map(|directive| {
            let lower = directive.to_ascii_lowercase();
            if lower == "no-store" || lower == "no-cache" {
                return Some(Duration::ZERO);
            }
            let seconds = lower.strip_prefix("max-age=")?;
            seconds
                .trim_matches('"')
                .parse()
                .ok()
                .map(Duration::from_secs)
        })
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use serde_json::json;

    use super::*;

    fn set_of(kids: &[&str]) -> KeySet {
        let point = URL_SAFE_NO_PAD.encode([7; 32]);
        let keys: Vec<_> = kids
            .iter()
            .map(|kid| json!({"kty": "EC", "crv": "P-256", "kid": kid, "x": point, "y": point}))
            .collect();
        KeySet::parse(json!({ "keys": keys }).to_string().as_bytes()).expect("a JWKS")
    }

    fn token(kid: &str) -> TokenHeader {
        TokenHeader {
            alg: "ES256".to_owned(),
            kid: Some(kid.to_owned()),
        }
    }

    fn used(choice: KeyChoice<'_>) -> Option<String> {
        match choice {
            KeyChoice::Use(key) => Some(key.kid().to_owned()),
            _ => None,
        }
    }

    #[test]
    fn a_set_is_used_through_an_outage_up_to_its_staleness_bound_then_refused() {
        let policy = CachePolicy {
            max_stale: Duration::from_secs(600),
            ..CachePolicy::default()
        };
        let mut cache = KeySetCache::new(policy);
        cache.record_fetch(Some((set_of(&["a"]), Some(Duration::from_secs(120)))), 0);
        // Stale at 120 s: fetched, the provider is down, the old set still verifies.
        assert_eq!(cache.choose(&token("a"), 120_000), KeyChoice::Fetch);
        cache.record_fetch(None, 120_000);
        assert_eq!(used(cache.choose(&token("a"), 120_001)), Some("a".into()));
        // 600 s past its max-age and the provider still down: refused, not used.
        let bound = 720_000;
        assert_eq!(cache.choose(&token("a"), bound - 1), KeyChoice::Fetch);
        cache.record_fetch(None, bound - 1);
        assert_eq!(used(cache.choose(&token("a"), bound - 1)), Some("a".into()));
        assert_eq!(
            cache.choose(&token("a"), bound),
            KeyChoice::Refuse(AuthError::ProviderKeysTooOld)
        );
        // The provider replies again: the new set is used at once.
        assert_eq!(cache.choose(&token("a"), bound + 5_000), KeyChoice::Fetch);
        cache.record_fetch(Some((set_of(&["a"]), None)), bound + 5_000);
        assert_eq!(
            used(cache.choose(&token("a"), bound + 5_001)),
            Some("a".into())
        );
    }

    #[test]
    fn the_first_token_fetches_then_the_set_is_kept_for_its_max_age() {
        let mut cache = KeySetCache::new(CachePolicy::default());
        assert_eq!(cache.choose(&token("a"), 0), KeyChoice::Fetch);
        cache.record_fetch(Some((set_of(&["a"]), Some(Duration::from_secs(120)))), 0);
        assert_eq!(used(cache.choose(&token("a"), 119_999)), Some("a".into()));
        assert_eq!(
            cache.choose(&token("a"), 120_000),
            KeyChoice::Fetch,
            "stale"
        );
    }

    #[test]
    fn a_rotated_in_key_is_fetched_once_and_a_flood_of_unknown_kids_fetches_rarely() {
        let mut cache = KeySetCache::new(CachePolicy::default());
        cache.record_fetch(Some((set_of(&["old"]), None)), 0);
        // A new key appears in a token 10 s later: one fetch.
        assert_eq!(cache.choose(&token("new"), 10_000), KeyChoice::Fetch);
        cache.record_fetch(Some((set_of(&["old", "new"]), None)), 10_000);
        assert_eq!(
            used(cache.choose(&token("new"), 10_001)),
            Some("new".into())
        );
        assert_eq!(
            used(cache.choose(&token("old"), 10_001)),
            Some("old".into())
        );
        // A thousand random kids over the next 20 s: a fetch every 5 s at most.
        let mut fetches = 0;
        for i in 0..1_000_u64 {
            let now = 10_001 + i * 20;
            if cache.choose(&token(&format!("forged-{i}")), now) == KeyChoice::Fetch {
                fetches += 1;
                cache.record_fetch(Some((set_of(&["old", "new"]), None)), now);
            }
        }
        assert!(fetches <= 5, "{fetches} fetches");
        assert_eq!(
            cache.choose(&token("forged"), 10_002),
            KeyChoice::Refuse(AuthError::UnknownKey)
        );
    }

    #[test]
    fn a_provider_that_cannot_be_reached_leaves_the_last_good_set_in_use() {
        let mut cache = KeySetCache::new(CachePolicy::default());
        cache.record_fetch(None, 0);
        assert_eq!(
            cache.choose(&token("a"), 1),
            KeyChoice::Refuse(AuthError::KeysUnavailable)
        );
        assert_eq!(cache.choose(&token("a"), 5_000), KeyChoice::Fetch);
        cache.record_fetch(Some((set_of(&["a"]), Some(Duration::from_secs(60)))), 5_000);
        // Long past its max-age, the provider down: the stale set keeps verifying between tries.
        let later = 3_600_000;
        assert_eq!(cache.choose(&token("a"), later), KeyChoice::Fetch);
        cache.record_fetch(None, later);
        assert_eq!(used(cache.choose(&token("a"), later + 1)), Some("a".into()));
    }

    #[test]
    fn max_age_is_held_within_bounds_and_read_from_cache_control() {
        let policy = CachePolicy::default();
        let mut cache = KeySetCache::new(policy);
        cache.record_fetch(Some((set_of(&["a"]), max_age("no-store"))), 0);
        assert_eq!(
            used(cache.choose(&token("a"), 59_999)),
            Some("a".into()),
            "a minute at least"
        );
        cache.record_fetch(
            Some((set_of(&["a"]), Some(Duration::from_secs(10_000_000)))),
            0,
        );
        assert_eq!(
            cache.choose(&token("a"), 24 * 3_600_000),
            KeyChoice::Fetch,
            "a day at most"
        );
        assert_eq!(
            max_age("public, max-age=3600, must-revalidate"),
            Some(Duration::from_secs(3600))
        );
        assert_eq!(max_age("Max-Age=\"60\""), Some(Duration::from_secs(60)));
        assert_eq!(max_age("public"), None);
    }

    #[test]
    fn a_token_without_kid_or_with_the_wrong_algorithm_fetches_nothing() {
        let mut cache = KeySetCache::new(CachePolicy::default());
        cache.record_fetch(Some((set_of(&["a"]), None)), 0);
        let no_kid = TokenHeader {
            alg: "ES256".to_owned(),
            kid: None,
        };
        assert_eq!(
            cache.choose(&no_kid, 10_000),
            KeyChoice::Refuse(AuthError::MissingKeyId)
        );
        let wrong = TokenHeader {
            alg: "HS256".to_owned(),
            kid: Some("a".to_owned()),
        };
        assert_eq!(
            cache.choose(&wrong, 10_000),
            KeyChoice::Refuse(AuthError::WrongAlgorithm)
        );
    }
}
