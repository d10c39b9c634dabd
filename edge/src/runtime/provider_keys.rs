//! The identity provider's keys as this isolate last fetched them, with the Workers `fetch`,
//! in `shared`'s [`KeySetCache`]: fetched at the first token, past the set's `max-age`, and for
//! a `kid` the set lacks, at most once per `AUTH_JWKS_REFETCH_SECONDS`; the last good set kept
//! while the provider cannot be reached. One fetch at a time per isolate: requests that need
//! one wait for the fetch in flight.

use std::cell::RefCell;
use std::pin::pin;
use std::rc::Rc;
use std::time::Duration;

use futures_util::future::{Either, select};
use futures_util::lock::Mutex;
use shared::auth::jwks::{KeySet, PublicKey};
use shared::auth::key_cache::{CachePolicy, KeyChoice, KeySetCache, max_age};
use shared::auth::{AuthError, TokenHeader};
use worker::{Delay, Fetch, Method, Request, console_error, console_log};

use super::clock::now_ms;
use super::web_crypto;

/// How long one fetch of the key set may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(3);

thread_local! {
    /// The cache, for the JWKS URL it was filled from (a new URL starts afresh).
    static CACHE: RefCell<Option<(String, KeySetCache)>> = const { RefCell::new(None) };
    /// Held by the fetch in flight.
    static FETCHING: Rc<Mutex<()>> = Rc::new(Mutex::new(()));
}

/// The key `header` names, from the set at `url`, fetched first when the cache says so.
pub async fn key_for(
    url: &str,
    policy: CachePolicy,
    header: &TokenHeader,
) -> Result<PublicKey, AuthError> {
    if let Some(chosen) = choose(url, policy, header) {
        return chosen;
    }
    let fetching = FETCHING.with(Rc::clone);
    let _only_fetch = fetching.lock().await;
    if let Some(chosen) = choose(url, policy, header) {
        return chosen;
    }
    let fetched = fetch(url).await;
    if fetched.is_some() {
        web_crypto::forget_imported_keys();
    }
    with_cache(url, policy, |cache| cache.record_fetch(fetched, now_ms()));
    choose(url, policy, header).unwrap_or(Err(AuthError::KeysUnavailable))
}

/// The cache's reply: a key or a refusal, or `None` to fetch first.
fn choose(
    url: &str,
    policy: CachePolicy,
    header: &TokenHeader,
) -> Option<Result<PublicKey, AuthError>> {
    with_cache(url, policy, |cache| match cache.choose(header, now_ms()) {
        KeyChoice::Use(key) => Some(Ok(key.clone())),
        KeyChoice::Refuse(refused) => Some(Err(refused)),
        KeyChoice::Fetch => None,
    })
}

fn with_cache<T>(url: &str, policy: CachePolicy, use_it: impl FnOnce(&mut KeySetCache) -> T) -> T {
    CACHE.with(|cell| {
        let mut held = cell.borrow_mut();
        if held
            .as_ref()
            .is_none_or(|(cached_url, _)| cached_url != url)
        {
            *held = Some((url.to_owned(), KeySetCache::new(policy)));
        }
        let (_, cache) = held.as_mut().expect("just filled");
        use_it(cache)
    })
}

/// One fetch: the set and its `max-age`, or `None` (logged) if it failed.
async fn fetch(url: &str) -> Option<(KeySet, Option<Duration>)> {
    let fetched = async {
        // A request built from the string, not a parsed `Url`: the `url` crate would add its
        // IDNA tables to the module; the runtime parses the URL itself.
        let request = Request::new(url, Method::Get).map_err(|error| error.to_string())?;
        let fetch = Fetch::Request(request);
        let request = pin!(fetch.send());
        let mut response = match select(request, pin!(Delay::from(FETCH_TIMEOUT))).await {
            Either::Left((response, _)) => response.map_err(|error| error.to_string())?,
            Either::Right(_) => return Err("no reply in time".to_owned()),
        };
        if !(200..300).contains(&response.status_code()) {
            return Err(format!("replied {}", response.status_code()));
        }
        let cache_control = response.headers().get("cache-control").ok().flatten();
        let bytes = response.bytes().await.map_err(|error| error.to_string())?;
        let keys = KeySet::parse(&bytes).map_err(|error| error.to_string())?;
        Ok::<_, String>((keys, cache_control.as_deref().and_then(max_age)))
    }
    .await;
    match fetched {
        Ok((keys, max_age)) => {
            for (kid, reason) in keys.left_out() {
                console_log!("a published key is left out ({kid:?}): {reason}");
            }
            Some((keys, max_age))
        }
        Err(error) => {
            console_error!("could not fetch the identity provider's keys from {url}: {error}");
            None
        }
    }
}
