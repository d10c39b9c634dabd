//! Logging: `tracing` to standard error, filtered by `RUST_LOG` (default `info`), as text for
//! people (`LOG_FORMAT=text`, the default) or one JSON object per line for a log pipeline
//! (`LOG_FORMAT=json`). Every line written while a request is served carries the request's
//! span, with its request id (the audit trail's) and trace id (`http::request_id`): JSON lines
//! list it under `spans`.

use clap::ValueEnum;
use tracing_subscriber::EnvFilter;

/// The setting that chooses the log format.
pub const LOG_FORMAT_SETTING: &str = "LOG_FORMAT";

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines (development).
    Text,
    /// One JSON object per line: `timestamp`, `level`, `target`, the event's fields, and
    /// `spans` (the request's id and trace id among them).
    Json,
}

/// Installs the subscriber once per process.
pub fn init_logging(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let lines = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => lines.init(),
        LogFormat::Json => lines
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(true)
            .init(),
    }
}
