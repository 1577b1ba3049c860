//! The accept loop: HTTP/1.1 over TCP with a header-read timeout, a
//! connection limit and graceful shutdown.
//!
//! `axum::serve` has neither limit, so a client that sends one header line
//! every few seconds keeps a connection (and its task) forever, and a few
//! hundred such clients exhaust file descriptors.

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tracing::{debug, warn};

/// Limits of the accept loop (`[server]` in hearth.toml).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeLimits {
    /// A connection that has not sent a whole request head this long after
    /// it started one (or after connecting) is closed.
    pub header_read_timeout: Duration,
    /// Connections served at once; further clients wait in the listen
    /// backlog until one closes.
    pub max_connections: usize,
}

impl Default for ServeLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            max_connections: 1024,
        }
    }
}

/// Serves `app` on `listener` until `shutdown` completes, then stops
/// accepting and waits for open connections to finish their requests.
///
/// # Errors
/// Only when the limits are unusable (zero connections or a zero timeout);
/// failed accepts are logged and retried.
pub async fn serve<F>(
    listener: TcpListener,
    app: Router,
    limits: ServeLimits,
    shutdown: F,
) -> io::Result<()>
where
    F: Future<Output = ()> + Send,
{
    if limits.max_connections == 0 || limits.header_read_timeout.is_zero() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "[server] max_connections ({}) and header_read_timeout_ms ({}) must be above 0",
                limits.max_connections,
                limits.header_read_timeout.as_millis()
            ),
        ));
    }
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .keep_alive(true);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        // Take a connection slot before accepting, so that at the limit new
        // clients wait in the kernel's backlog instead of holding a task.
        let permit = tokio::select! {
            p = Arc::clone(&permits).acquire_owned() => match p {
                Ok(p) => p,
                // The semaphore is never closed; stop serving if it were.
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let stream = tokio::select! {
            r = listener.accept() => match r {
                Ok((stream, _peer)) => stream,
                Err(e) => {
                    accept_failed(&e).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        if let Err(e) = stream.set_nodelay(true) {
            debug!(error = %e, "could not set TCP_NODELAY");
        }
        let conn =
            http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone()));
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                // Timeouts, resets and malformed requests end here.
                debug!(error = %e, "connection closed with an error");
            }
            drop(permit);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// After a failed accept: out of file descriptors (or similar) would fail
/// again at once, so back off briefly instead of spinning.
async fn accept_failed(e: &io::Error) {
    let transient = matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionRefused
            | io::ErrorKind::Interrupted
    );
    if transient {
        debug!(error = %e, "accept failed");
    } else {
        warn!(error = %e, "accept failed; retrying in 100 ms");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
