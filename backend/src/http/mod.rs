//! The HTTP layer: routes, authentication, the request id, CORS, and turning
//! [`crate::domain::Reply`]s and [`crate::error::Error`]s into responses; handlers return
//! `crate::error::Result` and pass errors on with `?`. It calls [`crate::flows`] and reads the
//! store; nothing below it imports it.

mod admin;
mod auth;
mod bank_callbacks;
mod body;
mod cors;
mod docs;
mod edge_proof;
mod failures;
mod gate;
mod health;
mod key_status;
mod limits;
pub mod openapi;
pub mod operator;
mod payments;
mod reply_response;
mod request_id;
mod request_metrics;
mod router;
mod server;

pub use admin::admin_router;
pub use router::router;
pub use server::serve;
