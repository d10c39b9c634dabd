//! Which web pages may call the public API from a browser: `CORS_ALLOWED_ORIGINS`, a
//! comma-separated list of exact origins (`https://app.example.in`), checked at start-up into
//! [`AllowedOrigins`], the same rule at the edge and the backend. Unset or empty, the default,
//! turns CORS off. The backend replies to those origins' preflights and marks the replies they
//! may read (`backend/src/http/cors.rs`); the edge marks the replies it makes itself (its
//! replays and refusals) the same way.
//!
//! Exact origins only, never `*`: the API takes credentials (`Authorization`), and a wildcard
//! would let any page spend a token it got hold of. Each is written as a browser sends its
//! `Origin` header (lower case, no default port, no path), so a listed origin cannot silently
//! never match.

use thiserror::Error;

/// The setting listing the origins.
pub const CORS_ALLOWED_ORIGINS_SETTING: &str = "CORS_ALLOWED_ORIGINS";

/// The reply headers a page on a listed origin may read: those a retrying client needs.
pub const EXPOSED_HEADERS: [&str; 5] = [
    "idempotent-replayed",
    "idempotency-expires",
    "location",
    "retry-after",
    "preference-applied",
];

/// The origins whose pages may call the public API, as a browser writes them; none: CORS off.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedOrigins(Vec<String>);

/// Why `CORS_ALLOWED_ORIGINS` was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum OriginError {
    /// `*` among the origins.
    #[error(
        "{CORS_ALLOWED_ORIGINS_SETTING} may not be `*`: the API takes credentials \
         (Authorization); list each origin (https://app.example.in)"
    )]
    Wildcard,
    /// An entry that is not an origin.
    #[error(
        "{CORS_ALLOWED_ORIGINS_SETTING}: {entry:?} is not an origin (scheme://host[:port], as a \
         browser sends it): {why}"
    )]
    NotAnOrigin {
        /// The entry as listed.
        entry: String,
        /// What is wrong with it.
        why: &'static str,
    },
}

impl AllowedOrigins {
    /// The origins in `list` (comma-separated, spaces around each ignored); an error naming
    /// the setting and the entry for anything that is not an origin.
    pub fn parse(list: &str) -> Result<AllowedOrigins, OriginError> {
        if list.trim().is_empty() {
            return Ok(AllowedOrigins::default());
        }
        let origins = list
            .split(',')
            .map(|entry| check_origin(entry.trim()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(AllowedOrigins(origins))
    }

    /// Whether CORS is off (no origin listed).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The origins, in the order listed.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }

    /// Whether a request's `Origin` header value is listed (compared as sent: browsers write
    /// it in the listed form).
    pub fn allows(&self, origin: &str) -> bool {
        self.0.iter().any(|listed| listed == origin)
    }
}

/// `entry` as an origin (`scheme://host[:port]`, lower-cased), or why it is not one.
fn check_origin(entry: &str) -> Result<String, OriginError> {
    if entry == "*" {
        return Err(OriginError::Wildcard);
    }
    let origin = entry.to_ascii_lowercase();
    let refuse = |why: &'static str| OriginError::NotAnOrigin {
        entry: entry.to_owned(),
        why,
    };
    let (scheme, authority) = origin
        .split_once("://")
        .ok_or_else(|| refuse("no scheme"))?;
    let scheme_ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
    if !scheme_ok {
        return Err(refuse("a bad scheme"));
    }
    if authority.contains(['/', '?', '#']) {
        return Err(refuse(
            "an origin has no path, query or fragment (not even `/`)",
        ));
    }
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) if !port.contains(']') => (host, Some(port)),
        _ => (authority, None),
    };
    let bracketed_ip = host.starts_with('[')
        && host.ends_with(']')
        && host[1..host.len() - 1]
            .chars()
            .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.');
    let name = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
    if !(bracketed_ip || name) {
        return Err(refuse("a bad host"));
    }
    if let Some(port) = port {
        let number = port
            .parse::<u16>()
            .ok()
            .filter(|number| {
                *number > 0 && !port.starts_with('0') && port.chars().all(|c| c.is_ascii_digit())
            })
            .ok_or_else(|| refuse("a bad port"))?;
        if (scheme, number) == ("http", 80) || (scheme, number) == ("https", 443) {
            return Err(refuse("browsers leave the scheme's default port out"));
        }
    }
    Ok(origin)
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn unset_or_empty_turns_cors_off() {
        assert!(AllowedOrigins::parse("").expect("valid").is_empty());
        assert!(AllowedOrigins::parse("  ").expect("valid").is_empty());
    }

    #[test]
    fn origins_are_kept_as_a_browser_writes_them() {
        let origins = AllowedOrigins::parse(
            "https://app.example.in, HTTP://127.0.0.1:5173,http://[::1]:8000,capacitor://localhost",
        )
        .expect("valid");
        assert!(origins.allows("http://127.0.0.1:5173"));
        assert!(!origins.allows("http://127.0.0.1:5174"));
        assert_eq!(
            origins.iter().collect::<Vec<_>>(),
            [
                "https://app.example.in",
                "http://127.0.0.1:5173",
                "http://[::1]:8000",
                "capacitor://localhost",
            ]
        );
    }

    #[test]
    fn anything_but_an_origin_is_refused_naming_the_setting() {
        for (list, why) in [
            ("*", "may not be `*`"),
            ("https://app.example.in,*", "may not be `*`"),
            ("https://app.example.in/", "no path"),
            ("https://app.example.in/pay", "no path"),
            ("https://app.example.in?x=1", "no path"),
            ("app.example.in", "no scheme"),
            ("https://", "a bad host"),
            ("https://user@app.example.in", "a bad host"),
            ("https://app.example.in:0", "a bad port"),
            ("https://app.example.in:99999", "a bad port"),
            ("https://app.example.in:+1", "a bad port"),
            ("https://app.example.in:0443", "a bad port"),
            ("https://app.example.in:443", "default port"),
            ("https://a.example.in,,https://b.example.in", "no scheme"),
            ("1http://app.example.in", "a bad scheme"),
        ] {
            let error = AllowedOrigins::parse(list).expect_err(list).to_string();
            assert!(
                error.contains(CORS_ALLOWED_ORIGINS_SETTING),
                "{list}: {error}"
            );
            assert!(error.contains(why), "{list}: {error}");
        }
    }
}
