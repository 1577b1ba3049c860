//! `ResetServer`: a raw TCP server that starts an answer and then resets the
//! connection (a TCP RST, not a clean close), as a crashing upstream, a proxy
//! or a NAT dropping a stream does. An HTTP framework cannot send an RST, so
//! this one writes the bytes it is given itself.

use std::io;
use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Answers every connection with fixed bytes (a status line, headers and the
/// start of a body), holds it open until [`ResetServer::reset`], then resets
/// it. Stops when dropped.
#[derive(Debug)]
pub struct ResetServer {
    addr: SocketAddr,
    reset: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Drop for ResetServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ResetServer {
    /// Starts on 127.0.0.1 with an OS-chosen port; every connection gets `head`.
    ///
    /// # Panics
    /// When no local port can be bound: the test environment is broken and
    /// no test using the server can run.
    #[expect(
        clippy::expect_used,
        reason = "a test fixture that cannot bind loopback cannot run; see Panics"
    )]
    pub async fn start(head: impl Into<Vec<u8>>) -> Self {
        Self::bind(SocketAddr::from(([127, 0, 0, 1], 0)), head.into())
            .await
            .expect("bind the reset server on 127.0.0.1:0")
    }

    async fn bind(addr: SocketAddr, head: Vec<u8>) -> io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let (reset, armed) = watch::channel(false);
        let task = tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                tokio::spawn(serve(conn, head.clone(), armed.clone()));
            }
        });
        Ok(Self { addr, reset, task })
    }

    /// An HTTP 200 `text/event-stream` answer, chunked, whose body so far is
    /// `body`: the usual `head` for a stream cut mid-way.
    pub fn event_stream_head(body: &str) -> Vec<u8> {
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
             transfer-encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n",
            body.len()
        )
        .into_bytes()
    }

    /// The socket address served.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://` and the address, without a path.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Resets every connection, open or to come, once its head is written.
    pub fn reset(&self) {
        self.reset.send_replace(true);
    }
}

/// Reads the request head, writes `head`, waits for the reset and sends it.
async fn serve(mut conn: TcpStream, head: Vec<u8>, mut armed: watch::Receiver<bool>) {
    // The request's headers end with an empty line; the body that may follow
    // is left unread, which the reset makes irrelevant.
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
        match conn.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
    if conn.write_all(&head).await.is_err() || conn.flush().await.is_err() {
        return;
    }
    let _ = armed.wait_for(|reset| *reset).await;
    // A zero linger turns the close into an RST.
    let _ = conn.set_zero_linger();
    drop(conn);
}
