//! Skills through the real binary: `/v1/skills`, the list in the system
//! prompt, `skill_read` called by the model, `/name` invocation, reload, and
//! the `hearth skills` commands (check, keygen, sign, verify).

use std::path::Path;

use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
use serde_json::{Value, json};

use crate::harness::{Hearth, command, fake_config};

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// The system prompt of a fake-provider request (OpenAI wire format).
fn system(req: &Value) -> String {
    req["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn skills_are_listed_offered_read_invoked_and_reloaded() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "call_skill",
        "skill_read",
        r#"{"name":"pdf"}"#,
    )]));
    fake.push(Reply::text("Done."));
    fake.push(Reply::text("Invoked."));
    let dir = tempfile::tempdir().unwrap();
    let skills = dir.path().join("skills");
    write(
        &skills,
        "pdf/SKILL.md",
        "---\nname: pdf\ndescription: Fill PDF forms.\n---\nRun {baseDir}/fill.sh on the form.\n",
    );
    write(
        &skills,
        "mac/SKILL.md",
        "---\nname: mac\ndescription: Mac things.\nmetadata: {\"openclaw\": {\"os\": [\"hearth-os\"]}}\n---\nx\n",
    );
    write(&skills, "bad/SKILL.md", "---\nname: bad\n---\n");
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;

    let (s, v) = h.get("/v1/skills").await;
    assert_eq!(s, 200, "{v}");
    let real = std::fs::canonicalize(&skills).unwrap();
    assert_eq!(
        v["skills"],
        json!([
            {"name": "bad", "description": "", "path": real.join("bad/SKILL.md"), "source": "home",
             "eligible": false, "reason": "invalid description: is required", "signed": null},
            {"name": "mac", "description": "Mac things.", "path": real.join("mac/SKILL.md"),
             "source": "home", "eligible": false,
             "reason": format!("needs os hearth-os (this is {})", os()), "signed": null},
            {"name": "pdf", "description": "Fill PDF forms.", "path": real.join("pdf/SKILL.md"),
             "source": "home", "eligible": true, "reason": null, "signed": null},
        ])
    );

    let v = h.ask("api:skills", "fill the form").await;
    assert_eq!(v["status"], "succeeded", "{v}");
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 2);
    let prompt = system(&reqs[0]);
    assert!(prompt.contains("- pdf: Fill PDF forms."), "{prompt}");
    assert!(
        !prompt.contains("mac") && !prompt.contains("bad"),
        "{prompt}"
    );
    let tool = reqs[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    let content: Value = serde_json::from_str(tool["content"].as_str().unwrap()).unwrap();
    assert_eq!(
        content["instructions"],
        format!("Run {}/fill.sh on the form.\n", real.join("pdf").display())
    );

    let v = h.ask("api:skills", "/pdf tax.pdf").await;
    assert_eq!(v["status"], "succeeded", "{v}");
    let prompt = system(&fake.requests()[2]);
    assert!(
        prompt.contains("## Skill invoked by the user: pdf\nThe user's message invokes this skill with the arguments: tax.pdf"),
        "{prompt}"
    );

    write(
        &skills,
        "late/SKILL.md",
        "---\nname: late\ndescription: Added later.\n---\nhi\n",
    );
    let r = h.http.post(h.at("/v1/skills/reload")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<Value>().await.unwrap(), json!({"skills": 4}));
    let (_, v) = h.get("/v1/skills").await;
    assert!(
        v["skills"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == "late" && s["eligible"] == true),
        "{v}"
    );
}

/// OpenClaw's name of this OS.
fn os() -> &'static str {
    match std::env::consts::OS {
        "macos" => "darwin",
        "windows" => "win32",
        other => other,
    }
}

async fn hearth(home: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = command(home).args(args).output().await.unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn check_keygen_sign_and_verify() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let skills = home.join("skills");
    write(
        &skills,
        "ok/SKILL.md",
        "---\nname: ok\ndescription: Fine.\n---\n",
    );
    write(
        &skills,
        "bad/SKILL.md",
        "---\nname: bad\ndescription: [1]\n---\n",
    );
    let (code, out, _) = hearth(home, &["skills", "check"]).await;
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("bad: description: must be text\n"), "{out}");
    std::fs::remove_dir_all(skills.join("bad")).unwrap();
    let (code, out, err) = hearth(home, &["skills", "check"]).await;
    assert_eq!(code, Some(0), "{out}{err}");

    let exe = skills.join("weather");
    write(
        &exe,
        "hearth-skill.json",
        r#"{"name":"weather","version":"1.0.0","description":"Forecasts","entry":"server","hearth":">=0.1"}"#,
    );
    write(&exe, "server", "#!/bin/sh\n");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let perms = std::fs::Permissions::from_mode(0o755);
        std::fs::set_permissions(exe.join("server"), perms).unwrap();
    }
    let keys = dir.path().join("keys");
    let (code, public, err) =
        hearth(home, &["skills", "keygen", "--out", keys.to_str().unwrap()]).await;
    assert_eq!(code, Some(0), "{err}");
    let public = public.trim().to_owned();
    assert!(public.starts_with("ed25519:"), "{public}");
    let key = std::fs::read_dir(&keys)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&key).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let exe_arg = exe.to_str().unwrap();
    let (code, _, err) = hearth(
        home,
        &["skills", "sign", exe_arg, "--key", key.to_str().unwrap()],
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    let (code, _, err) = hearth(home, &["skills", "verify", exe_arg]).await;
    assert_eq!(code, Some(1));
    assert!(err.contains("not in [skills] trusted_keys"), "{err}");

    std::fs::write(
        home.join("hearth.toml"),
        format!("[skills]\ntrusted_keys = [\"{public}\"]\n"),
    )
    .unwrap();
    let (code, out, err) = hearth(home, &["skills", "verify", exe_arg]).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.starts_with("ok: weather 1.0.0 signed by trusted key "),
        "{out}"
    );
    let h = Hearth::start(home, None).await;
    let (_, v) = h.get("/v1/skills").await;
    let weather = v["skills"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "weather")
        .unwrap();
    assert_eq!(
        (&weather["signed"], &weather["eligible"]),
        (&json!(true), &json!(true)),
        "{v}"
    );
    drop(h);

    std::fs::write(exe.join("server"), "#!/bin/sh\necho changed\n").unwrap();
    let (code, _, err) = hearth(home, &["skills", "verify", exe_arg]).await;
    assert_eq!(code, Some(1));
    assert!(err.contains("hash mismatch: server"), "{err}");
}
