//! Logging set-up: human lines on a terminal, JSON lines for machines.

use std::io::IsTerminal;

use hearth_config::LogFormat;
use tracing_subscriber::EnvFilter;

/// Installs the global subscriber. `RUST_LOG` wins over the configured level.
pub fn init(level: &str, format: LogFormat) {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Json => builder.json().with_current_span(false).try_init(),
        LogFormat::Human => builder
            .with_ansi(std::io::stderr().is_terminal())
            .with_target(false)
            .try_init(),
    };
}
