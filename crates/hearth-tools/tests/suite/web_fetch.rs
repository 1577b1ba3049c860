//! `web_fetch` against hostile targets and a fake server on loopback.
//!
//! Nothing here leaves 127.0.0.1: hostile IP literals are refused before any
//! connection, and every host name used is answered by the test-only
//! resolver override (`public.test` → the fake, `internal.test` → 10.0.0.5,
//! ...), so no DNS query is made.
//!
//! The fake is a few lines of HTTP/1.1 over a tokio listener rather than
//! axum, because axum is not a dev-dependency of this crate.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] fns unwrap what the test set up"
)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use hearth_tools::web::{WebFetch, WebFetchConfig};
use hearth_tools::{Tool, ToolClass, ToolContext, ToolRegistry};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const PAGE: &str = r#"<!DOCTYPE html>
<html><head><title>Fake &amp; Friendly</title>
<style>body { display: none }</style>
<script>var secret = "do not show";</script></head>
<body><h1>Welcome</h1><p>Caf&eacute; &lt;open&gt; &#8212; daily</p>
<noscript>turn on scripts</noscript>
<ul><li>one</li><li>two</li></ul></body></html>"#;

/// One canned response.
struct Reply {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
    /// Send Content-Length (else the body runs to EOF).
    length: bool,
}

fn reply(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Reply {
    Reply {
        status,
        headers: vec![("Content-Type", content_type.to_owned())],
        body: body.into(),
        length: true,
    }
}

fn redirect(to: &str) -> Reply {
    Reply {
        status: 302,
        headers: vec![("Location", to.to_owned())],
        body: Vec::new(),
        length: true,
    }
}

/// The fake site's routes.
fn route(target: &str) -> Reply {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    match path {
        "/page.html" => reply(200, "text/html; charset=utf-8", PAGE),
        "/data.json" => reply(200, "application/json", r#"{"ok":true,"n":[1,2,3]}"#),
        "/feed" => reply(200, "application/rss+xml", "<rss><channel/></rss>"),
        "/long" => reply(200, "text/plain", "x".repeat(50_000)),
        "/missing" => reply(404, "text/plain", "no such page"),
        // Location is whatever follows `to=`, verbatim.
        "/redirect" => redirect(query.strip_prefix("to=").unwrap_or("/")),
        "/loop-a" => redirect("http://public.test/loop-b"),
        "/loop-b" => redirect("/loop-a"),
        "/self" => redirect("/self#again"),
        "/big" => reply(200, "text/plain", vec![b'a'; 3 * 1024 * 1024]),
        "/big-stream" => Reply {
            length: false,
            ..reply(200, "text/plain", vec![b'b'; 3 * 1024 * 1024])
        },
        "/image.png" => reply(200, "image/png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec()),
        "/blob" => reply(200, "application/octet-stream", vec![0u8; 64]),
        "/untyped-binary" => Reply {
            headers: vec![],
            ..reply(200, "", b"GIF89a\0\0\x01".to_vec())
        },
        "/untyped-text" => Reply {
            headers: vec![],
            ..reply(200, "", "plain words")
        },
        p if p.starts_with("/chain/") => {
            let n: u32 = p["/chain/".len()..].parse().unwrap_or(0);
            if n == 0 {
                reply(200, "text/plain", "end of chain")
            } else {
                redirect(&format!("/chain/{}", n - 1))
            }
        }
        _ => reply(404, "text/plain", "not found"),
    }
}

async fn serve_one(mut stream: TcpStream) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 16 * 1024 {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let head = String::from_utf8_lossy(&buf);
    let target = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
    let r = route(&target);
    let mut out = format!("HTTP/1.1 {} X\r\nConnection: close\r\n", r.status);
    for (k, v) in &r.headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    if r.length {
        out.push_str(&format!("Content-Length: {}\r\n", r.body.len()));
    }
    out.push_str("\r\n");
    let _ = stream.write_all(out.as_bytes()).await;
    // A client that refuses a large body hangs up early; that is fine.
    let _ = stream.write_all(&r.body).await;
    let _ = stream.shutdown().await;
}

/// Starts the fake on 127.0.0.1:0 and returns its address.
async fn fake() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve_one(stream));
        }
    });
    addr
}

