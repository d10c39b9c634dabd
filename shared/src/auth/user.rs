//! [`UserId`]: the authenticated user, the identity provider's subject as it wrote it.
//!
//! A user is the token's user claim (`sub` by default) taken as an opaque string: `auth0|64b…`,
//! a 28-character Firebase uid, a Cognito or Keycloak UUID, or `42` from a provider that numbers
//! its users. SPEC §3 bounds it as OpenID Connect does: 1-255 characters, each printable ASCII
//! (`!` to `~`: no space, no control character, nothing beyond ASCII), compared byte for byte.
//! Anything else is refused with a 401 that says why ([`SubjectError`]).

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use thiserror::Error;

/// The longest subject accepted, in bytes (OpenID Connect Core §2: at most 255 ASCII characters).
pub const MAX_SUBJECT_LEN: usize = 255;

/// The authenticated user: the token's subject, checked, shared cheaply between the tasks of a
/// request (cloning it copies a pointer).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UserId(Arc<str>);

/// Why a subject is not a user id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum SubjectError {
    /// The token has no user claim.
    #[error("the token has no user claim")]
    Missing,
    /// The claim is an empty string.
    #[error("the user claim is empty")]
    Empty,
    /// Longer than [`MAX_SUBJECT_LEN`] bytes.
    #[error("the user claim is longer than {MAX_SUBJECT_LEN} characters")]
    TooLong,
    /// A character outside printable ASCII (a space, a control character or non-ASCII).
    #[error("the user claim has a character other than printable ASCII (! to ~)")]
    BadCharacter,
}

impl UserId {
    /// The user a token's user claim names, if it is 1-255 characters of printable ASCII.
    pub fn from_subject(subject: &str) -> Result<UserId, SubjectError> {
        if subject.is_empty() {
            return Err(SubjectError::Empty);
        }
        if subject.len() > MAX_SUBJECT_LEN {
            return Err(SubjectError::TooLong);
        }
        if !subject.bytes().all(|byte| byte.is_ascii_graphic()) {
            return Err(SubjectError::BadCharacter);
        }
        Ok(UserId(Arc::from(subject)))
    }

    /// The user whose subject is the decimal of `number`, as providers that number their users
    /// (and this project's tools and tests) write it.
    pub fn numbered(number: u64) -> UserId {
        UserId(Arc::from(number.to_string()))
    }

    /// The subject, as the token wrote it and the database keeps it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for UserId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for UserId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

/// A user id as written by this release (a string) or by the releases before subjects were
/// opaque (a positive number: its decimal is the same user), so records saved by either read.
impl<'de> Deserialize<'de> for UserId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<UserId, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Subject(String),
            Number(u64),
        }
        match Written::deserialize(deserializer)? {
            Written::Subject(subject) => {
                UserId::from_subject(&subject).map_err(serde::de::Error::custom)
            }
            Written::Number(number) => Ok(UserId::numbered(number)),
        }
    }
}

/// Subjects that are not user ids, each with the reason (the tests' corpus).
#[cfg(test)]
pub(crate) const NOT_USER_IDS: [(&str, SubjectError); 6] = [
    ("", SubjectError::Empty),
    (" 42", SubjectError::BadCharacter),
    ("auth0|a b", SubjectError::BadCharacter),
    ("asha\n", SubjectError::BadCharacter),
    ("müller", SubjectError::BadCharacter),
    ("\u{7f}", SubjectError::BadCharacter),
];

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    /// Subjects as identity providers issue them.
    const PROVIDERS_SUBJECTS: [&str; 6] = [
        "42",
        "042",
        "auth0|64b1f3a2c9e77d0012345678",
        "google-oauth2|104857392019283746512",
        "Xq3fGk9LmP2rTn8VwZy4Ab1CdE7h",
        "8e03978e-40d5-43e8-bc93-6894a57f9324",
    ];

    #[test]
    fn providers_subjects_are_users_as_written() {
        for subject in PROVIDERS_SUBJECTS {
            let user = UserId::from_subject(subject).expect(subject);
            assert_eq!(user.as_str(), subject);
            assert_eq!(user.to_string(), subject);
        }
        // Compared byte for byte: no number is read out of a subject.
        assert_ne!(
            UserId::from_subject("042").expect("valid"),
            UserId::from_subject("42").expect("valid")
        );
        let longest = "a".repeat(MAX_SUBJECT_LEN);
        assert!(UserId::from_subject(&longest).is_ok());
    }

    #[test]
    fn a_subject_that_is_not_a_user_says_why() {
        for (subject, why) in NOT_USER_IDS {
            assert_eq!(UserId::from_subject(subject), Err(why), "{subject:?}");
        }
        let too_long = "a".repeat(MAX_SUBJECT_LEN + 1);
        assert_eq!(UserId::from_subject(&too_long), Err(SubjectError::TooLong));
    }

    #[test]
    fn numbered_users_are_their_decimal_subjects() {
        assert_eq!(
            UserId::numbered(42),
            UserId::from_subject("42").expect("valid")
        );
    }

    #[test]
    fn written_as_a_string_and_read_from_a_string_or_an_older_number() {
        let user = UserId::from_subject("auth0|7").expect("valid");
        assert_eq!(
            serde_json::to_string(&user).expect("writes"),
            r#""auth0|7""#
        );
        assert_eq!(
            serde_json::from_str::<UserId>(r#""auth0|7""#).ok(),
            Some(user)
        );
        assert_eq!(
            serde_json::from_str::<UserId>("42").ok(),
            Some(UserId::numbered(42))
        );
        assert!(serde_json::from_str::<UserId>(r#""""#).is_err());
    }
}
