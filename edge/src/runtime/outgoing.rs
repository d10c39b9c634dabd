//! The requests the edge sends (to the backend, to its Durable Objects, to the span collector),
//! built on the runtime's own `RequestInit`.
//!
//! Not `worker::RequestInit`, for size: its conversion always carries the code that turns its
//! Cloudflare `cf` options (cache, image resizing) into a JavaScript object with
//! serde-wasm-bindgen, though the edge never sets them; that code was about 6 KB of the
//! gzipped Wasm module. What is set is what `worker::Request::new_with_init` sets for the edge's
//! requests: method, redirect mode, the headers when there are any, and the body.

use worker::wasm_bindgen::JsValue;
use worker::{Error, Headers, Method, Request, RequestRedirect, Result};

/// What an outgoing request carries besides its URL.
#[derive(Debug)]
pub struct Outgoing {
    /// Its method.
    pub method: Method,
    /// Its headers; `None` sends none of its own (the runtime may add `content-type`).
    pub headers: Option<Headers>,
    /// Its body (`None` for none).
    pub body: Option<JsValue>,
    /// Whether the runtime follows a redirect or hands it back.
    pub redirect: RequestRedirect,
}

impl Outgoing {
    /// A `POST` of `body`, redirects followed, with no headers of its own.
    pub fn post(body: JsValue) -> Outgoing {
        Outgoing {
            method: Method::Post,
            headers: None,
            body: Some(body),
            redirect: RequestRedirect::Follow,
        }
    }

    /// The request to `url`. An invalid URL, or a method the runtime cannot send, is an error
    /// worded as `worker::Request::new_with_init` words it.
    pub fn to(&self, url: &str) -> Result<Request> {
        let init = web_sys::RequestInit::new();
        if let Some(headers) = &self.headers {
            init.set_headers(headers.as_ref());
        }
        init.set_method(self.method.as_ref());
        init.set_redirect(self.redirect.into());
        if let Some(body) = &self.body {
            init.set_body(body);
        }
        web_sys::Request::new_with_str_and_init(url, &init)
            .map(Request::from)
            .map_err(|error| {
                Error::JsError(
                    error
                        .as_string()
                        .unwrap_or_else(|| "invalid URL or options for Request".to_owned()),
                )
            })
    }
}
