//! The `Prefer: wait=N` request preference (RFC 7240), as the edge and the backend read it.
//!
//! A retry sent with `Prefer: wait=N` while its key's first attempt is still running waits up to
//! N seconds (never more than the policy's `max_wait_seconds`) for that attempt's final reply
//! and gets it as a replay, with `Preference-Applied: wait=N` naming the wait it was given;
//! when the wait runs out it gets the usual 409 (SPEC §4).
//!
//! A preference is a hint, never an error (RFC 7240 §2): a `Prefer` header this module cannot
//! read, a `wait` whose value is not a whole number of seconds, or `wait=0` all mean "do not
//! wait". Several `Prefer` headers and comma-separated preferences are read in order, and the
//! first `wait` counts (RFC 7240 §2: a repeated preference is read as its first occurrence).

use std::time::Duration;

/// The request header carrying preferences.
pub const PREFER_HEADER: &str = "prefer";

/// The response header naming the preferences that were honoured.
pub const PREFERENCE_APPLIED_HEADER: &str = "preference-applied";

/// The wait a request asks for in its `Prefer` header values, capped at `cap`; `None` when it
/// asks for none, for zero, or `cap` is zero (waiting is off).
pub fn requested_wait<'a>(
    header_values: impl IntoIterator<Item = &'a [u8]>,
    cap: Duration,
) -> Option<Duration> {
    let wait = wait_in(header_values)?.min(cap);
    (!wait.is_zero()).then_some(wait)
}

/// The `wait` named in `Prefer` or `Preference-Applied` header values (the two share their
/// syntax, RFC 7240 §3), uncapped; `None` when there is none, or it is unreadable or zero.
pub fn wait_in<'a>(header_values: impl IntoIterator<Item = &'a [u8]>) -> Option<Duration> {
    let seconds = header_values
        .into_iter()
        .filter_map(|value| std::str::from_utf8(value).ok())
        .flat_map(split_outside_quotes)
        .find_map(wait_seconds)?;
    (seconds > 0).then(|| Duration::from_secs(seconds))
}

/// `wait=N`, N the whole seconds of `wait`: the value of a `Prefer` header that asks for it, and
/// of the `Preference-Applied` header of a reply given after it.
pub fn wait_value(wait: Duration) -> String {
    format!("wait={}", wait.as_secs())
}

/// The seconds of a `wait` preference, `Some(0)` for an unreadable value (so that it still
/// counts as the first `wait` and a later one is not taken instead), or `None` for another
/// preference. Parameters after `;` are ignored; the value may be a quoted string.
fn wait_seconds(preference: &str) -> Option<u64> {
    let name_and_value = preference.split(';').next().unwrap_or_default();
    let (name, value) = match name_and_value.split_once('=') {
        Some((name, value)) => (name.trim(), value.trim()),
        None => (name_and_value.trim(), ""),
    };
    if !name.eq_ignore_ascii_case("wait") {
        return None;
    }
    let value = value
        .strip_prefix('"')
        .and_then(|quoted| quoted.strip_suffix('"'))
        .unwrap_or(value);
    if value.is_empty() || !value.bytes().all(|byte| byte.is_ascii_digit()) {
        return Some(0);
    }
    // delta-seconds too large for a u64 are "very long", which the cap bounds anyway.
    Some(value.parse().unwrap_or(u64::MAX))
}

/// Splits a header value at the commas that are not inside a quoted string.
fn split_outside_quotes(value: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (at, character) in value.char_indices() {
        match character {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            ',' if !quoted => {
                parts.push(&value[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    parts.push(&value[start..]);
    parts
}

#[cfg(test)]
mod tests {
    // Under wasm32 the same tests run through wasm-bindgen-test (see `.cargo/config.toml`).
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    const CAP: Duration = Duration::from_secs(10);

    fn wait(values: &[&str]) -> Option<u64> {
        requested_wait(values.iter().map(|value| value.as_bytes()), CAP).map(|w| w.as_secs())
    }

    #[test]
    fn a_wait_in_seconds_is_read_and_capped() {
        assert_eq!(wait(&["wait=4"]), Some(4));
        assert_eq!(wait(&["WAIT = 4"]), Some(4));
        assert_eq!(wait(&["wait=\"7\""]), Some(7));
        assert_eq!(wait(&["wait=10"]), Some(10));
        assert_eq!(wait(&["wait=600"]), Some(10));
        assert_eq!(wait(&["wait=99999999999999999999999"]), Some(10));
    }

    #[test]
    fn other_preferences_and_parameters_are_skipped() {
        assert_eq!(wait(&["respond-async, wait=3"]), Some(3));
        assert_eq!(wait(&["return=minimal; foo=\"a,b\", wait=3;x=1"]), Some(3));
        assert_eq!(wait(&["return=minimal", "wait=5"]), Some(5));
        assert_eq!(wait(&["respond-async"]), None);
        assert_eq!(wait(&["waiting=5"]), None);
        assert_eq!(wait(&[]), None);
    }

    #[test]
    fn the_first_wait_counts() {
        assert_eq!(wait(&["wait=2, wait=9"]), Some(2));
        assert_eq!(wait(&["wait=2", "wait=9"]), Some(2));
        assert_eq!(
            wait(&["wait=abc, wait=9"]),
            None,
            "an unreadable first wait"
        );
    }

    #[test]
    fn unreadable_or_zero_waits_mean_no_wait_never_an_error() {
        for value in [
            "wait=0",
            "wait=",
            "wait",
            "wait=-1",
            "wait=1.5",
            "wait=+3",
            "wait=3s",
            "wait=\"\"",
            "wait=\"3",
            ",,,",
            "=",
            ";",
        ] {
            assert_eq!(wait(&[value]), None, "{value}");
        }
        let not_utf8: &[u8] = &[0x77, 0x61, 0x69, 0x74, 0x3d, 0xff];
        assert_eq!(requested_wait([not_utf8], CAP), None);
    }

    #[test]
    fn a_zero_cap_turns_waiting_off() {
        assert_eq!(requested_wait([b"wait=5".as_slice()], Duration::ZERO), None);
    }

    #[test]
    fn a_wait_is_written_in_whole_seconds_and_read_back() {
        assert_eq!(wait_value(Duration::from_secs(8)), "wait=8");
        let applied = wait_value(Duration::from_secs(8));
        assert_eq!(wait_in([applied.as_bytes()]), Some(Duration::from_secs(8)));
    }
}
