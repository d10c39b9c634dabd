//! The test harness every suite of this workspace shares (the backend's, the edge's, the
//! tools'), so each concern is solved once:
//! - [`TestDatabase`]: a fresh PostgreSQL database per test, dropped when the test ends;
//! - [`ServerProcess`]: a server binary as a child process that binds port 0 itself and reports
//!   its address on a fixed line (`… listening on http://ADDR`), never a port picked by
//!   binding and releasing; killed with its process group when dropped;
//! - [`Answer`]: a response read whole, with the assertions the contract needs;
//! - [`wait_for`] and [`metric_in`]: bounded polling and reading a Prometheus series.

mod answer;
mod database;
mod process;
mod wait;

pub use answer::Answer;
pub use database::{TestDatabase, admin_url};
pub use process::{ServerProcess, listening_url, listening_urls, server_binary};
pub use wait::{metric_in, wait_for};
