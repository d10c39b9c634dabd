//! A verified token's claims ([`ClaimSet`], read with typed accessors: a claim of the wrong type
//! is a malformed token), and the claims this system writes when it signs a token itself
//! ([`Claims`], for development tokens and tests).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::error::AuthError;
use super::user::UserId;

/// The claims of a token whose signature holds.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimSet {
    claims: Map<String, Value>,
}

impl ClaimSet {
    /// The claims of a JSON object; anything else is a malformed token.
    pub fn from_json(json: &[u8]) -> Result<ClaimSet, AuthError> {
        match serde_json::from_slice(json) {
            Ok(Value::Object(claims)) => Ok(ClaimSet { claims }),
            _ => Err(AuthError::Malformed),
        }
    }

    /// A string claim: `None` if absent, malformed if not a string.
    pub fn string(&self, name: &str) -> Result<Option<&str>, AuthError> {
        match self.claims.get(name) {
            None => Ok(None),
            Some(Value::String(text)) => Ok(Some(text)),
            Some(_) => Err(AuthError::Malformed),
        }
    }

    /// A NumericDate claim (whole Unix seconds): `None` if absent, malformed if not an integer.
    pub fn seconds(&self, name: &str) -> Result<Option<i64>, AuthError> {
        match self.claims.get(name) {
            None => Ok(None),
            Some(Value::Number(number)) => number.as_i64().map(Some).ok_or(AuthError::Malformed),
            Some(_) => Err(AuthError::Malformed),
        }
    }

    /// A claim that is one string or an array of strings (`aud`, a role claim): its strings,
    /// none if absent; malformed if of another type.
    pub fn strings(&self, name: &str) -> Result<Vec<&str>, AuthError> {
        match self.claims.get(name) {
            None => Ok(Vec::new()),
            Some(Value::String(one)) => Ok(vec![one]),
            Some(Value::Array(many)) => many
                .iter()
                .map(|item| item.as_str().ok_or(AuthError::Malformed))
                .collect(),
            Some(_) => Err(AuthError::Malformed),
        }
    }
}

/// The claims this system writes in the tokens it signs (development tokens, tests).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// The user id, as the canonical decimal string.
    pub sub: String,
    /// Expiry, Unix seconds; required.
    pub exp: i64,
    /// Not valid before, Unix seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<i64>,
    /// Issued at, Unix seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iat: Option<i64>,
    /// The issuer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iss: Option<String>,
    /// The audience.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aud: Option<Audience>,
}

impl Claims {
    /// `sub` and `exp` only.
    pub fn new(user: UserId, exp_unix: i64) -> Claims {
        Claims {
            sub: user.to_string(),
            exp: exp_unix,
            nbf: None,
            iat: None,
            iss: None,
            aud: None,
        }
    }
}

/// `aud` as written: one string or an array of strings (RFC 7519 §4.1.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Audience {
    /// One audience.
    One(String),
    /// Several audiences.
    Many(Vec<String>),
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn claims_are_read_by_type_and_a_wrong_type_is_malformed() {
        let claims = ClaimSet::from_json(
            br#"{"sub":"7","exp":9,"aud":["a","b"],"roles":"ops","nbf":1.5,"n":[1]}"#,
        )
        .expect("an object");
        assert_eq!(claims.string("sub"), Ok(Some("7")));
        assert_eq!(claims.string("missing"), Ok(None));
        assert_eq!(claims.string("exp"), Err(AuthError::Malformed));
        assert_eq!(claims.seconds("exp"), Ok(Some(9)));
        assert_eq!(claims.seconds("nbf"), Err(AuthError::Malformed));
        assert_eq!(claims.strings("aud"), Ok(vec!["a", "b"]));
        assert_eq!(claims.strings("roles"), Ok(vec!["ops"]));
        assert_eq!(claims.strings("none"), Ok(Vec::<&str>::new()));
        assert_eq!(claims.strings("n"), Err(AuthError::Malformed));
        assert_eq!(
            ClaimSet::from_json(br#"["42"]"#).map(|_| ()),
            Err(AuthError::Malformed)
        );
    }
}
