//! The Worker's side of the rate limiter: one object per [`Requester`], named by
//! [`Requester::limiter_name`], asked for a token before a request goes further.

use worker::wasm_bindgen::JsValue;
use worker::{Env, Error, Result};

use super::outgoing::Outgoing;
use crate::rate_limit::{Limit, Requester, TAKE_PATH, TakeRequest, TakeVerdict};

/// The binding of the rate limiter namespace (`wrangler.toml`, `[[durable_objects.bindings]]`).
pub const RATE_LIMITER_BINDING: &str = "RATE_LIMITER";

/// The URL origin of messages to a limiter; the runtime routes them by stub, not by host.
const RATE_LIMITER_ORIGIN: &str = "https://rate-limiter";

/// Takes a token for one request of `requester` under `limit`.
pub async fn take_token(env: &Env, requester: &Requester, limit: Limit) -> Result<TakeVerdict> {
    let stub = env
        .durable_object(RATE_LIMITER_BINDING)?
        .get_by_name(&requester.limiter_name())?;
    let body = JsValue::from_str(&serde_json::to_string(&TakeRequest { limit })?);
    let request = Outgoing::post(body).to(&format!("{RATE_LIMITER_ORIGIN}{TAKE_PATH}"))?;
    let mut response = stub.fetch_with_request(request).await?;
    let status = response.status_code();
    if !(200..300).contains(&status) {
        return Err(Error::RustError(format!(
            "the rate limiter replied {status}"
        )));
    }
    // `from_slice`, not `Response::json`'s `from_str`: one JSON parser in the Wasm module.
    Ok(serde_json::from_slice(&response.bytes().await?)?)
}
