//! `CORS_ALLOWED_ORIGINS`: which web pages may call the public API from a browser, checked at
//! start-up by `shared::cors` (the edge reads the same setting with the same rule); `http::cors`
//! replies to those origins' preflights and marks the replies they may read.

pub use shared::cors::{AllowedOrigins, CORS_ALLOWED_ORIGINS_SETTING};
