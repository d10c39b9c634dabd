//! The Durable Object kept per [`Requester`] (a user, or a client address): it holds the
//! requester's token bucket in memory and replies to each `POST /take` with the pure
//! [`TakeRequest::apply`].
//!
//! Memory only, on purpose: a bucket is worth keeping for seconds, and a write per request would
//! cost more than the limit saves. An object the runtime evicts after a quiet spell comes back
//! with a full bucket, which is what the quiet spell would have refilled anyway. Each message is
//! decided in one synchronous step against the bucket in memory, so two requests arriving
//! together can never take the same token.
//!
//! [`Requester`]: crate::rate_limit::Requester

use std::cell::RefCell;

use worker::{DurableObject, Env, Method, Request, Response, Result, State, durable_object};

use super::clock::now_ms;
use crate::rate_limit::{TAKE_PATH, TakeRequest, TokenBucket};

/// The per-requester limiter (`class_name = "RateLimiter"` in `wrangler.toml`).
#[durable_object]
pub struct RateLimiter {
    /// The bucket, `None` until the first request.
    bucket: RefCell<Option<TokenBucket>>,
}

impl DurableObject for RateLimiter {
    fn new(_state: State, _env: Env) -> Self {
        RateLimiter {
            bucket: RefCell::new(None),
        }
    }

    async fn fetch(&self, mut request: Request) -> Result<Response> {
        match (request.method(), request.path().as_str()) {
            (Method::Post, TAKE_PATH) => {
                // `from_slice`, not `Request::json` (serde-wasm-bindgen) or `from_str`: one JSON
                // parser in the Wasm module (see `key_coordinator`).
                let message: TakeRequest = serde_json::from_slice(&request.bytes().await?)?;
                let verdict = message.apply(&mut self.bucket.borrow_mut(), now_ms());
                Response::from_json(&verdict)
            }
            _ => Response::error("no such rate limiter message", 404),
        }
    }
}
