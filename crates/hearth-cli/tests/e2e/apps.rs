//! `hearth apps` end to end: a manifest file imported, approved, enabled
//! in a Discord server, listed and disabled through the running server;
//! a malformed file is refused naming the field.

use serde_json::json;

use crate::harness::{Hearth, fake_config, hearth};

const MANIFEST: &str = r#"{
  "schema": 1,
  "app": {"name": "dj", "discord_application_id": "700"},
  "version": "2.1",
  "actions": [
    {"name": "play", "description": "Plays a song", "trigger": {"prefix": "!play"},
     "args": [{"name": "song", "required": true}], "dispatch": "send_message"}
  ]
}"#;

#[tokio::test]
async fn apps_are_imported_approved_enabled_listed_and_disabled_from_the_cli() {
    let fake = hearth_testkit::FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let h = Hearth::start(&home, Some(&fake_config(&fake.base_url()))).await;
    let file = dir.path().join("dj.json");
    std::fs::write(&file, MANIFEST).unwrap();
    let file = file.to_str().unwrap();

    let (code, out, err) = hearth(&h, &["apps", "import", file]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("imported dj version 2.1 (pending)"), "{out}");
    let (code, _, err) = hearth(&h, &["apps", "enable", "dj", "2.1", "--guild", "55"]).await;
    assert_ne!(code, 0, "a pending version is not enabled");
    assert!(err.contains("approve it first"), "{err}");
    let (code, out, err) = hearth(&h, &["apps", "approve", "dj", "2.1"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("approved dj version 2.1"), "{out}");
    let (code, out, err) = hearth(&h, &["apps", "enable", "dj", "2.1", "--guild", "55"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("enabled in server 55"), "{out}");

    let (code, out, err) = hearth(&h, &["apps", "list"]).await;
    assert_eq!(code, 0, "{err}");
    let line = out
        .lines()
        .find(|l| l.starts_with("dj"))
        .unwrap_or_default();
    for word in ["2.1", "approved", "55"] {
        assert!(line.contains(word), "{word} not in {out}");
    }
    let (code, out, _) = hearth(&h, &["--json", "apps", "list"]).await;
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["enablements"][0]["guild_id"], "55");
    assert_eq!(
        v["apps"][0]["versions"][0]["public_dispatch_consent"],
        json!(true)
    );

    let (code, out, err) = hearth(&h, &["apps", "disable", "dj", "--guild", "55"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("disabled in server 55"), "{out}");
    let (code, _, err) = hearth(&h, &["apps", "disable", "dj", "--guild", "55"]).await;
    assert_ne!(code, 0);
    assert!(err.contains("not enabled"), "{err}");

    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, MANIFEST.replace("\"!play\"", "\"\"")).unwrap();
    let (code, _, err) = hearth(&h, &["apps", "import", bad.to_str().unwrap()]).await;
    assert_ne!(code, 0);
    assert!(err.contains("actions[0].trigger.prefix"), "{err}");
}

/// Serves `body` as JSON at `/dj.json` on loopback; its URL.
async fn serve(body: &'static str) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new().route(
        "/dj.json",
        axum::routing::get(move || async move { ([("content-type", "application/json")], body) }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/dj.json")
}

#[tokio::test]
async fn a_manifest_is_imported_from_an_address_only_where_the_test_flag_allows_loopback() {
    let fake = hearth_testkit::FakeOpenAi::start().await;
    let url = serve(MANIFEST).await;
    let dir = tempfile::tempdir().unwrap();
    let refused = Hearth::start(&dir.path().join("a"), Some(&fake_config(&fake.base_url()))).await;
    let (code, _, err) = hearth(&refused, &["apps", "import", &url]).await;
    assert_ne!(code, 0, "loopback is refused by default");
    assert!(err.contains("https"), "{err}");

    let config = format!(
        "{}\n[apps]\nallow_loopback_urls = true\n",
        fake_config(&fake.base_url())
    );
    let h = Hearth::start(&dir.path().join("b"), Some(&config)).await;
    let (code, out, err) = hearth(&h, &["apps", "import", &url]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("imported dj version 2.1 (pending)"), "{out}");
}
