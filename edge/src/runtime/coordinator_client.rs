//! The Worker's side of the Durable Object protocol: one object per (user, key), named by
//! [`Attempt::coordinator_name`], spoken to with JSON over its `fetch`.

use serde::Serialize;
use worker::wasm_bindgen::JsValue;
use worker::{Env, Error, Response, Result, Stub};

use super::outgoing::Outgoing;
use crate::coordination::{BEGIN_PATH, BeginRequest, BeginVerdict, FINISH_PATH, FinishReport};
use crate::gate::Attempt;

/// The binding of the Durable Object namespace (`wrangler.toml`, `[[durable_objects.bindings]]`).
pub const COORDINATOR_BINDING: &str = "KEY_COORDINATOR";

/// The URL origin of messages to an object; the runtime routes them by stub, not by host.
const COORDINATOR_ORIGIN: &str = "https://key-coordinator";

/// A connection to the object of one (user, key).
#[derive(Debug)]
pub struct CoordinatorClient {
    stub: Stub,
}

impl CoordinatorClient {
    /// The object coordinating `attempt`'s (user, key).
    pub fn for_attempt(env: &Env, attempt: &Attempt) -> Result<CoordinatorClient> {
        let stub = env
            .durable_object(COORDINATOR_BINDING)?
            .get_by_name(&attempt.coordinator_name())?;
        Ok(CoordinatorClient { stub })
    }

    /// Asks whether the attempt may be forwarded.
    pub async fn begin(&self, request: &BeginRequest) -> Result<BeginVerdict> {
        // `from_slice`, not `Response::json`'s `from_str`: one JSON parser in the Wasm module.
        let mut response = self.post(BEGIN_PATH, request).await?;
        Ok(serde_json::from_slice(&response.bytes().await?)?)
    }

    /// Reports how the attempt's forward ended.
    pub async fn finish(&self, report: &FinishReport) -> Result<()> {
        self.post(FINISH_PATH, report).await.map(drop)
    }

    async fn post(&self, path: &str, message: &impl Serialize) -> Result<Response> {
        let body = JsValue::from_str(&serde_json::to_string(message)?);
        let request = Outgoing::post(body).to(&format!("{COORDINATOR_ORIGIN}{path}"))?;
        let response = self.stub.fetch_with_request(request).await?;
        let status = response.status_code();
        if !(200..300).contains(&status) {
            return Err(Error::RustError(format!(
                "the key coordinator replied {status} to {path}"
            )));
        }
        Ok(response)
    }
}
