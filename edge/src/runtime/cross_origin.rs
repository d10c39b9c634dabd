//! CORS on the replies the edge makes itself: its replays, its refusals (401, 409, 422, 429…)
//! and its own failures (502, 504). A page on an origin `CORS_ALLOWED_ORIGINS` lists may read
//! them as it reads the backend's (the backend marks its own replies and replies to preflights,
//! which the edge forwards unchanged); without this a browser would see each of them as a
//! network error. Replies from the backend pass on as they came.

use shared::cors::{AllowedOrigins, EXPOSED_HEADERS};
use worker::{Request, Response, Result};

use crate::trace::EdgeHandling;

/// `response`, made by the edge as `handling` says, marked readable by the page that sent
/// `request` when that page's origin is listed.
pub fn readable_by_listed_origin(
    request: &Request,
    origins: &AllowedOrigins,
    handling: EdgeHandling,
    mut response: Response,
) -> Result<Response> {
    if origins.is_empty() || handling == EdgeHandling::Forwarded {
        return Ok(response);
    }
    let Some(origin) = request.headers().get("origin")? else {
        return Ok(response);
    };
    if !origins.allows(&origin) {
        return Ok(response);
    }
    let headers = response.headers_mut();
    headers.set("access-control-allow-origin", &origin)?;
    headers.append("vary", "origin")?;
    headers.set("access-control-expose-headers", &EXPOSED_HEADERS.join(", "))?;
    Ok(response)
}
