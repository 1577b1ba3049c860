//! Logging set-up: human lines on a terminal, JSON lines for machines.
//!
//! Filters use `Targets` (`info`, `hearth_runtime=debug,info`) rather than
//! `EnvFilter`: the same syntax without span-field matching, and without the
//! regex engine, which is a large share of the binary and of its idle memory.

use std::io::IsTerminal;

use hearth_config::LogFormat;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Installs the global subscriber. `RUST_LOG` wins over the configured level.
pub fn init(level: &str, format: LogFormat) {
    let spec = std::env::var("RUST_LOG").unwrap_or_else(|_| level.to_owned());
    let (filter, bad) = match spec.parse::<Targets>() {
        Ok(t) => (t, None),
        Err(e) => (
            "info".parse::<Targets>().unwrap_or_default(),
            Some(format!("log filter {spec:?} is invalid ({e}); using info")),
        ),
    };
    let registry = tracing_subscriber::registry().with(filter);
    let _ = match format {
        LogFormat::Json => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_current_span(false)
                    .with_writer(std::io::stderr),
            )
            .try_init(),
        LogFormat::Human => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .with_ansi(std::io::stderr().is_terminal())
                    .with_target(false)
                    .with_writer(std::io::stderr),
            )
            .try_init(),
    };
    if let Some(msg) = bad {
        tracing::warn!("{msg}");
    }
}
