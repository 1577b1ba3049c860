//! Permissions (grants, checks) and the audit log, over HTTP and the CLI.

use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
use serde_json::{Value, json};

use crate::harness::{Hearth, fake_config, hearth};

async fn grant(h: &Hearth, body: Value) -> (u16, Value) {
    h.send(reqwest::Method::POST, "/v1/permissions/grants", body)
        .await
}

async fn revoke(h: &Hearth, body: Value) -> (u16, Value) {
    h.send(reqwest::Method::DELETE, "/v1/permissions/grants", body)
        .await
}

async fn check(h: &Hearth, user: &str, cap: &str, scope: Option<&str>) -> Value {
    let mut path = format!("/v1/permissions/check?user_key={user}&capability={cap}");
    if let Some(s) = scope {
        path.push_str(&format!("&scope={s}"));
    }
    let (s, v) = h.get(&path).await;
    assert_eq!(s, 200, "{v}");
    v
}

#[tokio::test]
async fn grants_checks_and_the_audit_log() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;

    // The default preset is member.
    let v = check(&h, "api:user:alice", "web.fetch", None).await;
    assert_eq!(v, json!({ "allowed": true, "via": "preset" }));
    let v = check(&h, "api:user:alice", "jobs.manage", None).await;
    assert_eq!(v, json!({ "allowed": false, "via": null }));
    let (s, v) = h.get("/v1/permissions").await;
    assert_eq!(s, 200);
    assert_eq!(
        v,
        json!({ "scope": "global", "default_preset": "member", "grants": [] })
    );

    // Grant: 201, listed, allowed via grant, audited.
    let body = json!({ "subject": "user:api:user:alice", "capability": "jobs.manage" });
    let (s, g) = grant(&h, body.clone()).await;
    assert_eq!(s, 201, "{g}");
    assert_eq!(g["subject"], "user:api:user:alice");
    assert_eq!(g["capability"], "jobs.manage");
    assert_eq!(g["scope"], "global");
    assert!(
        g["granted_at"]
            .as_str()
            .unwrap()
            .parse::<jiff::Timestamp>()
            .is_ok(),
        "{g}"
    );
    // Granting again is idempotent: the same grant, no second audit row.
    let (s, again) = grant(&h, body.clone()).await;
    assert_eq!(s, 201);
    assert_eq!(again, g);
    let v = check(&h, "api:user:alice", "jobs.manage", None).await;
    assert_eq!(v, json!({ "allowed": true, "via": "grant" }));
    let (_, list) = h.get("/v1/permissions?scope=global").await;
    assert_eq!(list["grants"], json!([g]));
    let (s, audit) = h.get("/v1/audit").await;
    assert_eq!(s, 200);
    let events = audit["events"].as_array().unwrap();
    assert_eq!(events.len(), 1, "{audit}");
    assert_eq!(
        events[0]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(k, _)| *k != "at")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<serde_json::Map<_, _>>(),
        json!({ "actor": "operator", "action": "grant.add", "target": "user:api:user:alice",
                "outcome": "ok", "capability": "jobs.manage", "scope": "global" })
        .as_object()
        .unwrap()
        .clone()
    );

    // Revoke: 200 with the grant, denied again, audited newest first; again 404.
    let (s, r) = revoke(&h, body.clone()).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(r, json!({ "removed": g }));
    let v = check(&h, "api:user:alice", "jobs.manage", None).await;
    assert_eq!(v["allowed"], false);
    let (_, audit) = h.get("/v1/audit").await;
    assert_eq!(audit["events"][0]["action"], "grant.remove");
    assert_eq!(audit["events"][0]["actor"], "operator");
    assert_eq!(audit["events"][0]["target"], "user:api:user:alice");
    assert_eq!(audit["events"][1]["action"], "grant.add");
    let (_, one) = h.get("/v1/audit?limit=1").await;
    assert_eq!(one["events"].as_array().unwrap().len(), 1);
    let (s, v) = revoke(&h, body).await;
    assert_eq!((s, v["error"]["code"].as_str()), (404, Some("not_found")));

    // Bad input.
    let (s, v) = grant(
        &h,
        json!({ "subject": "user:alice", "capability": "jobs.manag" }),
    )
    .await;
    assert_eq!(s, 400);
    assert_eq!(v["error"]["code"], "unknown_capability");
    let (s, v) = grant(
        &h,
        json!({ "subject": "alice", "capability": "jobs.manage" }),
    )
    .await;
    assert_eq!(s, 400);
    assert_eq!(v["error"]["code"], "invalid_request");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("invalid subject"),
        "{v}"
    );
    let (s, v) = grant(
        &h,
        json!({ "subject": "user:alice", "capability": "jobs.manage", "scope": "Bad Scope" }),
    )
    .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (400, Some("invalid_request"))
    );
    let (s, v) = h
        .get("/v1/permissions/check?user_key=u&capability=nope")
        .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (400, Some("unknown_capability"))
    );
    let (s, v) = h
        .get("/v1/permissions/check?user_key=u&capability=preset:trusted")
        .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (400, Some("unknown_capability"))
    );
    let (s, v) = h.get("/v1/permissions/check?capability=web.fetch").await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (400, Some("invalid_request"))
    );

    // A granted preset counts as a grant.
    let (s, _) = grant(
        &h,
        json!({ "subject": "user:bob", "capability": "preset:trusted" }),
    )
    .await;
    assert_eq!(s, 201);
    let v = check(&h, "bob", "skills.use", None).await;
    assert_eq!(v, json!({ "allowed": true, "via": "grant" }));

    // A grant in a channel space counts there, not globally.
    let (s, g) = grant(
        &h,
        json!({ "subject": "user:carol", "capability": "jobs.manage",
                "scope": "discord:guild:42" }),
    )
    .await;
    assert_eq!(s, 201);
    assert_eq!(g["scope"], "discord:guild:42");
    assert_eq!(
        check(&h, "carol", "jobs.manage", None).await["allowed"],
        false
    );
    let v = check(&h, "carol", "jobs.manage", Some("discord:guild:42")).await;
    assert_eq!(v, json!({ "allowed": true, "via": "grant" }));
    let (_, list) = h.get("/v1/permissions").await;
    assert!(
        list["grants"]
            .as_array()
            .unwrap()
            .iter()
            .all(|g| g["scope"] == "global"),
        "{list}"
    );
    let (_, list) = h.get("/v1/permissions?scope=discord:guild:42").await;
    assert_eq!(list["grants"].as_array().unwrap().len(), 1, "{list}");

    let (s, doc) = h.get("/openapi.json").await;
    assert_eq!(s, 200);
    for p in [
        "/v1/permissions",
        "/v1/permissions/grants",
        "/v1/permissions/check",
        "/v1/audit",
    ] {
        assert!(doc["paths"].get(p).is_some(), "{p} missing from openapi");
    }
}

