//! The HTTP layer: routes, authentication, and turning [`crate::flows::Answer`]s and
//! [`crate::error::Error`]s into responses; handlers return `crate::error::Result` and pass
//! errors on with `?`.

mod admin;
mod answer_response;
mod auth;
mod body;
mod docs;
mod failures;
mod health;
mod key_status;
mod limits;
pub mod openapi;
pub mod operator;
mod payments;
mod request_metrics;
mod router;
mod server;

pub use admin::admin_router;
pub use router::router;
pub use server::serve;
