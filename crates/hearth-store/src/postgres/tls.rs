//! TLS to the database, asked for in the URL with `sslmode=require`.
//!
//! hearth then always verifies the server: its certificate chain against
//! this machine's trust store (the platform verifier, as every other TLS
//! connection of hearth) and its name against the host in the URL. That is
//! stricter than libpq's `require`, which encrypts without verifying: a
//! managed database's CA that the system does not trust yet belongs in the
//! system store (`/usr/local/share/ca-certificates` and
//! `update-ca-certificates` on Debian), or in the file `SSL_CERT_FILE` names.
//!
//! Without `sslmode=require` (the default `prefer`, or `disable`) the
//! connection is plain, as libpq's `prefer` ends up against a server without
//! TLS: a self-signed server certificate (Debian's default) then cannot stop
//! a replica from starting. TLS is only on over TCP: a Unix socket
//! (`?host=/dir`) is never encrypted.

use rustls_platform_verifier::ConfigVerifierExt;
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::{Result, StoreError};

/// The connector for `config`: verified TLS when the URL requires it,
/// otherwise none (the mode set to `disable`, so no handshake is tried).
pub(super) fn connector(
    config: &mut tokio_postgres::Config,
    target: &str,
) -> Result<MakeRustlsConnect> {
    if config.get_ssl_mode() != SslMode::Require {
        config.ssl_mode(SslMode::Disable);
    }
    let client =
        rustls::ClientConfig::with_platform_verifier().map_err(|e| StoreError::Connect {
            target: target.to_owned(),
            reason: format!("cannot load this machine's trust store for TLS to the database: {e}"),
        })?;
    Ok(MakeRustlsConnect::new(client))
}
