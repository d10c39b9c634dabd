//! An identity provider's public keys, from its JWKS (RFC 7517), as this system will use them:
//! [`KeySet`] of [`PublicKey`]s, each with the one algorithm it may verify.
//!
//! A key's algorithm comes from the key, never from a token: an RSA key (`kty: RSA`) verifies
//! RS256 only, a P-256 key (`kty: EC`, `crv: P-256`) ES256 only; a key whose `alg` says
//! otherwise, or that is for encryption (`use: enc`), or has no `kid`, is left out. So is an RSA
//! key under 2048 bits: such a modulus can be factored, and a key set that offers one is
//! misconfigured. A token then names its key by `kid` ([`KeySet::key_for`]): no `kid`, an
//! unknown `kid`, or an `alg` in the token that is not its key's algorithm (`none`, `HS256`
//! signed with the public key as secret, RS256 for an EC key) are refused before any signature
//! is checked. EdDSA keys are left out too: no provider this system was tried with issues them
//! by default, and each algorithm is one more way to be wrong.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use thiserror::Error;

use super::compact::TokenHeader;
use super::error::AuthError;

/// The smallest RSA modulus accepted, in bits.
pub const MIN_RSA_BITS: usize = 2048;

/// An algorithm a published key verifies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    Rs256,
    /// ECDSA on P-256 with SHA-256 (the signature is `r ‖ s`, 64 bytes).
    Es256,
}

impl Algorithm {
    /// The JOSE name (`RS256`, `ES256`).
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Rs256 => "RS256",
            Algorithm::Es256 => "ES256",
        }
    }
}

/// A key's public numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyMaterial {
    /// RSA: modulus and public exponent, big-endian, without leading zeros.
    Rsa {
        /// The modulus.
        n: Vec<u8>,
        /// The public exponent.
        e: Vec<u8>,
    },
    /// A P-256 point.
    P256 {
        /// The x coordinate, 32 bytes.
        x: Vec<u8>,
        /// The y coordinate, 32 bytes.
        y: Vec<u8>,
    },
}

/// One usable key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKey {
    kid: String,
    algorithm: Algorithm,
    material: KeyMaterial,
}

impl PublicKey {
    /// Its id, as tokens name it.
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The one algorithm it verifies.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// Its public numbers.
    pub fn material(&self) -> &KeyMaterial {
        &self.material
    }

    /// The P-256 point uncompressed (`0x04 ‖ x ‖ y`), as `ring` and WebCrypto's `raw` format
    /// take it; `None` for an RSA key.
    pub fn uncompressed_point(&self) -> Option<Vec<u8>> {
        match &self.material {
            KeyMaterial::P256 { x, y } => Some([&[4][..], x, y].concat()),
            KeyMaterial::Rsa { .. } => None,
        }
    }
}

/// Why a key of the set was left out.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum KeyRefusal {
    /// No `kid`: no token could name it.
    #[error("the key has no kid")]
    NoKeyId,
    /// `use` is not `sig`.
    #[error("the key is not for signatures")]
    NotForSignatures,
    /// A key type or curve this system does not verify with.
    #[error("unsupported key type or curve: {0}")]
    Unsupported(String),
    /// `alg` names another algorithm than the key type's.
    #[error("the key's alg {0} is not the one its type verifies")]
    AlgorithmMismatch(String),
    /// An RSA modulus under [`MIN_RSA_BITS`].
    #[error("the RSA modulus is {0} bits, under {MIN_RSA_BITS}")]
    WeakRsa(usize),
    /// Numbers missing, not base64url, or of the wrong size.
    #[error("the key's numbers are missing or malformed")]
    Malformed,
}

/// A JWKS document that cannot be read at all.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("the key set is not a JWKS document (a JSON object with a `keys` array)")]
pub struct JwksError;

/// The usable keys of a JWKS document, and why the others were left out.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KeySet {
    keys: Vec<PublicKey>,
    left_out: Vec<(Option<String>, KeyRefusal)>,
}

/// A JWK's fields, as strings where present. Read from a `serde_json::Value` rather than a
/// derived struct: the Worker's module already carries `Value`'s reader (the fingerprint needs
/// it), and a derived reader for ten optional fields would add kilobytes of its own.
struct Jwk<'j> {
    fields: &'j serde_json::Map<String, serde_json::Value>,
}

impl<'j> Jwk<'j> {
    fn field(&self, name: &str) -> Option<String> {
        self.fields.get(name)?.as_str().map(str::to_owned)
    }
}

