//! The firewall: secret scanning of everything hearth sends to model providers.
//!
//! [`SecretScanner::redact`] finds credentials in text (provider keys, chat
//! platform tokens, private keys, JWTs, passwords in connection strings, and
//! high-entropy values under key-like names) and replaces each with a stable
//! placeholder `[REDACTED:<kind>:<8 hex>]`, so a model can still tell two
//! different secrets apart and refer to them without ever seeing one.
//!
//! Matching is hand-written byte scanning (no regex crate: binary size is a
//! product constraint); see `tokens` for the token formats and `context` for
//! the rules that recognise a secret by what precedes it.

mod context;
mod entropy;
mod patterns;
mod scanner;
mod table;
mod tokens;
mod unescape;

pub use scanner::{Finding, Redacted, SecretScanner};
