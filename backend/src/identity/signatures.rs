//! Checks an identity provider's signature with `ring` (already in the tree for TLS): RS256 with
//! the key's modulus and exponent (2048 to 8192 bits), ES256 with its P-256 point and the JWS
//! signature form `r ‖ s`. `ring` rather than a JWT crate: the algorithm choice and every claim
//! rule are `shared`'s, the same as the edge's, and only the arithmetic is needed here.

use ring::signature::{
    ECDSA_P256_SHA256_FIXED, RSA_PKCS1_2048_8192_SHA256, RsaPublicKeyComponents, UnparsedPublicKey,
};
use shared::auth::jwks::{KeyMaterial, PublicKey};

/// Whether `signature` over `signed` holds under `key`, with the key's one algorithm.
pub fn signature_holds(key: &PublicKey, signed: &[u8], signature: &[u8]) -> bool {
    match key.material() {
        KeyMaterial::Rsa { n, e } => RsaPublicKeyComponents { n, e }
            .verify(&RSA_PKCS1_2048_8192_SHA256, signed, signature)
            .is_ok(),
        KeyMaterial::P256 { .. } => key.uncompressed_point().is_some_and(|point| {
            UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, point)
                .verify(signed, signature)
                .is_ok()
        }),
    }
}