impl KeySet {
    /// Reads a JWKS document: every usable key, the rest left out with the reason.
    pub fn parse(json: &[u8]) -> Result<KeySet, JwksError> {
        let document: serde_json::Value = serde_json::from_slice(json).map_err(|_| JwksError)?;
        let keys = document
            .get("keys")
            .and_then(serde_json::Value::as_array)
            .ok_or(JwksError)?;
        let mut set = KeySet::default();
        for key in keys {
            let Some(fields) = key.as_object() else {
                set.left_out.push((None, KeyRefusal::Malformed));
                continue;
            };
            let jwk = Jwk { fields };
            let kid = jwk.field("kid");
            match usable(&jwk) {
                Ok(key) if set.keys.iter().any(|known| known.kid == key.kid) => {
                    set.left_out
                        .push((kid, KeyRefusal::Unsupported("a repeated kid".into())));
                }
                Ok(key) => set.keys.push(key),
                Err(refusal) => set.left_out.push((kid, refusal)),
            }
        }
        Ok(set)
    }

    /// The usable keys.
    pub fn keys(&self) -> &[PublicKey] {
        &self.keys
    }

    /// The keys left out, by `kid` where they had one, with the reason (for the log).
    pub fn left_out(&self) -> &[(Option<String>, KeyRefusal)] {
        &self.left_out
    }

    /// The key a token's header names, if the token's algorithm is that key's.
    pub fn key_for(&self, header: &TokenHeader) -> Result<&PublicKey, AuthError> {
        let kid = header.kid.as_deref().ok_or(AuthError::MissingKeyId)?;
        let key = self
            .keys
            .iter()
            .find(|key| key.kid == kid)
            .ok_or(AuthError::UnknownKey)?;
        if header.alg != key.algorithm.name() {
            return Err(AuthError::WrongAlgorithm);
        }
        Ok(key)
    }
}

fn usable(jwk: &Jwk<'_>) -> Result<PublicKey, KeyRefusal> {
    let kid = jwk.field("kid").ok_or(KeyRefusal::NoKeyId)?;
    if jwk.field("use").is_some_and(|use_| use_ != "sig") {
        return Err(KeyRefusal::NotForSignatures);
    }
    let kty = jwk.field("kty").ok_or(KeyRefusal::Malformed)?;
    let crv = jwk.field("crv");
    let (algorithm, material) = match (kty.as_str(), crv.as_deref()) {
        ("RSA", _) => {
            let n = strip_leading_zeros(number(jwk.field("n"))?);
            let e = strip_leading_zeros(number(jwk.field("e"))?);
            let bits = bit_length(&n);
            if bits < MIN_RSA_BITS {
                return Err(KeyRefusal::WeakRsa(bits));
            }
            if e.is_empty() || e.len() > 4 {
                return Err(KeyRefusal::Malformed);
            }
            (Algorithm::Rs256, KeyMaterial::Rsa { n, e })
        }
        ("EC", Some("P-256")) => {
            let x = number(jwk.field("x"))?;
            let y = number(jwk.field("y"))?;
            if x.len() != 32 || y.len() != 32 {
                return Err(KeyRefusal::Malformed);
            }
            (Algorithm::Es256, KeyMaterial::P256 { x, y })
        }
        (kty, crv) => {
            return Err(KeyRefusal::Unsupported(
                [Some(kty), crv]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>()
                    .join(" "),
            ));
        }
    };
    if let Some(alg) = jwk.field("alg")
        && alg != algorithm.name()
    {
        return Err(KeyRefusal::AlgorithmMismatch(alg));
    }
    Ok(PublicKey {
        kid,
        algorithm,
        material,
    })
}

fn number(encoded: Option<String>) -> Result<Vec<u8>, KeyRefusal> {
    URL_SAFE_NO_PAD
        .decode(encoded.ok_or(KeyRefusal::Malformed)?)
        .map_err(|_| KeyRefusal::Malformed)
}

fn strip_leading_zeros(mut bytes: Vec<u8>) -> Vec<u8> {
    let zeros = bytes.iter().take_while(|byte| **byte == 0).count();
    bytes.drain(..zeros);
    bytes
}

