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
    let filter = quiet_dependencies(&spec, filter);
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

/// Libraries whose own log lines are Rust debug dumps (rmcp logs a failed
/// connection as `reqwest::Error { kind: .. }` at ERROR). hearth reports
/// these failures itself, in words, so the libraries stay silent unless
/// the filter names them (`RUST_LOG=info,rmcp=debug`).
const QUIET: &[&str] = &["rmcp"];

/// `filter` with the [`QUIET`] libraries off, except those `spec` names.
fn quiet_dependencies(spec: &str, filter: Targets) -> Targets {
    let named = |lib: &str| {
        spec.split(',').any(|d| {
            d.trim().split('=').next() == Some(lib) || d.trim().starts_with(&format!("{lib}::"))
        })
    };
    QUIET
        .iter()
        .filter(|lib| !named(lib))
        .fold(filter, |f, lib| {
            f.with_target(*lib, tracing_subscriber::filter::LevelFilter::OFF)
        })
}

#[cfg(test)]
mod tests {
    use tracing::Level;

    use super::*;

    #[test]
    fn rmcp_is_quiet_unless_named() {
        let quiet = quiet_dependencies("info", "info".parse().unwrap());
        assert!(!quiet.would_enable("rmcp::transport::worker", &Level::ERROR));
        assert!(quiet.would_enable("hearth_mcp::manager", &Level::INFO));
        let named = "info,rmcp=debug";
        let loud = quiet_dependencies(named, named.parse().unwrap());
        assert!(loud.would_enable("rmcp::transport::worker", &Level::ERROR));
    }
}
