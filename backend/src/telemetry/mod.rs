//! What the backend tells its operators besides metrics: logs and traces.
//!
//! Logs: `tracing` to standard error, filtered by `RUST_LOG` (default `info`), as text for
//! people (`LOG_FORMAT=text`, the default) or one JSON object per line for a log pipeline
//! (`LOG_FORMAT=json`). Every line written while a request is served carries the request's
//! span, with its request id (the audit trail's) and trace id (`http::request_id`): JSON lines
//! list it under `spans`.
//!
//! Traces ([`traces`]): the same spans, exported over OTLP when the standard `OTEL_*` settings
//! name a receiver, and off otherwise. `RUST_LOG` filters the log lines only: the exporter takes
//! every span at `info` and above (the request, the checks, the claim, the bank call…) and the
//! events at `warn` and above, whatever the log level.

pub mod traces;

use clap::ValueEnum;
use tracing::Level;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

pub use traces::Tracing;

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

/// Installs the subscriber once per process: the log lines, and the trace exporter if the
/// `OTEL_*` settings ask for one. Keep the returned [`Tracing`] until the process ends: dropping
/// it sends the spans still queued.
pub fn init(format: LogFormat) -> anyhow::Result<Tracing> {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let lines = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let lines = match format {
        LogFormat::Text => lines.boxed(),
        LogFormat::Json => lines
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(true)
            .boxed(),
    };
    let tracing = Tracing::from_environment()?;
    let traced = filter_fn(|metadata| {
        let least = if metadata.is_span() {
            Level::INFO
        } else {
            Level::WARN
        };
        *metadata.level() <= least
    });
    tracing_subscriber::registry()
        .with(lines.with_filter(filter))
        .with(tracing.layer().with_filter(traced))
        .init();
    Ok(tracing)
}