fn sa(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// Test config: the fake is the one allowed address; names point at it or
/// at hostile addresses.
fn config(fake: SocketAddr) -> WebFetchConfig {
    let port = fake.port();
    let overrides: HashMap<String, Vec<SocketAddr>> = [
        ("public.test", vec![fake]),
        ("internal.test", vec![sa("10.0.0.5:80")]),
        ("metadata.test", vec![sa("169.254.169.254:80")]),
        ("loopback.test", vec![sa("127.0.0.1:80")]),
        ("otherloop.test", vec![sa(&format!("127.0.0.2:{port}"))]),
        (
            "mapped.test",
            vec![sa(&format!("[::ffff:127.0.0.1]:{port}"))],
        ),
        ("ula.test", vec![sa("[fd00::1]:80")]),
        ("cgnat.test", vec![sa("100.64.0.1:80")]),
        (
            "allbad.test",
            vec![sa("10.1.1.1:80"), sa("192.168.0.1:80"), sa("[::1]:80")],
        ),
        ("mixed.test", vec![sa("10.0.0.1:80"), fake]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    WebFetchConfig {
        allow_for_tests: Some(fake),
        resolve_overrides: overrides,
        timeout: Duration::from_secs(20),
        connect_timeout: Duration::from_secs(5),
        ..WebFetchConfig::default()
    }
}

async fn fetch(tool: &WebFetch, url: &str) -> Result<Value, String> {
    tool.call(&ToolContext::default(), json!({ "url": url }))
        .await
        .map_err(|e| e.0)
}

/// Hostile targets and a piece of the error each must produce.
fn hostile(fake: SocketAddr) -> Vec<(String, String)> {
    let port = fake.port();
    let r = |to: &str| format!("http://public.test/redirect?to={to}");
    let rows: Vec<(String, &str)> = vec![
        // Obfuscated IPv4 loopback, normalised by the URL parser.
        (
            "http://2130706433/".into(),
            "127.0.0.1 is a loopback address (written as 2130706433)",
        ),
        (
            "http://0177.0.0.1/".into(),
            "127.0.0.1 is a loopback address (written as 0177.0.0.1)",
        ),
        (
            "http://0x7f.0.0.1/".into(),
            "127.0.0.1 is a loopback address (written as 0x7f.0.0.1)",
        ),
        (
            "http://0x7f000001/".into(),
            "127.0.0.1 is a loopback address (written as 0x7f000001)",
        ),
        (
            "http://017700000001/".into(),
            "127.0.0.1 is a loopback address",
        ),
        (
            "http://127.1/".into(),
            "127.0.0.1 is a loopback address (written as 127.1)",
        ),
        (
            "http://127.0.1/".into(),
            "127.0.0.1 is a loopback address (written as 127.0.1)",
        ),
        (
            "http://%31%32%37.0.0.1/".into(),
            "127.0.0.1 is a loopback address",
        ),
        (
            "http://127.0.0.1/".into(),
            "refused: 127.0.0.1 is a loopback address",
        ),
        (
            format!("http://127.0.0.2:{port}/"),
            "127.0.0.2 is a loopback address",
        ),
        (
            "http://0/".into(),
            "0.0.0.0 is an unspecified address (written as 0)",
        ),
        (
            "http://0.0.0.0/".into(),
            "0.0.0.0 is an unspecified address",
        ),
        ("http://0.1.2.3/".into(), "this-network"),
        (
            "http://134744072/".into(),
            "non-canonical form \"134744072\"; write it as 8.8.8.8",
        ),
        // IPv6 loopback, unspecified and IPv4-mapped forms.
        ("http://[::1]/".into(), "::1 is a loopback address"),
        (format!("http://[::1]:{port}/"), "::1 is a loopback address"),
        (
            "http://[0:0:0:0:0:0:0:1]/".into(),
            "::1 is a loopback address",
        ),
        ("http://[::]/".into(), ":: is an unspecified address"),
        (
            "http://[::ffff:127.0.0.1]/".into(),
            "::ffff:127.0.0.1 is a loopback address",
        ),
        (
            "http://[::ffff:7f00:1]/".into(),
            "::ffff:127.0.0.1 is a loopback address",
        ),
        ("http://[::ffff:169.254.169.254]/".into(), "cloud metadata"),
        (
            "http://[::ffff:8.8.8.8]/".into(),
            "is an IPv4-mapped address",
        ),
        ("http://[::127.0.0.1]/".into(), "IPv4-compatible"),
        ("http://[64:ff9b::a00:1]/".into(), "private (embedded IPv4)"),
        ("http://[2002:7f00:1::]/".into(), "loopback (embedded IPv4)"),
        (
            "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/".into(),
            "Teredo",
        ),
        // Cloud metadata.
        (
            "http://169.254.169.254/latest/meta-data/".into(),
            "169.254.169.254 is a cloud metadata address",
        ),
        (
            "http://[fd00:ec2::254]/".into(),
            "fd00:ec2::254 is a cloud metadata address",
        ),
        (
            "http://100.100.100.200/".into(),
            "100.100.100.200 is a cloud metadata address",
        ),
        (
            "http://2852039166/".into(),
            "169.254.169.254 is a cloud metadata address",
        ),
        // Private, link-local, CGNAT, documentation, multicast, reserved.
        (
            "http://10.0.0.1/".into(),
            "refused: 10.0.0.1 is a private address",
        ),
        (
            "https://172.16.5.4/".into(),
            "172.16.5.4 is a private address",
        ),
        ("http://172.31.255.255/".into(), "is a private address"),
        (
            "http://192.168.1.1/".into(),
            "192.168.1.1 is a private address",
        ),
        (
            "http://169.254.1.1/".into(),
            "169.254.1.1 is a link-local address",
        ),
        (
            "http://[fe80::1]/".into(),
            "fe80::1 is a link-local address",
        ),
        ("http://100.64.0.1/".into(), "shared CGNAT"),
        (
            "http://192.0.2.1/".into(),
            "192.0.2.1 is a documentation address",
        ),
        ("http://198.51.100.1/".into(), "is a documentation address"),
        ("http://203.0.113.1/".into(), "is a documentation address"),
        (
            "http://[2001:db8::1]/".into(),
            "2001:db8::1 is a documentation address",
        ),
        (
            "http://224.0.0.1/".into(),
            "224.0.0.1 is a multicast address",
        ),
        ("http://[ff02::1]/".into(), "ff02::1 is a multicast address"),
        ("http://255.255.255.255/".into(), "is a broadcast address"),
        ("http://198.18.0.1/".into(), "benchmarking"),
        ("http://240.0.0.1/".into(), "reserved (240/4)"),
        (
            "http://[fc00::1]/".into(),
            "fc00::1 is a unique-local address",
        ),
        // Names that resolve (through the override) to non-public addresses.
        (
            "http://internal.test/".into(),
            "internal.test resolves only to non-public addresses (10.0.0.5 private)",
        ),
        (
            "http://metadata.test/".into(),
            "(169.254.169.254 cloud metadata)",
        ),
        ("http://loopback.test/".into(), "(127.0.0.1 loopback)"),
        ("http://otherloop.test/".into(), "(127.0.0.2 loopback)"),
        ("http://mapped.test/".into(), "(::ffff:127.0.0.1 loopback)"),
        ("http://ula.test/".into(), "(fd00::1 unique-local)"),
        ("http://cgnat.test/".into(), "(100.64.0.1 shared CGNAT"),
        (
            "http://allbad.test/".into(),
            "10.1.1.1 private, 192.168.0.1 private, ::1 loopback",
        ),
        ("http://localhost/".into(), "localhost is a loopback name"),
        (format!("http://LOCALHOST.:{port}/"), "is a loopback name"),
        (
            "http://api.localhost/".into(),
            "api.localhost is a loopback name",
        ),
        ("http://ⓛocalhost/".into(), "localhost is a loopback name"),
        // Schemes.
        (
            "file:///etc/passwd".into(),
            "refused: scheme file: is not allowed",
        ),
        ("ftp://public.test/".into(), "scheme ftp: is not allowed"),
        (
            "gopher://public.test:70/_GET".into(),
            "scheme gopher: is not allowed",
        ),
        (
            "data:text/plain,hello".into(),
            "scheme data: is not allowed",
        ),
        (
            "javascript:alert(1)".into(),
            "scheme javascript: is not allowed",
        ),
        ("not a url".into(), "not a valid URL"),
        // Userinfo tricks and ports.
        (
            "http://public.test@127.0.0.1/".into(),
            "127.0.0.1 is a loopback address",
        ),
        (
            format!("http://public.test:{port}@127.0.0.1/"),
            "127.0.0.1 is a loopback address",
        ),
        (
            "http://user:pass@public.test/".into(),
            "user names and passwords in URLs are not allowed",
        ),
        (
            "http://public.test:8080/".into(),
            "refused: port 8080 is not allowed",
        ),
        ("https://public.test:22/".into(), "port 22 is not allowed"),
        ("http://8.8.8.8:25/".into(), "port 25 is not allowed"),
        // Redirects from the public-looking fake to forbidden places.
        (
            r("http://10.0.0.1/"),
            "refused: redirect to http://10.0.0.1/ (private)",
        ),
        (
            r("http://127.0.0.1/"),
            "refused: redirect to http://127.0.0.1/ (loopback)",
        ),
        (
            r("http://2130706433/"),
            "refused: redirect to http://127.0.0.1/ (loopback)",
        ),
        (
            r("http://169.254.169.254/latest/meta-data/"),
            "redirect to http://169.254.169.254/latest/meta-data/ (cloud metadata)",
        ),
        (r(&format!("http://[::1]:{port}/")), "(loopback)"),
        (
            r("//192.168.0.1/admin"),
            "redirect to http://192.168.0.1/admin (private)",
        ),
        (
            r("file:///etc/passwd"),
            "redirect to file:///etc/passwd (scheme file: is not allowed",
        ),
        (
            r("http://internal.test/"),
            "redirect to http://internal.test/ (internal.test resolves only to non-public addresses (10.0.0.5 private))",
        ),
        (
            r("http://localhost/"),
            "redirect to http://localhost/ (localhost is a loopback name)",
        ),
        (
            r("http://public.test:8080/"),
            "redirect to http://public.test:8080/ (port 8080 is not allowed",
        ),
        (
            r("http://u:p@public.test/"),
            "(user names and passwords in URLs are not allowed)",
        ),
        (
            "http://public.test/loop-a".into(),
            "refused: redirect loop at http://public.test/loop-a",
        ),
        (
            "http://public.test/self".into(),
            "refused: redirect loop at http://public.test/self",
        ),
        (
            "http://public.test/chain/6".into(),
            "refused: too many redirects (5)",
        ),
        (
            "http://public.test/chain/40".into(),
            "refused: too many redirects (5)",
        ),
        // Bodies.
        (
            "http://public.test/big".into(),
            "response larger than 2097152 bytes",
        ),
        (
            "http://public.test/big-stream".into(),
            "response larger than 2097152 bytes",
        ),
        (
            "http://public.test/image.png".into(),
            "refused: content type image/png is not text",
        ),
        (
            "http://public.test/blob".into(),
            "content type application/octet-stream is not text",
        ),
        (
            "http://public.test/untyped-binary".into(),
            "no content type and looks binary",
        ),
    ];
    rows.into_iter().map(|(u, e)| (u, e.to_owned())).collect()
}

#[tokio::test]
async fn hostile_targets_are_refused_with_the_right_error() {
    let fake = fake().await;
    let tool = WebFetch::new(config(fake));
    let table = hostile(fake);
    assert!(table.len() >= 40, "only {} hostile targets", table.len());
    let mut wrong = Vec::new();
    for (url, want) in &table {
        match fetch(&tool, url).await {
            Ok(v) => wrong.push(format!("{url}: fetched! {v}")),
            Err(e) if e.contains(want.as_str()) => println!("{url}\n    {e}"),
            Err(e) => wrong.push(format!("{url}: got {e:?}, want {want:?}")),
        }
    }
    assert!(
        wrong.is_empty(),
        "{} wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    println!("{} hostile targets refused", table.len());
}

#[tokio::test]
async fn without_the_test_allowance_loopback_is_refused_even_via_override() {
    let fake = fake().await;
    let tool = WebFetch::new(WebFetchConfig {
        allow_for_tests: None,
        ..config(fake)
    });
    let e = fetch(&tool, "http://public.test/data.json")
        .await
        .unwrap_err();
    assert!(
        e.contains("public.test resolves only to non-public addresses (127.0.0.1 loopback)"),
        "{e}"
    );
    let e = fetch(
        &tool,
        &format!("http://127.0.0.1:{}/data.json", fake.port()),
    )
    .await
    .unwrap_err();
    assert!(e.contains("127.0.0.1 is a loopback address"), "{e}");
}

#[tokio::test]
async fn html_becomes_text_with_title() {
    let fake = fake().await;
    let tool = WebFetch::new(config(fake));
    let v = fetch(&tool, "http://public.test/page.html").await.unwrap();
    assert_eq!(v["url"], "http://public.test/page.html");
    assert_eq!(v["status"], 200);
    assert_eq!(v["content_type"], "text/html");
    assert_eq!(v["title"], "Fake & Friendly");
    assert_eq!(v["text"], "Welcome\n\nCafé <open> — daily\n\n- one\n- two");
    assert_eq!(v["truncated"], false);
}

#[tokio::test]
async fn json_and_xml_pass_through() {
    let fake = fake().await;
    let tool = WebFetch::new(config(fake));
    let v = fetch(&tool, "http://public.test/data.json").await.unwrap();
    assert_eq!(v["content_type"], "application/json");
    assert_eq!(v["text"], r#"{"ok":true,"n":[1,2,3]}"#);
    assert_eq!(v["title"], Value::Null);
    let v = fetch(&tool, "http://public.test/feed").await.unwrap();
    assert_eq!(v["content_type"], "application/rss+xml");
    assert_eq!(v["text"], "<rss><channel/></rss>");
    let v = fetch(&tool, "http://public.test/untyped-text")
        .await
        .unwrap();
    assert_eq!(v["content_type"], "text/plain");
    assert_eq!(v["text"], "plain words");
}

#[tokio::test]
async fn redirect_chains_within_the_allowed_fake_work() {
    let fake = fake().await;
    let tool = WebFetch::new(config(fake));
    let v = fetch(&tool, "http://public.test/chain/3").await.unwrap();
    assert_eq!(v["url"], "http://public.test/chain/0");
    assert_eq!(v["text"], "end of chain");
    // Exactly the limit is still fine.
    let v = fetch(&tool, "http://public.test/chain/5").await.unwrap();
    assert_eq!(v["url"], "http://public.test/chain/0");
    // An absolute redirect to another allowed name.
    let v = fetch(
        &tool,
        "http://public.test/redirect?to=http://mixed.test/data.json",
    )
    .await
    .unwrap();
    assert_eq!(v["url"], "http://mixed.test/data.json");
    assert_eq!(v["status"], 200);
}

#[tokio::test]
async fn resolver_drops_non_public_addresses_and_keeps_the_rest() {
    let fake = fake().await;
    let tool = WebFetch::new(config(fake));
    // mixed.test → [10.0.0.1, the fake]: 10.0.0.1 is dropped, never tried.
    let v = fetch(&tool, "http://mixed.test/data.json").await.unwrap();
    assert_eq!(v["status"], 200);
    // The one allowed address also works as a literal.
    let v = fetch(
        &tool,
        &format!("http://127.0.0.1:{}/data.json", fake.port()),
    )
    .await
    .unwrap();
    assert_eq!(v["status"], 200);
}

#[tokio::test]
async fn long_text_is_truncated_with_a_note_and_errors_keep_their_status() {
    let fake = fake().await;
    let tool = WebFetch::new(config(fake));
    let v = tool
        .call(
            &ToolContext::default(),
            json!({"url": "http://public.test/long", "max_chars": 100}),
        )
        .await
        .unwrap();
    assert_eq!(v["truncated"], true);
    let text = v["text"].as_str().unwrap();
    assert!(text.starts_with(&"x".repeat(100)), "{text}");
    assert!(!text.starts_with(&"x".repeat(101)), "{text}");
    assert!(text.contains("[truncated: showing the first 100 of 50000 characters"));
    let v = fetch(&tool, "http://public.test/long").await.unwrap();
    assert_eq!(v["truncated"], true);
    assert!(v["text"].as_str().unwrap().contains("first 20000 of 50000"));

    let v = fetch(&tool, "http://public.test/missing").await.unwrap();
    assert_eq!(v["status"], 404);
    assert_eq!(v["text"], "no such page");
}

#[tokio::test]
async fn arguments_are_checked() {
    let tool = WebFetch::new(WebFetchConfig::default());
    let err = |args: Value| {
        let tool = &tool;
        async move {
            tool.call(&ToolContext::default(), args)
                .await
                .unwrap_err()
                .0
        }
    };
    assert!(err(json!({})).await.contains("url is required"));
    assert!(err(json!({"url": 5})).await.contains("url must be"));
    assert!(
        err(json!({"url": "http://x/", "max_chars": 0}))
            .await
            .contains("max_chars")
    );
    assert!(
        err(json!({"url": "http://x/", "max_chars": -3}))
            .await
            .contains("max_chars")
    );
    assert!(
        err(json!({"url": "http://x/", "max_chars": "9"}))
            .await
            .contains("max_chars")
    );
    assert!(
        err(json!({"url": "http://x/", "verb": "POST"}))
            .await
            .contains("unknown argument")
    );
}

#[tokio::test]
async fn spec_class_and_registry_integration() {
    let fake = fake().await;
    let tool = WebFetch::new(config(fake));
    assert_eq!(tool.spec().name, "web_fetch");
    assert_eq!(tool.class(), ToolClass::Read);
    let params = &tool.spec().parameters;
    assert_eq!(params["required"], json!(["url"]));
    assert_eq!(params["properties"]["url"]["type"], "string");
    assert_eq!(params["properties"]["max_chars"]["type"], "integer");

    let mut registry = ToolRegistry::new();
    registry.register(std::sync::Arc::new(tool));
    let out = registry
        .execute(
            &ToolContext::default(),
            "web_fetch",
            r#"{"url": "http://public.test/data.json"}"#,
            Duration::from_secs(20),
        )
        .await;
    assert!(!out.is_error, "{}", out.json);
    let out = registry
        .execute(
            &ToolContext::default(),
            "web_fetch",
            r#"{"url": "http://10.0.0.1/"}"#,
            Duration::from_secs(20),
        )
        .await;
    assert!(out.is_error);
    let v: Value = serde_json::from_str(&out.json).unwrap();
    assert_eq!(v["error"], "refused: 10.0.0.1 is a private address");
}
