//! `/v1/apps`: manifests imported (uploaded, or from an address through
//! the SSRF guard: loopback only with `[apps] allow_loopback_urls`),
//! approved, enabled per Discord server and disabled; malformed manifests
//! are 400 naming the field; a token bound to a user is 403.

use std::sync::Arc;

use hearth_server::ServeLimits;
use hearth_store::records::NewToken;
use serde_json::{Value, json};

use crate::harness::{Server, code, runtime, state};

fn manifest() -> Value {
    json!({
        "schema": 1,
        "app": {"name": "dj", "discord_bot_user_id": "700"},
        "version": "1.0.0",
        "actions": [
            {"name": "play", "description": "Plays a song", "trigger": {"prefix": "!play"},
             "args": [{"name": "song", "required": true}], "dispatch": "send_message"},
            {"name": "ban", "description": "Bans", "trigger": {"prefix": "!ban"},
             "dispatch": "send_message", "permissions": ["BAN_MEMBERS"]}
        ]
    })
}

/// A server whose config is `toml`.
async fn server(toml: &str) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let store = hearth_runtime::testing::store(dir.path());
    let rt = runtime(dir.path(), toml, &store, |b| b).await;
    let app = hearth_server::router(state(rt), 1 << 20);
    Server::serve(app, ServeLimits::default(), store, dir).await
}

