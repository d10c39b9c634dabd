//! The bank's callbacks (SPEC §7, "Bank callbacks"): the final status of a reference, pushed by
//! the bank to the PSP as soon as it knows, signed with a secret the two share.
//!
//! ```text
//! POST /bank/callbacks
//! Bank-Signature: t=1765045799,v1=<base64url HMAC-SHA-256 of "{t}.{body}">
//!
//! {"reference": "pay-…", "amount_paise": 230000, "status": "debited"}
//! ```
//!
//! `status` is a settlement word (`debited`, `refunded`, `declined`, `rejected`): a callback is
//! one line of the settlement file, early. The signature covers the time and the exact body
//! bytes; a receiver accepts it within [`MAX_CALLBACK_AGE_SECONDS`] of its clock and under any
//! of its secrets (the current one and, while the bank rotates, the previous one). The bank
//! simulator signs with [`sign`]; the backend checks with [`verify`].

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::settlement::{Settled, SettlementRow};

/// The header that carries a callback's signature.
pub const SIGNATURE_HEADER: &str = "Bank-Signature";

/// How far a callback's time may be from the receiver's clock, either way: a callback replayed
/// later than this is refused, however good its signature.
pub const MAX_CALLBACK_AGE_SECONDS: i64 = 300;

/// A callback's body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallbackBody {
    /// The reference the movement was made under.
    pub reference: String,
    /// How much moved (or would have), in paise.
    pub amount_paise: u64,
    /// What the bank did: `debited`, `refunded`, `declined` or `rejected`.
    pub status: String,
}

impl CallbackBody {
    /// The callback as the settlement line it stands for, settled at `at`; `None` for a status
    /// word that is not a settlement word.
    pub fn as_settlement(&self, at: time::OffsetDateTime) -> Option<SettlementRow> {
        let status = Settled::from_word(&self.status)?;
        Some(SettlementRow {
            reference: self.reference.clone(),
            amount_paise: self.amount_paise,
            status,
            settled_at: at,
        })
    }
}

/// Why a callback's signature was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// No `Bank-Signature` header, or not `t=<seconds>,v1=<signature>`.
    #[error("the Bank-Signature header is missing or malformed")]
    Malformed,
    /// Signed too long ago (or in the future): a replay, or a skewed clock.
    #[error("the callback's time is more than {MAX_CALLBACK_AGE_SECONDS} s from ours")]
    Stale,
    /// No secret of ours makes that signature over this time and body.
    #[error("the signature does not match the body under any of our secrets")]
    Forged,
}

/// The `Bank-Signature` value for `body` sent at `now_unix`, under `secret`.
pub fn sign(secret: &[u8], now_unix: i64, body: &[u8]) -> String {
    let mac = keyed(secret, now_unix, body).finalize().into_bytes();
    format!("t={now_unix},v1={}", URL_SAFE_NO_PAD.encode(mac))
}

/// Checks `header` (the `Bank-Signature` value) for `body` at `now_unix` under any of
/// `secrets`.
pub fn verify<'a>(
    header: Option<&str>,
    body: &[u8],
    now_unix: i64,
    secrets: impl IntoIterator<Item = &'a [u8]>,
) -> Result<(), SignatureError> {
    let (time, signature) = header
        .and_then(parse_header)
        .ok_or(SignatureError::Malformed)?;
    if time.abs_diff(now_unix) > MAX_CALLBACK_AGE_SECONDS.unsigned_abs() {
        return Err(SignatureError::Stale);
    }
    let signature = URL_SAFE_NO_PAD
        .decode(signature)
        .map_err(|_| SignatureError::Malformed)?;
    secrets
        .into_iter()
        .any(|secret| keyed(secret, time, body).verify_slice(&signature).is_ok())
        .then_some(())
        .ok_or(SignatureError::Forged)
}

fn parse_header(header: &str) -> Option<(i64, &str)> {
    let (time, signature) = header.split_once(',')?;
    let time = time.trim().strip_prefix("t=")?.parse().ok()?;
    Some((time, signature.trim().strip_prefix("v1=")?))
}

fn keyed(secret: &[u8], time: i64, body: &[u8]) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(time.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"bank-callback-secret-of-32-bytes!!";
    const OLD: &[u8] = b"the-previous-bank-callback-secret!!";
    const NOW: i64 = 1_800_000_000;
    const BODY: &[u8] = br#"{"reference":"pay-1","amount_paise":100,"status":"debited"}"#;

    #[test]
    fn a_signed_callback_verifies_under_the_current_or_the_previous_secret() {
        let header = sign(SECRET, NOW, BODY);
        assert_eq!(verify(Some(&header), BODY, NOW + 10, [SECRET]), Ok(()));
        let signed_before_rotation = sign(OLD, NOW, BODY);
        assert_eq!(
            verify(Some(&signed_before_rotation), BODY, NOW, [SECRET, OLD]),
            Ok(())
        );
        assert_eq!(
            verify(Some(&signed_before_rotation), BODY, NOW, [SECRET]),
            Err(SignatureError::Forged)
        );
    }

    #[test]
    fn another_body_time_or_header_is_refused() {
        let header = sign(SECRET, NOW, BODY);
        let other = br#"{"reference":"pay-1","amount_paise":999,"status":"debited"}"#;
        assert_eq!(
            verify(Some(&header), other, NOW, [SECRET]),
            Err(SignatureError::Forged)
        );
        assert_eq!(
            verify(
                Some(&header),
                BODY,
                NOW + MAX_CALLBACK_AGE_SECONDS + 1,
                [SECRET]
            ),
            Err(SignatureError::Stale)
        );
        let moved_time = header.replacen(&NOW.to_string(), &(NOW + 1).to_string(), 1);
        assert_eq!(
            verify(Some(&moved_time), BODY, NOW, [SECRET]),
            Err(SignatureError::Forged)
        );
        for malformed in [
            None,
            Some("v1=abc"),
            Some("t=now,v1=abc"),
            Some("t=1,v2=abc"),
        ] {
            assert_eq!(
                verify(malformed, BODY, NOW, [SECRET]),
                Err(SignatureError::Malformed),
                "{malformed:?}"
            );
        }
    }

    #[test]
    fn a_callback_is_a_settlement_line() {
        let body: CallbackBody = serde_json::from_slice(BODY).expect("parses");
        let at = time::OffsetDateTime::from_unix_timestamp(NOW).expect("valid");
        let row = body.as_settlement(at).expect("a settlement word");
        assert_eq!((row.status, row.amount_paise), (Settled::Debited, 100));
        let pending = CallbackBody {
            status: "pending".to_owned(),
            ..body
        };
        assert_eq!(pending.as_settlement(at), None);
    }
}
