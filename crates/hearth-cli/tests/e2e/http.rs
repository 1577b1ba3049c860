//! The HTTP layer of the real binary: slow clients, the error envelope for
//! every refusal, token revocation, and `/metrics`.

use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::harness::{Hearth, command};

/// Opens a connection that starts a request head and then sends one header
/// line every `every`, never finishing it. Resolves when the server closes
/// the connection (a read returns end of file or an error).
async fn slow_client(addr: String, every: Duration) {
    let mut conn = TcpStream::connect(&addr).await.unwrap();
    conn.write_all(b"GET /healthz HTTP/1.1\r\nHost: slow\r\n")
        .await
        .unwrap();
    let (mut rd, mut wr) = conn.into_split();
    let drip = async move {
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            if wr.write_all(b"X-Slow: 1\r\n").await.is_err() {
                // A reset on write also means the server closed it.
                std::future::pending::<()>().await;
            }
        }
    };
    let closed = async move {
        let mut buf = [0u8; 1024];
        loop {
            match rd.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                // hyper may answer 408 before closing; keep reading to the end.
                Ok(_) => {}
            }
        }
    };
    tokio::select! {
        () = closed => {}
        () = drip => {}
    }
}

/// Item 17: 100 connections that send one header line every 150 ms are
/// closed by the header-read timeout, while ordinary requests, queued behind
/// them by the connection limit, are served.
#[tokio::test]
async fn slow_header_clients_are_closed_while_others_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let config = "[server]\nheader_read_timeout_ms = 500\nmax_connections = 32\n";
    let h = Hearth::start(dir.path(), Some(config)).await;
    let addr = h.url.trim_start_matches("http://").to_owned();
    let slow: Vec<_> = (0..100)
        .map(|_| tokio::spawn(slow_client(addr.clone(), Duration::from_millis(150))))
        .collect();
    // Ordinary requests are answered although more slow clients than the
    // connection limit are open.
    for _ in 0..5 {
        let r = tokio::time::timeout(Duration::from_secs(30), h.get("/healthz"))
            .await
            .expect("an ordinary request was not served within 30 s");
        assert_eq!(r.0, 200);
    }
    // Every slow connection is closed by the server (without the timeout
    // they stay open for as long as the client keeps dripping).
    let all_closed = async {
        for task in slow {
            task.await.unwrap();
        }
    };
    tokio::time::timeout(Duration::from_secs(30), all_closed)
        .await
        .expect("slow-header connections were still open after 30 s");
    assert_eq!(h.get("/healthz").await.0, 200);
}

fn code(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or("")
}

async fn raw(
    h: &Hearth,
    method: &str,
    path: &str,
    body: Vec<u8>,
) -> (u16, reqwest::header::HeaderMap, Value) {
    let r = h
        .http
        .request(method.parse().unwrap(), h.at(path))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    let text = r.text().await.unwrap();
    let v = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{method} {path}: not JSON ({e}): {text:?}"));
    (status, headers, v)
}

/// Items 1, 12 and 18: refusals made before a handler runs, or by a parser
/// that used to panic, answer in the error envelope.
#[tokio::test]
async fn every_refusal_answers_in_the_envelope() {
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some("[server]\nmax_body_bytes = 1024\n")).await;

    // The age parser split a multibyte character and the connection dropped.
    let (s, _, v) = raw(&h, "GET", "/v1/usage?since=7%C3%A9", vec![]).await;
    assert_eq!((s, code(&v)), (400, "invalid_request"), "{v}");

    let (s, headers, v) = raw(&h, "DELETE", "/v1/runs", vec![]).await;
    assert_eq!((s, code(&v)), (405, "method_not_allowed"), "{v}");
    assert_eq!(headers["allow"], "GET,HEAD");

    let big = format!("{{\"text\":\"{}\"}}", "x".repeat(4096)).into_bytes();
    let (s, _, v) = raw(&h, "POST", "/v1/messages", big).await;
    assert_eq!((s, code(&v)), (413, "payload_too_large"), "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("limit of 1024 bytes"),
        "{v}"
    );

    for path in [
        "/v1/runs/%FF",
        "/v1/runs/%FF/events",
        "/v1/threads/%C3%28/runtime",
    ] {
        let (s, _, v) = raw(&h, "GET", path, vec![]).await;
        assert_eq!((s, code(&v)), (400, "invalid_request"), "{path}: {v}");
    }
}

async fn hearth_cli(h: &Hearth, args: &[&str]) -> String {
    crate::harness::succeeds(command(&h.home).args(args)).await
}

/// Item 18: a lower-case `bearer` scheme is accepted, and a token revoked
/// with `hearth token revoke` is refused on the very next request.
#[tokio::test]
async fn a_revoked_token_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), None).await;
    let created: Value =
        serde_json::from_str(&hearth_cli(&h, &["--json", "token", "create"]).await).unwrap();
    let token = created["token"].as_str().unwrap().to_owned();
    let id = created["id"].as_str().unwrap().to_owned();
    let get = |auth: String| {
        let req = h.http.get(h.at("/v1/models")).header("authorization", auth);
        async move { req.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(get(format!("Bearer {token}")).await, 200);
    assert_eq!(get(format!("bearer {token}")).await, 200);
    assert_eq!(get(format!("BEARER  {token}")).await, 200);
    hearth_cli(&h, &["token", "revoke", &id]).await;
    assert_eq!(get(format!("Bearer {token}")).await, 401);
}

/// `/metrics` describes its metrics and counts requests by route template
/// and status, and auth failures.
#[tokio::test]
async fn metrics_have_help_lines_and_http_series() {
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), None).await;
    assert_eq!(h.get("/v1/runs/run_nope").await.0, 404);
    let created = hearth_cli(&h, &["token", "create"]).await;
    assert!(created.trim().starts_with("hth_"));
    assert_eq!(h.get("/v1/models").await.0, 401);
    let text = h
        .http
        .get(h.at("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for help in [
        "# HELP hearth_http_requests_total",
        "# HELP hearth_http_request_duration_seconds",
        "# HELP hearth_auth_failures_total",
        "# HELP hearth_runs_in_flight",
    ] {
        assert!(text.contains(help), "{help} missing from:\n{text}");
    }
    let series = |route: &str, status: &str| {
        text.lines().any(|l| {
            l.starts_with("hearth_http_requests_total{")
                && l.contains(&format!("route=\"{route}\""))
                && l.contains(&format!("status=\"{status}\""))
        })
    };
    assert!(series("/v1/runs/{run_id}", "404"), "{text}");
    assert!(series("/v1/models", "401"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("hearth_auth_failures_total ") && !l.ends_with(" 0")),
        "{text}"
    );
}
