//! [`UserId`]: the authenticated user, parsed from a token's user claim.

use std::fmt;
use std::num::NonZeroU64;

use serde::{Deserialize, Serialize};

/// The authenticated user: a positive integer, parsed from the token's user claim. At most
/// 2^63 − 1, so it fits a signed 64-bit database column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct UserId(NonZeroU64);

impl UserId {
    /// A user id from an integer in `1..=i64::MAX`.
    pub fn new(id: u64) -> Option<UserId> {
        i64::try_from(id).ok()?;
        NonZeroU64::new(id).map(UserId)
    }

    /// A user id read back from a signed column.
    pub fn from_i64(id: i64) -> Option<UserId> {
        u64::try_from(id).ok().and_then(UserId::new)
    }

    /// The user id a token's user claim names, if it is the canonical decimal of a valid id:
    /// ASCII digits only, no sign, no leading zero, no white space, no exponent.
    pub fn from_subject(sub: &str) -> Option<UserId> {
        let canonical = sub.bytes().all(|byte| byte.is_ascii_digit()) && !sub.starts_with('0');
        if !canonical {
            return None;
        }
        sub.parse::<u64>().ok().and_then(UserId::new)
    }

    /// The id as a number.
    pub fn get(self) -> u64 {
        self.0.get()
    }

    /// The id for a signed 64-bit column; always positive.
    pub fn as_i64(self) -> i64 {
        i64::try_from(self.0.get()).expect("UserId::new keeps ids within i64")
    }
}

impl fmt::Display for UserId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Subjects that are not the canonical decimal of a positive user id (the tests' corpus).
#[cfg(test)]
pub(crate) const NOT_USER_IDS: [&str; 13] = [
    "asha",
    "0",
    "-3",
    "042",
    "+42",
    " 42",
    "42 ",
    "4.2e1",
    "42.0",
    "0x2a",
    "",
    "9223372036854775808",
    "18446744073709551616",
];

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn only_the_canonical_decimal_of_a_positive_id_is_a_user() {
        for sub in NOT_USER_IDS {
            assert_eq!(UserId::from_subject(sub), None, "{sub:?}");
        }
        for (sub, id) in [
            ("1", 1),
            ("42", 42),
            ("9223372036854775807", i64::MAX as u64),
        ] {
            assert_eq!(UserId::from_subject(sub), UserId::new(id), "{sub}");
        }
    }
}
