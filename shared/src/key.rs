//! The `Idempotency-Key` header value, parsed once at the boundary.
//!
//! The IETF draft (`draft-ietf-httpapi-idempotency-key-header`) makes the header an RFC 8941
//! Structured Field *string*: `Idempotency-Key: "8e03978e-40d5-43e8-bc93-6894a57f9324"`, with
//! `\"` and `\\` as its only escapes. Many clients send the bare value instead; we accept both.
//! Whatever the form, a key is 1 to 255 printable ASCII characters, and under the `uuid_v4`
//! format it must be a version-4, RFC 4122-variant UUID (the random kind: 122 random bits),
//! stored in its canonical lower-case hyphenated spelling so `ABC…` and `abc…` are one key.

use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use thiserror::Error;
use uuid::Uuid;

use crate::policy::KeyFormat;

/// The longest key accepted in any format, in characters.
pub const MAX_KEY_LEN: usize = 255;

/// A validated idempotency key. Build one with [`IdempotencyKey::parse_header`] or
/// [`IdempotencyKey::mint`]; its text is always 1–255 printable ASCII characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct IdempotencyKey(KeyRepr);

/// A v4 UUID is kept as one (16 bytes, and a `uuid` column in PostgreSQL); any other key as text.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum KeyRepr {
    Uuid(Uuid),
    Text(String),
}

/// Why an `Idempotency-Key` header value was refused. Each variant says what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum KeyError {
    /// The operation requires a key and none was sent.
    #[error("the Idempotency-Key header is required for this operation")]
    Missing,
    /// The header was sent more than once.
    #[error("the Idempotency-Key header was sent more than once")]
    Repeated,
    /// The header was present but empty (or only white space).
    #[error("the Idempotency-Key header is empty")]
    Empty,
    /// The key is longer than [`MAX_KEY_LEN`].
    #[error("the Idempotency-Key is {length} characters long; at most 255 are allowed")]
    TooLong {
        /// The length that was sent, in bytes.
        length: usize,
    },
    /// The key holds a byte that is not printable ASCII (a control character, CR/LF, non-ASCII).
    #[error("the Idempotency-Key contains a byte that is not printable ASCII (0x{byte:02x})")]
    NotPrintableAscii {
        /// The first offending byte.
        byte: u8,
    },
    /// The value starts with a quote but is not a valid RFC 8941 string item.
    #[error("the Idempotency-Key is not a valid Structured Field string: {reason}")]
    BadStructuredField {
        /// What the Structured Field parser objected to.
        reason: String,
    },
    /// The key is not a UUID at all, under the `uuid_v4` format.
    #[error("the Idempotency-Key must be a UUID (version 4)")]
    NotUuid,
    /// The key is a UUID of another version (v1, v7, …) or the nil UUID.
    #[error("the Idempotency-Key must be a version 4 UUID, not version {version}")]
    WrongUuidVersion {
        /// The version nibble that was sent (0 for the nil UUID).
        version: usize,
    },
    /// The key is a v4 UUID with a variant other than RFC 4122's.
    #[error("the Idempotency-Key must be an RFC 4122 (variant 1) UUID")]
    WrongUuidVariant,
}

impl IdempotencyKey {
    /// Parses a header value in the Structured Field string form (`"…"`) or the bare form,
    /// and checks it against the policy's key format.
    pub fn parse_header(value: &[u8], format: KeyFormat) -> Result<Self, KeyError> {
        let trimmed = value.trim_ascii();
        if trimmed.is_empty() {
            return Err(KeyError::Empty);
        }
        // The length cap comes first so a hostile 10 KB value costs no further work.
        // (A quoted value may carry two quotes and escapes beyond the key's own characters.)
        if trimmed.len() > 2 * MAX_KEY_LEN + 2 {
            return Err(KeyError::TooLong {
                length: trimmed.len(),
            });
        }
        if let Some(&byte) = trimmed.iter().find(|b| !is_printable_ascii(**b)) {
            return Err(KeyError::NotPrintableAscii { byte });
        }
        let text = if trimmed.starts_with(b"\"") {
            parse_sf_string(trimmed)?
        } else {
            // Printable ASCII was checked above, so this cannot fail.
            String::from_utf8_lossy(trimmed).into_owned()
        };
        Self::from_text(text, format)
    }

    /// Checks already-unquoted key text against the format.
    pub fn from_text(text: String, format: KeyFormat) -> Result<Self, KeyError> {
        if text.is_empty() {
            return Err(KeyError::Empty);
        }
        if text.len() > MAX_KEY_LEN {
            return Err(KeyError::TooLong { length: text.len() });
        }
        if let Some(byte) = text.bytes().find(|b| !is_printable_ascii(*b)) {
            return Err(KeyError::NotPrintableAscii { byte });
        }
        match format {
            KeyFormat::UuidV4 => parse_uuid_v4(&text).map(|uuid| Self(KeyRepr::Uuid(uuid))),
            KeyFormat::Any => Ok(Self(KeyRepr::Text(text))),
        }
    }