#[tokio::test]
async fn a_check_can_name_the_members_roles_in_a_guild() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;
    let (s, _) = grant(
        &h,
        json!({ "subject": "role:777", "capability": "jobs.manage", "scope": "discord:guild:42" }),
    )
    .await;
    assert_eq!(s, 201);
    let path = |extra: &str| {
        format!("/v1/permissions/check?user_key=discord:user:5&capability=jobs.manage{extra}")
    };
    let (s, v) = h.get(&path("&scope=discord:guild:42&roles=1,777")).await;
    assert_eq!(
        (s, v),
        (200, json!({ "allowed": true, "via": "grant" })),
        "a member with the role, in the guild"
    );
    for extra in [
        "&scope=discord:guild:42",
        "&roles=777",
        "&scope=discord:guild:43&roles=777",
    ] {
        let (s, v) = h.get(&path(extra)).await;
        assert_eq!(
            (s, v),
            (200, json!({ "allowed": false, "via": null })),
            "{extra}"
        );
    }
    let (code, out, err) = hearth(
        &h,
        &[
            "permissions",
            "check",
            "discord:user:5",
            "jobs.manage",
            "--scope",
            "discord:guild:42",
            "--roles",
            "1,777",
        ],
    )
    .await;
    // Says which grant decided: the one to a role the member holds there.
    assert_eq!(
        (code, out.trim()),
        (
            0,
            "allowed: by the grant of jobs.manage to role:777 in discord:guild:42"
        ),
        "{err}"
    );
    for bad in ["&roles=1,,2", "&roles=a%0Ab"] {
        let (s, v) = h.get(&path(bad)).await;
        assert_eq!(
            (s, v["error"]["code"].as_str()),
            (400, Some("invalid_request")),
            "{bad}: {v}"
        );
    }
}

