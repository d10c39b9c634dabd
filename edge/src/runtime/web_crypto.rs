//! Signature checks by the platform: WebCrypto's `crypto.subtle`, which the Workers runtime
//! implements natively, so the Worker's module carries no RSA or ECDSA code. A published key is
//! imported once per isolate (as a JWK) and kept until the key set is fetched again.

use std::cell::RefCell;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use shared::auth::jwks::{Algorithm, KeyMaterial, PublicKey};
use worker::console_error;
use worker::js_sys::{self, Array, Object, Reflect};
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::JsFuture;
use worker::web_sys::{CryptoKey, SubtleCrypto};

thread_local! {
    /// The imported keys, by `kid` (a key set holds a handful).
    static IMPORTED: RefCell<Vec<(String, CryptoKey)>> = const { RefCell::new(Vec::new()) };
}

/// Whether `signature` over `signed` holds under `key`, with the key's algorithm. A platform
/// error (the key could not be imported, say) is logged and counts as "does not hold".
pub async fn signature_holds(key: &PublicKey, signed: &[u8], signature: &[u8]) -> bool {
    match verify(key, signed, signature).await {
        Ok(holds) => holds,
        Err(error) => {
            console_error!(
                "WebCrypto could not check a signature with key {}: {error:?}",
                key.kid()
            );
            false
        }
    }
}

/// Drops the imported keys (the key set was fetched again).
pub fn forget_imported_keys() {
    IMPORTED.with(|imported| imported.borrow_mut().clear());
}

async fn verify(key: &PublicKey, signed: &[u8], signature: &[u8]) -> Result<bool, JsValue> {
    let subtle = subtle()?;
    let imported = imported(&subtle, key).await?;
    let algorithm = match key.algorithm() {
        Algorithm::Rs256 => object(&[("name", "RSASSA-PKCS1-v1_5")])?,
        Algorithm::Es256 => object(&[("name", "ECDSA"), ("hash", "SHA-256")])?,
    };
    let verified = subtle
        .verify_with_object_and_u8_array_and_u8_array(&algorithm, &imported, signature, signed)?;
    Ok(JsFuture::from(verified).await?.as_bool().unwrap_or(false))
}

/// The key as a WebCrypto key, imported on first use.
async fn imported(subtle: &SubtleCrypto, key: &PublicKey) -> Result<CryptoKey, JsValue> {
    let known = IMPORTED.with(|imported| {
        let imported = imported.borrow();
        let found = imported.iter().find(|(kid, _)| kid == key.kid());
        found.map(|(_, crypto_key)| crypto_key.clone())
    });
    if let Some(known) = known {
        return Ok(known);
    }
    let encode = |bytes: &[u8]| URL_SAFE_NO_PAD.encode(bytes);
    let (jwk, algorithm) = match key.material() {
        KeyMaterial::Rsa { n, e } => (
            object(&[
                ("kty", "RSA"),
                ("n", &encode(n)),
                ("e", &encode(e)),
                ("alg", "RS256"),
            ])?,
            object(&[("name", "RSASSA-PKCS1-v1_5"), ("hash", "SHA-256")])?,
        ),
        KeyMaterial::P256 { x, y } => (
            object(&[
                ("kty", "EC"),
                ("crv", "P-256"),
                ("x", &encode(x)),
                ("y", &encode(y)),
            ])?,
            object(&[("name", "ECDSA"), ("namedCurve", "P-256")])?,
        ),
    };
    let usages = Array::of1(&JsValue::from_str("verify"));
    let importing = subtle.import_key_with_object("jwk", &jwk, &algorithm, false, &usages)?;
    let crypto_key: CryptoKey = JsFuture::from(importing).await?.unchecked_into();
    IMPORTED.with(|imported| {
        imported
            .borrow_mut()
            .push((key.kid().to_owned(), crypto_key.clone()))
    });
    Ok(crypto_key)
}

/// The global `crypto.subtle`.
fn subtle() -> Result<SubtleCrypto, JsValue> {
    let crypto = Reflect::get(&js_sys::global(), &JsValue::from_str("crypto"))?;
    let subtle = Reflect::get(&crypto, &JsValue::from_str("subtle"))?;
    Ok(subtle.unchecked_into())
}

/// A plain object of string fields.
fn object(fields: &[(&str, &str)]) -> Result<Object, JsValue> {
    let object = Object::new();
    for (name, value) in fields {
        Reflect::set(&object, &JsValue::from_str(name), &JsValue::from_str(value))?;
    }
    Ok(object)
}