    /// Mints a fresh random v4 key, as a client does once per user action.
    pub fn mint() -> Self {
        Self(KeyRepr::Uuid(Uuid::new_v4()))
    }

    /// Wraps a UUID read back from storage. Storage only ever holds keys that passed parsing.
    pub fn from_uuid(uuid: Uuid) -> Self {
        Self(KeyRepr::Uuid(uuid))
    }

    /// The key as a UUID, when it is one.
    pub fn as_uuid(&self) -> Option<Uuid> {
        match &self.0 {
            KeyRepr::Uuid(uuid) => Some(*uuid),
            KeyRepr::Text(_) => None,
        }
    }

    /// The key as the 16 bytes a store keeps: a UUID key as itself; any other key as a
    /// version-8 UUID made from the SHA-256 of its text (122 bits of the digest: a collision
    /// within one user's keys is as unlikely as between two random v4 keys).
    pub fn storage_uuid(&self) -> Uuid {
        match &self.0 {
            KeyRepr::Uuid(uuid) => *uuid,
            KeyRepr::Text(text) => {
                let digest = Sha256::digest(text.as_bytes());
                let mut bytes = [0u8; 16];
                bytes.copy_from_slice(&digest[..16]);
                uuid::Builder::from_custom_bytes(bytes).into_uuid()
            }
        }
    }

    /// The header value in the draft's Structured Field string form, ready to send.
    pub fn to_header_value(&self) -> String {
        let mut out = String::with_capacity(MAX_KEY_LEN + 2);
        out.push('"');
        for c in self.to_string().chars() {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        }
        out.push('"');
        out
    }
}

impl fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            KeyRepr::Uuid(uuid) => write!(f, "{}", uuid.hyphenated()),
            KeyRepr::Text(text) => f.write_str(text),
        }
    }
}

impl From<IdempotencyKey> for String {
    fn from(key: IdempotencyKey) -> String {
        key.to_string()
    }
}

impl TryFrom<String> for IdempotencyKey {
    type Error = KeyError;

    /// Reads a key back from a client's own storage: a UUID if it parses as a v4, else text.
    fn try_from(text: String) -> Result<Self, KeyError> {
        Self::from_text(text.clone(), KeyFormat::UuidV4)
            .or_else(|_| Self::from_text(text, KeyFormat::Any))
    }
}

fn is_printable_ascii(byte: u8) -> bool {
    (0x20..=0x7e).contains(&byte)
}

/// Unquotes an RFC 8941 string item. Parameters (`;a=1`) are allowed by the grammar and ignored.
fn parse_sf_string(value: &[u8]) -> Result<String, KeyError> {
    let item: sfv::Item = sfv::Parser::new(value)
        .parse()
        .map_err(|error: sfv::Error| KeyError::BadStructuredField {
            reason: error.to_string(),
        })?;
    match item.bare_item.as_string() {
        Some(string) => Ok(string.as_str().to_owned()),
        None => Err(KeyError::BadStructuredField {
            reason: "the value is not a string item".to_owned(),
        }),
    }
}

fn parse_uuid_v4(text: &str) -> Result<Uuid, KeyError> {
    // Only the hyphenated 36-character form: braces, URNs and bare hex are not keys we mint.
    if text.len() != 36 {
        return Err(KeyError::NotUuid);
    }
    let uuid = Uuid::try_parse(text).map_err(|_| KeyError::NotUuid)?;
    if uuid.get_version_num() != 4 {
        return Err(KeyError::WrongUuidVersion {
            version: uuid.get_version_num(),
        });
    }
    if uuid.get_variant() != uuid::Variant::RFC4122 {
        return Err(KeyError::WrongUuidVariant);
    }
    Ok(uuid)
}

#[cfg(test)]
mod tests {
    // Under wasm32 the same tests run through wasm-bindgen-test (see `.cargo/config.toml`).
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    const V4: &str = "8e03978e-40d5-43e8-bc93-6894a57f9324";

    fn uuid_v4(value: &str) -> Result<IdempotencyKey, KeyError> {
        IdempotencyKey::parse_header(value.as_bytes(), KeyFormat::UuidV4)
    }

    #[test]
    fn bare_and_quoted_forms_give_the_same_key() {
        let bare = uuid_v4(V4).expect("bare v4 key");
        let quoted = uuid_v4(&format!("\"{V4}\"")).expect("quoted v4 key");
        assert_eq!(bare, quoted);
        assert_eq!(bare.to_string(), V4);
    }

    #[test]
    fn upper_case_uuid_is_the_same_key_as_lower_case() {
        assert_eq!(uuid_v4(&V4.to_uppercase()), uuid_v4(V4));
    }

    #[test]
    fn surrounding_white_space_is_ignored() {
        assert_eq!(uuid_v4(&format!("  {V4} ")), uuid_v4(V4));
    }

    #[test]
    fn quoted_form_with_parameters_is_accepted() {
        assert_eq!(uuid_v4(&format!("\"{V4}\";client=app")), uuid_v4(V4));
    }

