//! The console page: three static files built into the binary (`console/`), served with a
//! strict Content-Security-Policy: the page loads nothing from elsewhere, runs no inline script,
//! and may not be framed. The page asks for the operator token itself and keeps it in the
//! tab's sessionStorage; loading the page needs no token, everything it shows does.

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

use crate::state::AppState;

const PAGE: &str = include_str!("../console/index.html");
const SCRIPT: &str = include_str!("../console/console.js");
const STYLE: &str = include_str!("../console/console.css");

/// What the page may load and do.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; img-src 'self' data:; \
     base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The page's three routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/admin/console",
            get(|| serve("text/html; charset=utf-8", PAGE)),
        )
        .route(
            "/admin/console.js",
            get(|| serve("text/javascript; charset=utf-8", SCRIPT)),
        )
        .route(
            "/admin/console.css",
            get(|| serve("text/css; charset=utf-8", STYLE)),
        )
}

async fn serve(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
}
