//! Community keys end to end: set from stdin with `hearth credentials`, and
//! through `PUT /v1/scopes/{scope}/credentials/{provider}`; listed with
//! providers and dates only; removed; refused for what is not a community
//! or not a provider. The key is in no API answer, no log line, and not in
//! the database in clear.

use hearth_testkit::FakeOpenAi;
use serde_json::{Value, json};

use crate::harness::{FAKE_KEY_LINE, Hearth, fake_config};
use crate::secrets::{contains, db_bytes, hearth};

const KEY_ONE: &str = "sk-community-ONE-5b1e7c";
const KEY_TWO: &str = "sk-community-TWO-93d0aa";
const MASTER: &str = "q7U0nG1Yb8m2p3ZxV4c5T6s7R8e9W0a1B2c3D4e5F6g=";

/// `method` on `path` with `body`: status and the raw answer.
async fn send(
    h: &Hearth,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, String) {
    let mut rb = h.http.request(method, h.at(path));
    if let Some(b) = body {
        rb = rb.json(&b);
    }
    let r = rb.send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

#[tokio::test]
async fn community_keys_are_set_listed_and_removed_without_ever_being_shown() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let config = format!(
        "{}api_key_env = \"OPERATOR_KEY\"\n",
        fake_config(&fake.base_url()).replace(FAKE_KEY_LINE, "")
    );
    let env = [
        ("OPERATOR_KEY", "sk-operator"),
        ("HEARTH_SECRET_KEY", MASTER),
        ("RUST_LOG", "debug"),
    ];
    let h = Hearth::start_with(&home, Some(&config), &env).await;
    let mut answers = Vec::new();

    // From the CLI: the key on stdin.
    let with_url = [("HEARTH_URL", h.url.as_str())];
    let (code, out, err) = hearth(
        &home,
        &[
            "credentials",
            "set",
            "--scope",
            "discord:guild:1",
            "--provider",
            "fake",
        ],
        &with_url,
        Some(&format!("{KEY_ONE}\n")),
    )
    .await;
    assert_eq!(code, 0, "{err}");
    answers.push(out + &err);
    // Through the API.
    let (status, body) = send(
        &h,
        reqwest::Method::PUT,
        "/v1/scopes/discord:guild:2/credentials/fake",
        Some(json!({ "key": KEY_TWO })),
    )
    .await;
    assert_eq!((status, body.as_str()), (204, ""));

    let (status, body) = send(
        &h,
        reqwest::Method::GET,
        "/v1/scopes/discord:guild:1/credentials",
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let listed: Value = serde_json::from_str(&body).unwrap();
    let entries = listed["credentials"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{listed}");
    assert_eq!(entries[0]["provider"], "fake");
    let mut fields: Vec<&str> = entries[0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    fields.sort_unstable();
    assert_eq!(fields, ["provider", "set_at"], "providers and set_at only");
    answers.push(body);
    let (code, out, err) = hearth(
        &home,
        &["credentials", "list", "--scope", "discord:guild:2"],
        &with_url,
        None,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("fake"), "{out}");
    answers.push(out + &err);

    // Refusals: typed 4xx, never the key.
    for (path, want) in [
        ("/v1/scopes/global/credentials/fake", 400),
        ("/v1/scopes/discord:guild:1/credentials/nope", 400),
        ("/v1/scopes/discord:guild:1/credentials/echo", 400),
    ] {
        let (status, body) = send(
            &h,
            reqwest::Method::PUT,
            path,
            Some(json!({ "key": KEY_ONE })),
        )
        .await;
        assert_eq!(status, want, "{path}: {body}");
        let e: Value = serde_json::from_str(&body).unwrap();
        assert!(e["error"]["code"].is_string(), "{body}");
        answers.push(body);
    }
    let (status, body) = send(
        &h,
        reqwest::Method::PUT,
        "/v1/scopes/discord:guild:1/credentials/fake",
        Some(json!({ "key": KEY_ONE, "extra": 1 })),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    answers.push(body);

    // Removed once; a second time there is nothing to remove.
    let (code, out, err) = hearth(
        &home,
        &[
            "credentials",
            "remove",
            "--scope",
            "discord:guild:1",
            "--provider",
            "fake",
        ],
        &with_url,
        None,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    answers.push(out + &err);
    let (status, body) = send(
        &h,
        reqwest::Method::DELETE,
        "/v1/scopes/discord:guild:1/credentials/fake",
        None,
    )
    .await;
    assert_eq!(status, 404, "{body}");
    answers.push(body);
    let (_, audit) = h.get("/v1/audit").await;
    let actions: Vec<&str> = audit["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["action"].as_str())
        .collect();
    assert!(
        actions.contains(&"credential.set") && actions.contains(&"credential.remove"),
        "{audit}"
    );
    answers.push(audit.to_string());

    for key in [KEY_ONE, KEY_TWO] {
        for a in &answers {
            assert!(!a.contains(key), "an answer shows a key: {a}");
        }
        assert!(
            !contains(&db_bytes(&home), key),
            "a key is in the database in clear"
        );
        let log = std::fs::read_to_string(home.join("serve.log")).unwrap();
        assert!(!log.contains(key), "a key is in the log");
    }
}