/// Serves `body` as JSON at `/manifest.json` on loopback; its URL.
async fn serve_manifest(body: Value) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let body = Arc::new(body.to_string());
    let app = axum::Router::new().route(
        "/manifest.json",
        axum::routing::get(move || {
            let body = body.clone();
            async move { ([("content-type", "application/json")], (*body).clone()) }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/manifest.json")
}

async fn call(
    s: &Server,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut rb = s.http.request(method, s.url(path));
    if let Some(b) = body {
        rb = rb.json(&b);
    }
    let r = rb.send().await.unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_manifest_from_a_local_address_is_imported_approved_enabled_and_disabled() {
    let s = server("[apps]\nallow_loopback_urls = true\n").await;
    let url = serve_manifest(manifest()).await;
    let post = reqwest::Method::POST;
    let (status, v) = call(
        &s,
        post.clone(),
        "/v1/apps/manifests",
        Some(json!({"url": url})),
    )
    .await;
    assert_eq!(status, 201, "{v}");
    assert_eq!(
        v,
        json!({"app": "dj", "version": "1.0.0", "status": "pending"})
    );

    // A pending version cannot be enabled.
    let put = reqwest::Method::PUT;
    let enable = Some(json!({"version": "1.0.0"}));
    let (status, v) = call(&s, put.clone(), "/v1/apps/dj/guilds/100", enable.clone()).await;
    assert_eq!((status, code(&v)), (409, "conflict"), "{v}");

    let (status, v) = call(&s, post.clone(), "/v1/apps/dj/versions/1.0.0/approve", None).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (&v["status"], &v["public_dispatch_consent"]),
        (&json!("approved"), &json!(true))
    );
    assert_eq!(v["approved_by"], "api:operator:local");
    let (status, v) = call(&s, post.clone(), "/v1/apps/dj/versions/9/approve", None).await;
    assert_eq!((status, code(&v)), (404, "not_found"), "{v}");

    let (status, v) = call(&s, put.clone(), "/v1/apps/dj/guilds/100", enable.clone()).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (&v["guild_id"], &v["version"]),
        (&json!("100"), &json!("1.0.0"))
    );
    let (status, v) = call(&s, put, "/v1/apps/dj/guilds/not-a-guild", enable).await;
    assert_eq!((status, code(&v)), (400, "invalid_request"), "{v}");

    let (status, v) = call(&s, reqwest::Method::GET, "/v1/apps", None).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["apps"][0]["name"], "dj");
    assert_eq!(
        v["apps"][0]["versions"][0]["manifest"]["actions"][1]["name"],
        "ban"
    );
    assert_eq!(v["enablements"][0]["guild_id"], "100");

    // The same version again with other content is a conflict.
    let mut changed = manifest();
    changed["actions"][0]["description"] = json!("Plays anything");
    let (status, v) = call(&s, post, "/v1/apps/manifests", Some(changed)).await;
    assert_eq!((status, code(&v)), (409, "conflict"), "{v}");

    let del = reqwest::Method::DELETE;
    let (status, _) = call(&s, del.clone(), "/v1/apps/dj/guilds/100", None).await;
    assert_eq!(status, 204);
    let (status, v) = call(&s, del, "/v1/apps/dj/guilds/100", None).await;
    assert_eq!((status, code(&v)), (404, "not_found"), "{v}");
    let (_, v) = call(&s, reqwest::Method::GET, "/v1/apps", None).await;
    assert_eq!(v["enablements"], json!([]));
    let (_, audit) = call(&s, reqwest::Method::GET, "/v1/audit", None).await;
    let actions: Vec<&str> = audit["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["action"].as_str())
        .collect();
    for a in ["app.import", "app.approve", "app.enable", "app.disable"] {
        assert!(actions.contains(&a), "{a} missing from {actions:?}");
    }
}

#[tokio::test]
async fn a_malformed_manifest_is_a_400_naming_the_field() {
    let s = server("").await;
    let mut bad = manifest();
    bad["actions"][1]["trigger"]["prefix"] = json!("");
    let (status, v) = call(&s, reqwest::Method::POST, "/v1/apps/manifests", Some(bad)).await;
    assert_eq!((status, code(&v)), (400, "invalid_manifest"), "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains("actions[1].trigger.prefix"), "{message}");

    let mut unknown = manifest();
    unknown["app"]["colour"] = json!("red");
    let (status, v) = call(
        &s,
        reqwest::Method::POST,
        "/v1/apps/manifests",
        Some(unknown),
    )
    .await;
    assert_eq!((status, code(&v)), (400, "invalid_manifest"), "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("colour"),
        "{v}"
    );

    for junk in [json!([1]), json!("x"), json!({"url": 5})] {
        let (status, v) = call(&s, reqwest::Method::POST, "/v1/apps/manifests", Some(junk)).await;
        assert_eq!((status, code(&v)), (400, "invalid_manifest"), "{v}");
    }
}

#[tokio::test]
async fn loopback_addresses_are_refused_without_the_test_flag() {
    let s = server("").await;
    let url = serve_manifest(manifest()).await;
    let https = url.replace("http://", "https://");
    for u in [url, https, "https://localhost/m.json".to_owned()] {
        let (status, v) = call(
            &s,
            reqwest::Method::POST,
            "/v1/apps/manifests",
            Some(json!({"url": u})),
        )
        .await;
        assert_eq!((status, code(&v)), (400, "invalid_request"), "{u}: {v}");
    }
    let (_, v) = call(&s, reqwest::Method::GET, "/v1/apps", None).await;
    assert_eq!(v["apps"], json!([]), "nothing was imported");
}

#[tokio::test]
async fn a_token_bound_to_a_user_may_not_manage_apps() {
    let s = server("").await;
    let token = hearth_server::generate_token().unwrap();
    s.store
        .create_token(NewToken {
            id: "tok_ann".into(),
            name: "ann".into(),
            hash_hex: hearth_server::hash_token(&token),
            created_at: 0,
            user_key: Some("api:user:ann".into()),
        })
        .await
        .unwrap();
    for (method, path) in [
        (reqwest::Method::GET, "/v1/apps"),
        (reqwest::Method::POST, "/v1/apps/manifests"),
        (reqwest::Method::PUT, "/v1/apps/dj/guilds/1"),
    ] {
        let r = s
            .http
            .request(method, s.url(path))
            .bearer_auth(&token)
            .json(&manifest())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 403, "{path}");
    }
}
