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
//! events at `info` and above (the access line among them, as the request span's event),
//! whatever the log level.

pub mod traces;

use clap::ValueEnum;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::LevelFilter;
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
    tracing_subscriber::registry()
        .with(lines.with_filter(filter))
        // Its own level, whatever `RUST_LOG` says. Not a filter that takes spans but refuses
        // `info` events: with one, the log layer lost the span list of the events refused
        // (tracing-subscriber 0.3.23's per-layer filters), and JSON lines their request ids.
        .with(
            tracing
                .layer()
                .map(|exporter| exporter.with_filter(LevelFilter::INFO)),
        )
        .init();
    Ok(tracing)
}
