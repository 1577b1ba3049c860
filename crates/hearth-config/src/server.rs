//! `[server]`, `[store]` and `[log]`: how hearth listens, keeps its state and logs.

use serde::{Deserialize, Serialize};

/// `[server]`: the HTTP listener.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Listen address; loopback by default.
    pub bind: String,
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// Seconds in-flight runs get to finish on SIGTERM before being parked for recovery.
    pub shutdown_grace_secs: u64,
    /// Milliseconds a client gets to send a whole request head; slower
    /// connections are closed, so slow clients cannot hold connections open.
    pub header_read_timeout_ms: u64,
    /// Connections served at once; more clients wait until one closes.
    pub max_connections: usize,
    /// Runs queued or running at once; past it new messages get 503
    /// `overloaded` with Retry-After instead of growing the queue.
    pub max_queued_runs: usize,
    /// Host names (or `host:port`) every route accepts in Host besides the
    /// loopback names and the bind address (DNS-rebinding protection), and
    /// accepts as a browser Origin: the names a reverse proxy or LAN
    /// clients use.
    pub allowed_hosts: Vec<String>,
    /// Hours a dashboard login lasts (1 to 8760; default 12). A session
    /// also ends when its API token is revoked.
    pub ui_session_hours: u64,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            bind: "127.0.0.1:7777".into(),
            max_body_bytes: 1024 * 1024,
            shutdown_grace_secs: 10,
            header_read_timeout_ms: 10_000,
            max_connections: 1024,
            max_queued_runs: 10_000,
            allowed_hosts: Vec::new(),
            ui_session_hours: 12,
        }
    }
}

/// How hard the store works to keep a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Durability {
    /// Survives a killed process; a power cut may lose the last moments.
    #[default]
    Normal,
    /// Synced to disk before a message is acknowledged or an answer delivered.
    Strict,
}

/// Where hearth keeps its state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum StoreBackend {
    /// One file in the home (`hearth.db`), no set-up.
    #[default]
    Sqlite,
    /// A PostgreSQL database, shared by every replica that names it.
    Postgres,
}

impl StoreBackend {
    /// The name used in config and `/readyz`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sqlite => "sqlite",
            Self::Postgres => "postgres",
        }
    }
}

/// The environment variable that holds the PostgreSQL URL unless
/// `[store] url_env` names another.
pub const DEFAULT_DATABASE_URL_ENV: &str = "HEARTH_DATABASE_URL";

/// `[store]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreConfig {
    /// `normal` or `strict` (SQLite; PostgreSQL commits are always durable).
    pub durability: Durability,
    /// `sqlite` (default) or `postgres`.
    pub backend: StoreBackend,
    /// The environment variable that holds the PostgreSQL URL (never the
    /// file: it may carry a password).
    pub url_env: String,
    /// PostgreSQL connections per replica.
    pub pool_size: u32,
    /// Seconds a replica's claim on a run or a duty lasts unless renewed
    /// (at least 2): how long work of a dead replica waits for another.
    pub lease_secs: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            durability: Durability::default(),
            backend: StoreBackend::default(),
            url_env: DEFAULT_DATABASE_URL_ENV.to_owned(),
            pool_size: 8,
            lease_secs: 15,
        }
    }
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Human,
    /// One JSON object per line.
    Json,
}

/// `[log]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// A tracing filter, e.g. `info` or `hearth_runtime=debug,info`.
    pub level: String,
    /// `human` or `json`.
    pub format: LogFormat,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            level: "info".into(),
            format: LogFormat::Human,
        }
    }
}