    #[test]
    fn empty_key_is_refused() {
        assert_eq!(uuid_v4(""), Err(KeyError::Empty));
        assert_eq!(uuid_v4("   "), Err(KeyError::Empty));
        assert_eq!(uuid_v4("\"\""), Err(KeyError::Empty));
    }

    #[test]
    fn ten_kilobyte_key_is_refused_as_too_long() {
        let long = "a".repeat(10 * 1024);
        assert_eq!(
            IdempotencyKey::parse_header(long.as_bytes(), KeyFormat::Any),
            Err(KeyError::TooLong { length: 10 * 1024 })
        );
    }

    #[test]
    fn any_format_caps_at_255_characters() {
        let at_cap = "k".repeat(255);
        assert!(IdempotencyKey::parse_header(at_cap.as_bytes(), KeyFormat::Any).is_ok());
        let over = "k".repeat(256);
        assert_eq!(
            IdempotencyKey::parse_header(over.as_bytes(), KeyFormat::Any),
            Err(KeyError::TooLong { length: 256 })
        );
        let quoted_over = format!("\"{over}\"");
        assert_eq!(
            IdempotencyKey::parse_header(quoted_over.as_bytes(), KeyFormat::Any),
            Err(KeyError::TooLong { length: 256 })
        );
    }

    #[test]
    fn control_characters_and_line_breaks_are_refused() {
        for bad in ["abc\r\ndef", "abc\0", "tab\there", "caf\u{e9}"] {
            let error = IdempotencyKey::parse_header(bad.as_bytes(), KeyFormat::Any)
                .expect_err("must be refused");
            assert!(
                matches!(error, KeyError::NotPrintableAscii { .. }),
                "{bad:?} gave {error:?}"
            );
        }
    }

    #[test]
    fn invalid_utf8_is_refused_not_panicked_on() {
        let bytes = [0xff, 0xfe, b'a'];
        assert_eq!(
            IdempotencyKey::parse_header(&bytes, KeyFormat::Any),
            Err(KeyError::NotPrintableAscii { byte: 0xff })
        );
    }

    #[test]
    fn broken_structured_field_strings_are_refused() {
        for bad in ["\"unterminated", "\"a\"b", "\"bad \\x escape\""] {
            let error = IdempotencyKey::parse_header(bad.as_bytes(), KeyFormat::Any)
                .expect_err("must be refused");
            assert!(
                matches!(error, KeyError::BadStructuredField { .. }),
                "{bad:?} gave {error:?}"
            );
        }
    }

    #[test]
    fn structured_field_escapes_are_decoded() {
        let key = IdempotencyKey::parse_header(br#""a\"b\\c""#, KeyFormat::Any).expect("valid");
        assert_eq!(key.to_string(), r#"a"b\c"#);
        assert_eq!(key.to_header_value(), r#""a\"b\\c""#);
    }

    #[test]
    fn non_uuid_is_refused_under_uuid_v4() {
        assert_eq!(uuid_v4("order-1234"), Err(KeyError::NotUuid));
        assert_eq!(
            uuid_v4("8e03978e40d543e8bc936894a57f9324"),
            Err(KeyError::NotUuid)
        );
        assert!(IdempotencyKey::parse_header(b"order-1234", KeyFormat::Any).is_ok());
    }

    #[test]
    fn other_uuid_versions_and_nil_are_refused() {
        let v1 = "c232ab00-9414-11ec-b3c8-9f6bdeced846";
        let v7 = "01890a5d-ac96-774b-bcce-b302099a8057";
        let nil = "00000000-0000-0000-0000-000000000000";
        assert_eq!(uuid_v4(v1), Err(KeyError::WrongUuidVersion { version: 1 }));
        assert_eq!(uuid_v4(v7), Err(KeyError::WrongUuidVersion { version: 7 }));
        assert_eq!(uuid_v4(nil), Err(KeyError::WrongUuidVersion { version: 0 }));
    }

    #[test]
    fn wrong_variant_is_refused() {
        // Version nibble 4, but variant bits 110 (Microsoft) instead of 10.
        assert_eq!(
            uuid_v4("8e03978e-40d5-43e8-cc93-6894a57f9324"),
            Err(KeyError::WrongUuidVariant)
        );
    }

    #[test]
    fn storage_uuid_is_the_key_itself_for_uuid_keys_and_a_digest_otherwise() {
        let uuid_key = uuid_v4(V4).expect("valid");
        assert_eq!(uuid_key.storage_uuid().to_string(), V4);
        let text_a = IdempotencyKey::parse_header(b"order-1", KeyFormat::Any).expect("valid");
        let text_b = IdempotencyKey::parse_header(b"order-2", KeyFormat::Any).expect("valid");
        assert_ne!(text_a.storage_uuid(), text_b.storage_uuid());
        assert_eq!(text_a.storage_uuid().get_version_num(), 8);
    }

    #[test]
    fn minted_keys_are_valid_v4_and_distinct() {
        let a = IdempotencyKey::mint();
        let b = IdempotencyKey::mint();
        assert_ne!(a, b);
        assert_eq!(uuid_v4(&a.to_string()), Ok(a.clone()));
        assert_eq!(uuid_v4(&a.to_header_value()), Ok(a));
    }
}
