//! The HTTP layer: routes, authentication, and turning [`crate::flows::Answer`]s into responses.

mod auth;
mod body;
mod docs;
mod health;
mod key_status;
pub mod openapi;
mod payments;
mod problem_response;
mod request_metrics;
mod router;

pub use router::router;
