//! Bad input gets the documented error, never a panic or a silent drop.

use serde_json::{Value, json};

use crate::harness::{Hearth, command};

async fn post_raw(h: &Hearth, body: impl Into<reqwest::Body>) -> (u16, Value) {
    let r = h
        .http
        .post(h.at("/v1/messages"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

fn code(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or("<none>")
}

#[tokio::test]
async fn bad_requests_get_documented_errors() {
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), None).await;
    let cases: Vec<(&str, String, u16, &str)> = vec![
        (
            "empty text",
            json!({ "text": "" }).to_string(),
            400,
            "invalid_request",
        ),
        (
            "blank text",
            json!({ "text": "  \n" }).to_string(),
            400,
            "invalid_request",
        ),
        (
            "missing text",
            json!({ "thread_key": "api:x" }).to_string(),
            400,
            "invalid_request",
        ),
        (
            "unknown field",
            json!({ "text": "hi", "colour": "red" }).to_string(),
            400,
            "invalid_request",
        ),
        ("bad json", "{\"text\": ".to_owned(), 400, "invalid_request"),
        ("not an object", "[1,2]".to_owned(), 400, "invalid_request"),
        (
            "wrong type",
            json!({ "text": 5 }).to_string(),
            400,
            "invalid_request",
        ),
        (
            "bad delivery mode",
            json!({ "text": "hi", "delivery_mode": "shout" }).to_string(),
            400,
            "invalid_request",
        ),
        (
            "wait too long",
            json!({ "text": "hi", "wait_timeout_secs": 601 }).to_string(),
            400,
            "invalid_request",
        ),
        ("empty body", String::new(), 400, "invalid_request"),
        (
            "control chars in thread",
            json!({ "text": "hi", "thread_key": "a\u{0}b" }).to_string(),
            400,
            "invalid_request",
        ),
    ];
    for (name, body, status, want) in cases {
        let (s, v) = post_raw(&h, body).await;
        assert_eq!((s, code(&v)), (status, want), "{name}: {v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{name}"
        );
    }
    let big = json!({ "text": "x".repeat(1024 * 1024 + 10) }).to_string();
    let (s, v) = post_raw(&h, big).await;
    assert_eq!((s, code(&v)), (413, "payload_too_large"), "{v}");

    let (s, v) = h.get("/v1/runs/run_doesnotexist").await;
    assert_eq!((s, code(&v)), (404, "not_found"));
    let (s, v) = h.get("/v1/runs/run_doesnotexist/events").await;
    assert_eq!((s, code(&v)), (404, "not_found"));
    let (s, v) = h.get("/v1/runs/run_doesnotexist/trace").await;
    assert_eq!((s, code(&v)), (404, "not_found"));
    let r = h
        .http
        .post(h.at("/v1/runs/run_doesnotexist/cancel"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    let (s, v) = h.get("/v1/runs?status=done").await;
    assert_eq!((s, code(&v)), (400, "invalid_request"));
    let (s, v) = h.get("/v1/nothing-here").await;
    assert_eq!((s, code(&v)), (404, "not_found"));

    for model in ["nope/model", "echo/not-a-model", "no-slash"] {
        let r = h
            .http
            .put(h.at("/v1/threads/api:x/model"))
            .json(&json!({ "model": model }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 400, "{model}");
        assert_eq!(code(&r.json().await.unwrap()), "unknown_model", "{model}");
    }
    let r = h
        .http
        .put(h.at("/v1/threads/api:x/thinking"))
        .json(&json!({ "level": "extreme" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let r = h
        .http
        .put(h.at("/v1/threads/api:x/incognito"))
        .json(&json!({ "enabled": "yes" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    // The server is still fine after all that.
    assert_eq!(
        h.ask("api:x", "still here?").await["output"]["text"],
        "echo: still here?"
    );
}

#[tokio::test]
async fn an_invalid_config_file_exits_2_naming_file_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("[server]\nbnd = \"127.0.0.1:1\"\n", "bnd"),
        ("[agent]\nmax_steps = \"lots\"\n", "agent.max_steps"),
        (
            "[llm.providers.x]\ntype = \"carrier-pigeon\"\n",
            "llm.providers",
        ),
        ("[server\n", "hearth.toml"),
        (
            "[permissions]\ndefault_preset = \"superuser\"\n",
            "permissions.default_preset",
        ),
    ];
    for (toml, key) in cases {
        std::fs::write(dir.path().join("hearth.toml"), toml).unwrap();
        let out = command(dir.path())
            .args(["serve", "--bind", "127.0.0.1:0"])
            .output()
            .await
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{toml}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("hearth.toml"), "{err}");
        assert!(err.contains(key), "{key}: {err}");
    }
    // An environment override naming an unknown key is refused the same way.
    std::fs::write(dir.path().join("hearth.toml"), "").unwrap();
    let out = command(dir.path())
        .args(["serve", "--bind", "127.0.0.1:0"])
        .env("HEARTH_SERVER__NOPE", "1")
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("HEARTH_SERVER__NOPE"));
}

#[tokio::test]
async fn tokens_guard_the_api() {
    let dir = tempfile::tempdir().unwrap();
    let token = crate::harness::new_token(dir.path(), "ci").await;
    assert!(token.starts_with("hth_"));
    let h = Hearth::start(dir.path(), None).await;
    let (s, v) = h.get("/v1/models").await;
    assert_eq!((s, code(&v)), (401, "unauthorized"));
    let r = h
        .http
        .get(h.at("/v1/models"))
        .bearer_auth("hth_wrong")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let r = h
        .http
        .get(h.at("/v1/models"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(h.get("/healthz").await.0, 200);
    assert_eq!(h.get("/readyz").await.0, 200);
    // A non-loopback bind without tokens is refused at start.
    let other = tempfile::tempdir().unwrap();
    let out = command(other.path())
        .args(["serve", "--bind", "0.0.0.0:0"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("token"));
}