#[tokio::test]
async fn permission_and_audit_commands() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;

    let (code, out, err) = hearth(&h, &["permissions", "check", "dave", "jobs.manage"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("denied: dave is not an admin, the default preset `member`")
            && out.contains("`hearth permissions grant dave jobs.manage --scope global`"),
        "{out}"
    );
    let (code, out, _) = hearth(&h, &["permissions", "check", "dave", "web.fetch"]).await;
    assert_eq!(
        (code, out.trim()),
        (
            0,
            "allowed: the default preset `member` ([permissions] default_preset) includes web.fetch"
        )
    );

    let (code, _, err) = hearth(&h, &["permissions", "grant", "user:dave", "jobs.manage"]).await;
    assert_eq!(code, 0, "{err}");
    let (code, out, _) = hearth(&h, &["permissions", "check", "dave", "jobs.manage"]).await;
    assert_eq!(
        (code, out.trim()),
        (
            0,
            "allowed: by the grant of jobs.manage to user:dave in global"
        )
    );
    let (code, out, _) = hearth(
        &h,
        &["permissions", "check", "dave", "jobs.manage", "--json"],
    )
    .await;
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v, json!({ "allowed": true, "via": "grant" }));

    let (code, out, _) = hearth(&h, &["permissions", "list"]).await;
    assert_eq!(code, 0);
    assert!(
        out.contains("member") && out.contains("user:dave") && out.contains("jobs.manage"),
        "{out}"
    );
    let (code, out, _) = hearth(&h, &["permissions", "list", "--json"]).await;
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["grants"][0]["subject"], "user:dave");

    let (code, _, err) = hearth(
        &h,
        &[
            "permissions",
            "grant",
            "user:dave",
            "bogus.cap",
            "--scope",
            "global",
        ],
    )
    .await;
    // A 400 from the server: a usage error.
    assert_eq!(code, 2);
    assert!(err.contains("unknown_capability"), "{err}");

    let (code, out, _) = hearth(&h, &["audit"]).await;
    assert_eq!(code, 0);
    assert!(
        out.contains("grant.add") && out.contains("user:dave"),
        "{out}"
    );

    let (code, _, err) = hearth(&h, &["permissions", "revoke", "user:dave", "jobs.manage"]).await;
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = hearth(&h, &["permissions", "revoke", "user:dave", "jobs.manage"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("not_found"), "{err}");
    let (code, out, _) = hearth(&h, &["audit", "--limit", "1", "--json"]).await;
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["events"].as_array().unwrap().len(), 1);
    assert_eq!(v["events"][0]["action"], "grant.remove");
}

#[tokio::test]
async fn a_denied_tool_call_is_refused_and_audited() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "call_fetch",
        "web_fetch",
        r#"{"url":"https://example.com/"}"#,
    )]));
    fake.push(Reply::text("I may not fetch that."));
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "{}[permissions]\ndefault_preset = \"none\"\n",
        fake_config(&fake.base_url())
    );
    let h = Hearth::start(dir.path(), Some(&config)).await;
    let (s, v) = h.get("/v1/permissions").await;
    assert_eq!(s, 200);
    assert_eq!(v["default_preset"], "none");

    let v = h.ask("api:denied", "fetch example.com").await;
    assert_eq!(v["status"], "succeeded", "{v}");
    let user_key = v["user_key"].as_str().unwrap().to_owned();
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 2);
    let result = reqs[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("missing capability web.fetch"),
        "{result}"
    );

    let (s, audit) = h.get("/v1/audit").await;
    assert_eq!(s, 200);
    let e = &audit["events"][0];
    assert_eq!(e["actor"], user_key.as_str(), "{audit}");
    assert_eq!(e["action"], "tool.call");
    assert_eq!(e["target"], "web_fetch");
    assert_eq!(e["outcome"], "denied");
    assert_eq!(e["capability"], "web.fetch");
}
