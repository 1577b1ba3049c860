//! The fake's listener: every accepted connection is tracked so that
//! "unreachable" can close them all, including the keep-alive connections a
//! client pools and a long poll in flight; while unreachable, new
//! connections are closed as soon as they are accepted.

use std::collections::HashMap;
use std::io;
use std::net::{Shutdown, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

use super::Shared;

/// Open connections, each by a second handle on its socket: shutting a
/// socket down through it ends the connection for both sides at once.
#[derive(Default)]
pub(super) struct Connections {
    open: Arc<Mutex<HashMap<u64, std::net::TcpStream>>>,
    next: AtomicU64,
}

impl Connections {
    fn lock(&self) -> MutexGuard<'_, HashMap<u64, std::net::TcpStream>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Closes every open connection (the peer sees the close at once).
    pub(super) fn close_all(&self) {
        for socket in self.lock().values() {
            let _ = socket.shutdown(Shutdown::Both);
        }
    }

    fn track(&self, tcp: TcpStream) -> io::Result<Tracked> {
        let std = tcp.into_std()?;
        let handle = std.try_clone()?;
        let tcp = TcpStream::from_std(std)?;
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock().insert(id, handle);
        Ok(Tracked {
            tcp,
            id,
            open: Arc::clone(&self.open),
        })
    }
}

/// A served connection; forgets its second handle when dropped, so the
/// socket closes when the server is done with it.
pub(super) struct Tracked {
    tcp: TcpStream,
    id: u64,
    open: Arc<Mutex<HashMap<u64, std::net::TcpStream>>>,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.remove(&self.id);
    }
}

impl AsyncRead for Tracked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_read(cx, buf)
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

/// Accepts connections for axum, tracked, unless the fake is unreachable.
pub(super) struct GatedListener {
    inner: TcpListener,
    shared: Arc<Shared>,
}

impl GatedListener {
    pub(super) fn new(inner: TcpListener, shared: Arc<Shared>) -> Self {
        Self { inner, shared }
    }
}

impl axum::serve::Listener for GatedListener {
    type Io = Tracked;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let (tcp, addr) = match self.inner.accept().await {
                Ok(accepted) => accepted,
                Err(_) => {
                    // Out of file descriptors and the like: a pause before
                    // retrying, as axum's own listener does.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            };
            if self.shared.unreachable.load(Ordering::SeqCst) {
                drop(tcp);
                continue;
            }
            let _ = tcp.set_nodelay(true);
            if let Ok(tracked) = self.shared.connections.track(tcp) {
                return (tracked, addr);
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}