fn bit_length(big_endian: &[u8]) -> usize {
    big_endian.first().map_or(0, |first| {
        (big_endian.len() - 1) * 8 + (8 - first.leading_zeros() as usize)
    })
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use serde_json::json;

    use super::*;

    fn b64(bytes: &[u8]) -> String {
        URL_SAFE_NO_PAD.encode(bytes)
    }

    fn rsa(kid: &str, bits: usize) -> serde_json::Value {
        let mut n = vec![0xff_u8; bits / 8];
        n.insert(0, 0); // a leading zero, as some encoders write
        json!({ "kty": "RSA", "kid": kid, "use": "sig", "n": b64(&n), "e": "AQAB" })
    }

    fn p256(kid: &str) -> serde_json::Value {
        json!({ "kty": "EC", "crv": "P-256", "kid": kid, "x": b64(&[1; 32]), "y": b64(&[2; 32]) })
    }

    fn set(keys: serde_json::Value) -> KeySet {
        KeySet::parse(json!({ "keys": keys }).to_string().as_bytes()).expect("a JWKS")
    }

    fn header(alg: &str, kid: Option<&str>) -> TokenHeader {
        TokenHeader {
            alg: alg.to_owned(),
            kid: kid.map(str::to_owned),
        }
    }

    #[test]
    fn each_key_verifies_the_one_algorithm_of_its_type() {
        let keys = set(json!([rsa("r1", 2048), p256("e1")]));
        assert_eq!(keys.keys().len(), 2, "{:?}", keys.left_out());
        let rsa_key = keys
            .key_for(&header("RS256", Some("r1")))
            .expect("RS256 for RSA");
        assert_eq!(rsa_key.algorithm(), Algorithm::Rs256);
        assert!(matches!(rsa_key.material(), KeyMaterial::Rsa { n, .. } if n.len() == 256));
        let ec_key = keys
            .key_for(&header("ES256", Some("e1")))
            .expect("ES256 for P-256");
        assert_eq!(
            ec_key.uncompressed_point().map(|point| point.len()),
            Some(65)
        );
    }

    #[test]
    fn the_token_cannot_choose_another_algorithm_than_its_key() {
        let keys = set(json!([rsa("r1", 2048), p256("e1")]));
        for (alg, kid) in [
            ("none", "r1"),
            ("HS256", "r1"),
            ("RS256", "e1"),
            ("ES256", "r1"),
            ("RS512", "r1"),
        ] {
            assert_eq!(
                keys.key_for(&header(alg, Some(kid))),
                Err(AuthError::WrongAlgorithm),
                "{alg} for {kid}"
            );
        }
        assert_eq!(
            keys.key_for(&header("RS256", None)),
            Err(AuthError::MissingKeyId)
        );
        assert_eq!(
            keys.key_for(&header("RS256", Some("r9"))),
            Err(AuthError::UnknownKey)
        );
    }

    #[test]
    fn weak_foreign_and_mislabelled_keys_are_left_out_with_the_reason() {
        let mut mislabelled = rsa("r2", 2048);
        mislabelled["alg"] = json!("ES256");
        let mut encryption = rsa("r3", 2048);
        encryption["use"] = json!("enc");
        let keys = set(json!([
            rsa("r1", 1024),
            mislabelled,
            encryption,
            { "kty": "OKP", "crv": "Ed25519", "kid": "o1", "x": b64(&[1; 32]) },
            { "kty": "EC", "crv": "P-384", "kid": "e2", "x": b64(&[1; 48]), "y": b64(&[2; 48]) },
            { "kty": "EC", "crv": "P-256", "kid": "e3", "x": b64(&[1; 31]), "y": b64(&[2; 32]) },
            { "kty": "oct", "kid": "h1", "k": "c2VjcmV0" },
            { "kty": "RSA", "n": "AQAB", "e": "AQAB" },
            rsa("dup", 2048),
            rsa("dup", 2048),
        ]));
        assert_eq!(
            keys.keys().len(),
            1,
            "only the first dup: {:?}",
            keys.keys()
        );
        let reasons: Vec<&KeyRefusal> = keys.left_out().iter().map(|(_, why)| why).collect();
        assert!(reasons.contains(&&KeyRefusal::WeakRsa(1024)), "{reasons:?}");
        assert!(reasons.contains(&&KeyRefusal::AlgorithmMismatch("ES256".into())));
        assert!(reasons.contains(&&KeyRefusal::NotForSignatures));
        assert!(reasons.contains(&&KeyRefusal::NoKeyId));
        assert!(reasons.contains(&&KeyRefusal::Malformed));
        assert_eq!(keys.left_out().len(), 9);
        assert_eq!(
            keys.key_for(&header("RS256", Some("r1"))),
            Err(AuthError::UnknownKey),
            "a weak key verifies nothing"
        );
    }

    #[test]
    fn a_document_without_keys_is_no_key_set() {
        for document in [&b"{}"[..], b"[]", b"not json", br#"{"keys": 3}"#] {
            assert_eq!(KeySet::parse(document), Err(JwksError), "{document:?}");
        }
    }
}
