//! Configuration errors; each names where the bad value came from.

use std::path::PathBuf;

/// A configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML.
    #[error("config file {path} is not valid TOML: {message}")]
    Syntax {
        /// The file.
        path: String,
        /// The parser's message, with line and column.
        message: String,
    },
    /// A key has a wrong type or value, or is unknown.
    #[error("config {origin}: key `{key}`: {message}")]
    Invalid {
        /// The file path or the environment variable the value came from.
        origin: String,
        /// Dotted key path, e.g. `llm.providers.local.base_url`.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// The home directory could not be prepared.
    #[error("cannot prepare hearth home {path}: {source}")]
    Home {
        /// The directory or file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}
