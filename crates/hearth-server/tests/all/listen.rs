//! The accept loop: header-read timeout, connection limit, graceful stop.

use std::time::Duration;

use hearth_server::ServeLimits;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::harness::Server;

/// Starts a request head and sends one header line every `every`; resolves
/// when the server closes the connection.
async fn slow_client(addr: std::net::SocketAddr, every: Duration) {
    let conn = TcpStream::connect(addr).await.unwrap();
    let (mut rd, mut wr) = conn.into_split();
    wr.write_all(b"GET /healthz HTTP/1.1\r\nHost: slow\r\n")
        .await
        .unwrap();
    let drip = async move {
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            if wr.write_all(b"X-Slow: 1\r\n").await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    };
    let closed = async move {
        let mut buf = [0u8; 512];
        while let Ok(n) = rd.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
    };
    tokio::select! {
        () = closed => {}
        () = drip => {}
    }
}

#[tokio::test]
async fn slow_header_connections_are_closed_while_others_are_served() {
    let limits = ServeLimits {
        header_read_timeout: Duration::from_millis(300),
        max_connections: 4,
    };
    let s = Server::start(limits, 1024).await;
    let slow: Vec<_> = (0..12)
        .map(|_| tokio::spawn(slow_client(s.addr, Duration::from_millis(50))))
        .collect();
    for _ in 0..3 {
        let r = tokio::time::timeout(
            Duration::from_secs(20),
            s.http.get(s.url("/healthz")).send(),
        )
        .await
        .expect("an ordinary request was not served within 20 s")
        .unwrap();
        assert_eq!(r.status().as_u16(), 200);
    }
    let all_closed = async {
        for t in slow {
            t.await.unwrap();
        }
    };
    tokio::time::timeout(Duration::from_secs(20), all_closed)
        .await
        .expect("slow-header connections were still open after 20 s");
    s.stop().await.unwrap();
}

#[tokio::test]
async fn zero_limits_are_refused() {
    for limits in [
        ServeLimits {
            header_read_timeout: Duration::ZERO,
            max_connections: 1,
        },
        ServeLimits {
            header_read_timeout: Duration::from_secs(1),
            max_connections: 0,
        },
    ] {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let err = hearth_server::serve(listener, axum::Router::new(), limits, async {})
            .await
            .unwrap_err();
        assert!(err.to_string().contains("max_connections"), "{err}");
    }
}

/// An idle keep-alive connection does not hold a connection slot forever:
/// the header-read timeout also covers the wait for the next request.
#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_after_the_timeout() {
    let limits = ServeLimits {
        header_read_timeout: Duration::from_millis(300),
        max_connections: 1,
    };
    let s = Server::start(limits, 1024).await;
    let mut conn = TcpStream::connect(s.addr).await.unwrap();
    conn.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    let closed = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match conn.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(
        closed.is_ok(),
        "the idle connection was still open after 20 s"
    );
    assert!(String::from_utf8_lossy(&got).starts_with("HTTP/1.1 200"));
    // Its slot is free again: with a limit of one, this is served.
    let r = s.http.get(s.url("/healthz")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
}
