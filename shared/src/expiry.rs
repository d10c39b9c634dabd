//! A key's expiry on the wire: the `Idempotency-Expires` response header (SPEC §4).
//!
//! A key's life is decided once, when it is first claimed: the database's clock plus the policy's
//! `keep_keys_for_hours` in force at that claim, written on the key's row. Every reply to a
//! request whose key is stored carries that instant, so a client (and the edge, which keeps a
//! finished reply no longer) learns it from the reply itself rather than from a policy it would
//! have to read and a clock it would have to trust. The IETF draft leaves open how a server
//! publishes a key's expiry; this is the reply here.
//!
//! The value is an HTTP date (RFC 9110 §5.6.7, IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`),
//! rounded *down* to the second, so a reader never believes a key lives longer than it does.

use time::{Month, OffsetDateTime, PrimitiveDateTime, Time, UtcOffset, Weekday};

/// The response header that carries a key's expiry.
pub const EXPIRES_HEADER: &str = "idempotency-expires";

const WEEKDAYS: [(Weekday, &str); 7] = [
    (Weekday::Monday, "Mon"),
    (Weekday::Tuesday, "Tue"),
    (Weekday::Wednesday, "Wed"),
    (Weekday::Thursday, "Thu"),
    (Weekday::Friday, "Fri"),
    (Weekday::Saturday, "Sat"),
    (Weekday::Sunday, "Sun"),
];

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// `at` as an IMF-fixdate, in UTC, its fraction of a second dropped.
pub fn format_http_date(at: OffsetDateTime) -> String {
    let at = at.to_offset(UtcOffset::UTC);
    let weekday = WEEKDAYS
        .iter()
        .find(|(day, _)| *day == at.weekday())
        .map_or("Mon", |(_, name)| name);
    let month = MONTHS[usize::from(u8::from(at.month())) - 1];
    format!(
        "{weekday}, {:02} {month} {:04} {:02}:{:02}:{:02} GMT",
        at.day(),
        at.year(),
        at.hour(),
        at.minute(),
        at.second()
    )
}

/// The instant an IMF-fixdate names, or `None` for anything else (the obsolete RFC 850 and
/// asctime forms included: this header is ours, and only ever written as IMF-fixdate).
pub fn parse_http_date(text: &str) -> Option<OffsetDateTime> {
    let bytes = text.as_bytes();
    if !text.is_ascii() || bytes.len() != 29 || &text[3..5] != ", " || &text[25..] != " GMT" {
        return None;
    }
    let weekday = WEEKDAYS.iter().find(|(_, name)| *name == &text[..3])?.0;
    let number = |range: std::ops::Range<usize>| -> Option<u16> {
        let digits = text.get(range)?;
        digits
            .bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| digits.parse().ok())?
    };
    let separators = [(7, b' '), (11, b' '), (16, b' '), (19, b':'), (22, b':')];
    if separators.iter().any(|(at, byte)| bytes[*at] != *byte) {
        return None;
    }
    let month_index = MONTHS.iter().position(|name| *name == &text[8..11])?;
    let month = Month::try_from(u8::try_from(month_index + 1).ok()?).ok()?;
    let date = time::Date::from_calendar_date(
        i32::from(number(12..16)?),
        month,
        u8::try_from(number(5..7)?).ok()?,
    )
    .ok()?;
    let clock = Time::from_hms(
        u8::try_from(number(17..19)?).ok()?,
        u8::try_from(number(20..22)?).ok()?,
        u8::try_from(number(23..25)?).ok()?,
    )
    .ok()?;
    (date.weekday() == weekday).then(|| PrimitiveDateTime::new(date, clock).assume_utc())
}

#[cfg(test)]
mod tests {
    // Under wasm32 the same tests run through wasm-bindgen-test (see `.cargo/config.toml`).
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use time::macros::datetime;

    use super::*;

    #[test]
    fn formats_the_rfc_example_and_drops_the_fraction() {
        let at = datetime!(1994-11-06 08:49:37.999 UTC);
        assert_eq!(format_http_date(at), "Sun, 06 Nov 1994 08:49:37 GMT");
        let elsewhere = datetime!(2026-12-02 05:30:00 +05:30);
        assert_eq!(format_http_date(elsewhere), "Wed, 02 Dec 2026 00:00:00 GMT");
    }

    #[test]
    fn parses_what_it_formats() {
        for at in [
            datetime!(2026-01-01 00:00:00 UTC),
            datetime!(2026-12-31 23:59:59 UTC),
            datetime!(2028-02-29 12:00:01 UTC),
        ] {
            assert_eq!(parse_http_date(&format_http_date(at)), Some(at));
        }
    }

    #[test]
    fn refuses_anything_but_an_imf_fixdate() {
        for bad in [
            "",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
            "Mon, 06 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 31 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 24:49:37 GMT",
            "Sun, 06 Xyz 1994 08:49:37 GMT",
            "Sun, +6 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 08-49-37 GMT",
            "Sun, 06 Nov 1994 08:49:37 GMT ",
            "Sün, 06 Nov 1994 08:49:37 GMT",
        ] {
            assert_eq!(parse_http_date(bad), None, "{bad:?}");
        }
    }
}
