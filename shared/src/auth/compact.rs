//! A token as it arrives: [`CompactToken`], the three base64url parts of a JWS (RFC 7515) split
//! and its header read, with nothing of its claims trusted yet; and [`VerifiedToken`], what it
//! becomes once its signature was checked, whose claims may then be read.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::claims::ClaimSet;
use super::error::AuthError;

/// The longest token accepted: an RS256 token of a provider with generous claims is under 2 KB.
pub const MAX_TOKEN_LEN: usize = 8192;

/// The protected header's fields this system reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenHeader {
    /// The algorithm the token claims: only ever compared with the one its key allows.
    pub alg: String,
    /// The key it was signed with, as the key set names it.
    pub kid: Option<String>,
}

impl TokenHeader {
    /// The header of a JSON object with a string `alg` (and a string `kid`, if any); read from
    /// the claims' own reader ([`ClaimSet`]), which the Worker's module carries anyway.
    fn from_json(json: &[u8]) -> Result<TokenHeader, AuthError> {
        let header = ClaimSet::from_json(json)?;
        Ok(TokenHeader {
            alg: header
                .string("alg")?
                .ok_or(AuthError::Malformed)?
                .to_owned(),
            kid: header.string("kid")?.map(str::to_owned),
        })
    }
}

/// A token split into its parts, its header read; its claims are not read until its signature
/// has been checked ([`CompactToken::verified`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactToken<'t> {
    header: TokenHeader,
    signing_input: &'t [u8],
    claims: &'t [u8],
    signature: Vec<u8>,
}

impl<'t> CompactToken<'t> {
    /// Splits `token` (`header.claims.signature`) and reads its header.
    pub fn parse(token: &'t [u8]) -> Result<CompactToken<'t>, AuthError> {
        if token.len() > MAX_TOKEN_LEN {
            return Err(AuthError::Malformed);
        }
        let mut parts = token.split(|byte| *byte == b'.');
        let (Some(header), Some(claims), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(AuthError::Malformed);
        };
        let header = TokenHeader::from_json(&decode(header)?)?;
        let signature = URL_SAFE_NO_PAD
            .decode(signature)
            .map_err(|_| AuthError::Malformed)?;
        Ok(CompactToken {
            header,
            // The signature covers `header.claims`: everything before the last dot.
            signing_input: &token[..token.len() - signature_part_len(token) - 1],
            claims,
            signature,
        })
    }

    /// The protected header.
    pub fn header(&self) -> &TokenHeader {
        &self.header
    }

    /// The bytes the signature covers.
    pub fn signing_input(&self) -> &'t [u8] {
        self.signing_input
    }

    /// The signature, decoded.
    pub fn signature(&self) -> &[u8] {
        &self.signature
    }

    /// The token once its signature has been checked: `signature_holds` is the verifier's
    /// reply, and only a token whose signature holds has its claims read.
    pub fn verified(self, signature_holds: bool) -> Result<VerifiedToken, AuthError> {
        if !signature_holds {
            return Err(AuthError::BadSignature);
        }
        Ok(VerifiedToken {
            claims: ClaimSet::from_json(&decode(self.claims)?)?,
        })
    }
}

/// A token whose signature holds: its claims, to be held to the rules.
#[derive(Debug, Clone, PartialEq)]
pub struct VerifiedToken {
    claims: ClaimSet,
}

impl VerifiedToken {
    /// The claims.
    pub fn claims(&self) -> &ClaimSet {
        &self.claims
    }
}

/// The token of an `Authorization: Bearer <token>` header value.
pub fn bearer_token(header: Option<&[u8]>) -> Result<&[u8], AuthError> {
    let header = header.ok_or(AuthError::Missing)?;
    let token = header
        .strip_prefix(b"Bearer ")
        .or_else(|| header.strip_prefix(b"bearer "))
        .ok_or(AuthError::NotBearer)?;
    Ok(token.trim_ascii())
}

/// The length of the last part (the signature) of a three-part token.
fn signature_part_len(token: &[u8]) -> usize {
    token.iter().rev().take_while(|byte| **byte != b'.').count()
}

fn decode(part: &[u8]) -> Result<Vec<u8>, AuthError> {
    URL_SAFE_NO_PAD
        .decode(part)
        .map_err(|_| AuthError::Malformed)
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    fn part(json: &str) -> String {
        URL_SAFE_NO_PAD.encode(json)
    }

    #[test]
    fn a_token_splits_into_its_header_signing_input_and_signature() {
        let header = part(r#"{"alg":"RS256","kid":"k1","typ":"JWT"}"#);
        let claims = part(r#"{"sub":"1","exp":1}"#);
        let signature = URL_SAFE_NO_PAD.encode([1, 2, 3]);
        let token = format!("{header}.{claims}.{signature}");
        let parsed = CompactToken::parse(token.as_bytes()).expect("well formed");
        assert_eq!(parsed.header().alg, "RS256");
        assert_eq!(parsed.header().kid.as_deref(), Some("k1"));
        assert_eq!(
            parsed.signing_input(),
            format!("{header}.{claims}").as_bytes()
        );
        assert_eq!(parsed.signature(), [1, 2, 3]);
    }

    #[test]
    fn claims_are_read_only_once_the_signature_holds() {
        let token = format!(
            "{}.{}.",
            part(r#"{"alg":"RS256","kid":"k1"}"#),
            part(r#"{"sub":"1","exp":1}"#)
        );
        let parsed = CompactToken::parse(token.as_bytes()).expect("well formed");
        assert_eq!(
            parsed.clone().verified(false).map(|_| ()),
            Err(AuthError::BadSignature)
        );
        let verified = parsed.verified(true).expect("claims are JSON");
        assert_eq!(verified.claims().string("sub"), Ok(Some("1")));
    }

    #[test]
    fn garbage_is_malformed_not_a_panic() {
        for token in [
            &b""[..],
            b"a.b",
            b"a.b.c.d",
            b"\xff\xfe.x.y",
            &[b'a'; MAX_TOKEN_LEN + 1][..],
            b"e30.e30.!!",
        ] {
            assert_eq!(
                CompactToken::parse(token).map(|_| ()),
                Err(AuthError::Malformed),
                "{token:?}"
            );
        }
    }

    #[test]
    fn missing_and_non_bearer_headers_are_refused() {
        assert_eq!(bearer_token(None), Err(AuthError::Missing));
        assert_eq!(bearer_token(Some(b"Basic YTpi")), Err(AuthError::NotBearer));
        assert_eq!(bearer_token(Some(b"Bearer  abc ")), Ok(&b"abc"[..]));
    }
}
