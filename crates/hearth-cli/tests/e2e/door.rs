//! The door of a loopback hearth with no token, against the real binary:
//! what a web page on another site (or one whose name was rebound to
//! 127.0.0.1) can send a local hearth is refused, and changes nothing.

use serde_json::{Value, json};

use crate::harness::Hearth;

#[tokio::test]
async fn a_cross_site_grant_is_refused_and_grants_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), None).await;
    let grant = json!({"subject": "user:web:user:mallory", "capability": "preset:admin", "scope": "global"})
        .to_string();
    // A form or `fetch(..., {mode: "no-cors"})` from another site: text/plain
    // needs no CORS preflight, and the browser adds the page's Origin.
    let r = h
        .http
        .post(h.at("/v1/permissions/grants"))
        .header("content-type", "text/plain;charset=UTF-8")
        .header("origin", "https://evil.example")
        .body(grant.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "forbidden_origin", "{v}");
    // The same body without an Origin (not a browser) is still not JSON.
    let r = h
        .http
        .post(h.at("/v1/permissions/grants"))
        .header("content-type", "text/plain")
        .body(grant.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 415);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "unsupported_media_type", "{v}");
    // A page whose name points at 127.0.0.1 sends its own name as Host.
    let r = h
        .http
        .post(h.at("/v1/permissions/grants"))
        .header("content-type", "application/json")
        .header("host", "evil.example:7777")
        .body(grant)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);

    let (s, v) = h.get("/v1/permissions").await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["grants"], json!([]), "{v}");
    let (_, v) = h
        .get("/v1/permissions/check?user_key=web:user:mallory&capability=jobs.manage")
        .await;
    assert_eq!(v["allowed"], false, "{v}");
    let (_, v) = h.get("/v1/audit").await;
    assert_eq!(v["events"], json!([]), "{v}");
}

#[tokio::test]
async fn a_rebound_name_reads_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), None).await;
    for path in [
        "/v1/runs",
        "/v1/threads/api:default/history",
        "/healthz",
        "/metrics",
        "/openapi.json",
    ] {
        let r = h
            .http
            .get(h.at(path))
            .header("host", "evil.example")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 403, "{path}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"]["code"], "forbidden_host", "{path}: {v}");
    }
    // Its own names still work.
    let port = h.url.rsplit(':').next().unwrap().to_owned();
    for host in [format!("localhost:{port}"), format!("127.0.0.1:{port}")] {
        let r = h
            .http
            .get(h.at("/healthz"))
            .header("host", &host)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200, "{host}");
    }
}
