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
             "eligible": false, "reason": "invalid description: is required", "signed": null,
             "problems": ["description: is required"]},
            {"name": "mac", "description": "Mac things.", "path": real.join("mac/SKILL.md"),
             "source": "home", "eligible": false,
             "reason": format!("needs os hearth-os (this is {})", os()), "signed": null,
             "problems": []},
            {"name": "pdf", "description": "Fill PDF forms.", "path": real.join("pdf/SKILL.md"),
             "source": "home", "eligible": true, "reason": null, "signed": null,
             "problems": []},
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
    // `list`, `show` and `check` ask the running server, as every other
    // client command does; `reload` makes it read the folders again.
    let h = Hearth::start(home, None).await;
    let at_server = |args: &'static [&'static str]| {
        let url = h.url.clone();
        async move {
            let out = command(home)
                .env("HEARTH_URL", url)
                .args(args)
                .output()
                .await
                .unwrap();
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        }
    };
    let (code, out, _) = at_server(&["skills", "check"]).await;
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("bad: description: must be text\n"), "{out}");
    let (code, out, err) = at_server(&["skills", "list"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("ok ") && out.contains("bad "), "{out}");
    let (code, out, err) = at_server(&["skills", "show", "ok"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("description: Fine."), "{out}");
    std::fs::remove_dir_all(skills.join("bad")).unwrap();
    // The server still has the old list until it is told to reload.
    let (code, ..) = at_server(&["skills", "check"]).await;
    assert_eq!(code, Some(1));
    let (code, out, err) = at_server(&["skills", "reload"]).await;
    assert_eq!(
        (code, out.trim()),
        (Some(0), "skills reloaded: 1 listed"),
        "{err}"
    );
    let (code, out, err) = at_server(&["skills", "check"]).await;
    assert_eq!(code, Some(0), "{out}{err}");
    drop(h);

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

/// A signed executable skill `notes` under `<home>/skills`, whose entry is a
/// script that refuses to run outside its folder, writes its pid where
/// `NOTES_PID_FILE` says, and execs the testkit's `fake-mcp`. Returns the
/// trusted public key.
async fn signed_notes_skill(home: &Path) -> String {
    let exe = home.join("skills/notes");
    write(
        &exe,
        "hearth-skill.json",
        r#"{"name":"notes","version":"1.0.0","description":"Notes as MCP tools","entry":"run.sh",
            "env":["NOTES_PID_FILE","NOTES_TOKEN"],"hearth":">=0.1"}"#,
    );
    write(
        &exe,
        "run.sh",
        &format!(
            "#!/bin/sh\n[ -f hearth-skill.json ] || {{ echo 'not run from the skill folder' >&2; exit 1; }}\n\
             echo $$ > \"$NOTES_PID_FILE\"\nexec '{}'\n",
            hearth_testkit::fake_mcp::fake_mcp_bin().display()
        ),
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let perms = std::fs::Permissions::from_mode(0o755);
        std::fs::set_permissions(exe.join("run.sh"), perms).unwrap();
    }
    let keys = home.join("keys");
    let (code, public, err) =
        hearth(home, &["skills", "keygen", "--out", keys.to_str().unwrap()]).await;
    assert_eq!(code, Some(0), "{err}");
    let key = std::fs::read_dir(&keys)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let (code, _, err) = hearth(
        home,
        &[
            "skills",
            "sign",
            exe.to_str().unwrap(),
            "--key",
            key.to_str().unwrap(),
        ],
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    public.trim().to_owned()
}

/// The entry of `GET /v1/mcp/servers` named `name`, once it is ready (a
/// server starts in the background with no event to await, so the API is
/// asked until a deadline).
async fn server_ready(h: &Hearth, name: &str) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let (_, v) = h.get("/v1/mcp/servers").await;
        if let Some(e) = servers_named(&v, name).filter(|e| e["state"] == "ready") {
            return e;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{name} never became ready: {v}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

fn servers_named(v: &Value, name: &str) -> Option<Value> {
    v["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
        .cloned()
}

/// Whether process `pid` has exited (or is a zombie nobody reaped yet).
fn process_gone(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

#[tokio::test]
async fn a_signed_executable_skill_runs_as_an_mcp_server_for_users_with_skills_use() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "call_1",
        "notes__echo",
        r#"{"text":"hello from the skill"}"#,
    )]));
    fake.push(Reply::text("done"));
    fake.push(Reply::text("no skill tools for you"));
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let public = signed_notes_skill(&home).await;
    let pid_file = dir.path().join("notes.pid");
    let config = format!(
        "{}[skills]\ntrusted_keys = [\"{public}\"]\n[skills.executable.notes]\nread_tools = [\"echo\"]\n",
        fake_config(&fake.base_url())
    );
    let h = Hearth::start_with(
        &home,
        Some(&config),
        &[
            ("NOTES_PID_FILE", pid_file.to_str().unwrap()),
            ("NOTES_TOKEN", "declared"),
            ("OPENAI_API_KEY", "sk-not-for-skills"),
        ],
    )
    .await;
    let entry = server_ready(&h, "notes").await;
    assert_eq!(
        (&entry["transport"], &entry["tools"], &entry["last_error"]),
        (&json!("stdio"), &json!(12), &Value::Null),
        "{entry}"
    );
    let (_, tools) = h.get("/v1/tools").await;
    let tool = |name: &str| {
        tools["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} not in {tools}"))
    };
    let echo = tool("notes__echo");
    assert_eq!(
        (
            &echo["source"],
            &echo["capability"],
            &echo["class"],
            &echo["available"]
        ),
        (
            &json!("skill:notes"),
            &json!("skills.use"),
            &json!("read"),
            &json!(true)
        )
    );
    assert_eq!(tool("notes__write_note")["class"], "write");
    // readOnlyHint: true, but not listed and annotations not trusted.
    assert_eq!(tool("notes__env")["class"], "write");

    // Only the declared variables (and PATH, HOME) reach the program. `env`
    // is write-class (its annotation is not trusted), so the call is confirmed.
    let (code, out, err) = hearth(
        &home,
        &[
            "--url", &h.url, "mcp", "call", "--yes", "notes", "env", "{}",
        ],
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("NOTES_TOKEN"), "{out}");
    assert!(!out.contains("OPENAI_API_KEY"), "{out}");
    // Its writable folder, outside its signed one.
    assert!(out.contains("HEARTH_SKILL_STATE"), "{out}");
    assert!(home.join("skills-state/notes").is_dir());

    // A user granted skills.use is offered the tool; its result reaches the model.
    let r = h
        .http
        .post(h.at("/v1/permissions/grants"))
        .json(&json!({"subject": "user:api:user:alice", "capability": "skills.use"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let (s, v) = h
        .post(json!({"text": "note it", "thread_key": "api:alice", "user_key": "api:user:alice", "wait": true}))
        .await;
    assert_eq!((s, &v["status"]), (200, &json!("succeeded")), "{v}");
    let reqs = fake.requests();
    assert!(crate::harness::offered_tools(&reqs[0]).contains(&"notes__echo".to_owned()));
    let result = reqs[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned();
    assert!(result.contains("hello from the skill"), "{result}");
    assert!(result.contains("untrusted-content"), "{result}");

    // The default `member` user lacks skills.use: not offered.
    let v = h.ask("api:anon", "note it").await;
    assert_eq!(v["status"], "succeeded", "{v}");
    let offered = crate::harness::offered_tools(&fake.requests()[2]);
    assert!(
        !offered.iter().any(|n| n.starts_with("notes__")),
        "{offered:?}"
    );

    // Changed after signing: a reload refuses it and stops its child.
    let pid = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .to_owned();
    assert!(!process_gone(&pid));
    let script = home.join("skills/notes/run.sh");
    let mut text = std::fs::read_to_string(&script).unwrap();
    text.push_str("# changed\n");
    std::fs::write(&script, text).unwrap();
    let r = h.http.post(h.at("/v1/skills/reload")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let refused = |v: &Value| {
        let notes = v["skills"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == "notes")
            .cloned()
            .unwrap();
        assert_eq!(
            (&notes["eligible"], &notes["signed"]),
            (&json!(false), &json!(false)),
            "{notes}"
        );
        let reason = notes["reason"].as_str().unwrap();
        assert!(reason.contains("hash mismatch: run.sh"), "{reason}");
    };
    refused(&h.get("/v1/skills").await.1);
    assert_eq!(
        servers_named(&h.get("/v1/mcp/servers").await.1, "notes"),
        None
    );
    let (_, tools) = h.get("/v1/tools").await;
    assert!(!tools.to_string().contains("notes__"), "{tools}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !process_gone(&pid) {
        assert!(
            std::time::Instant::now() < deadline,
            "the refused skill's child {pid} still runs"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }

    // Started again with the changed file: refused, and no child is started.
    h.terminate().await;
    std::fs::remove_file(&pid_file).unwrap();
    let h = Hearth::start_with(
        &home,
        None,
        &[("NOTES_PID_FILE", pid_file.to_str().unwrap())],
    )
    .await;
    refused(&h.get("/v1/skills").await.1);
    let (_, servers) = h.get("/v1/mcp/servers").await;
    assert_eq!(servers_named(&servers, "notes"), None, "{servers}");
    assert!(!pid_file.exists());
}

#[tokio::test]
async fn a_signed_skill_edited_without_a_reload_is_not_started_again_when_it_dies() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let public = signed_notes_skill(&home).await;
    let pid_file = dir.path().join("notes.pid");
    let config = format!("[skills]\ntrusted_keys = [\"{public}\"]\n");
    let h = Hearth::start_with(
        &home,
        Some(&config),
        &[("NOTES_PID_FILE", pid_file.to_str().unwrap())],
    )
    .await;
    server_ready(&h, "notes").await;
    let pid = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .to_owned();
    std::fs::remove_file(&pid_file).unwrap();
    // Edited after it was verified; no reload.
    let script = home.join("skills/notes/run.sh");
    let mut text = std::fs::read_to_string(&script).unwrap();
    text.push_str("# changed\n");
    std::fs::write(&script, text).unwrap();
    // Its child dies (by its recorded pid).
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    // The supervisor's next start (after a 1 s backoff) checks the folder first.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let entry = loop {
        assert!(
            !pid_file.exists(),
            "the edited run.sh was started: {}",
            h.get("/v1/mcp/servers").await.1
        );
        let (_, v) = h.get("/v1/mcp/servers").await;
        let entry = servers_named(&v, "notes").unwrap();
        if entry["state"] == "failed" {
            break entry;
        }
        assert!(std::time::Instant::now() < deadline, "{v}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let why = entry["last_error"].as_str().unwrap();
    assert!(
        why.contains("run.sh changed since the skill was verified"),
        "{entry}"
    );
    assert!(!pid_file.exists());
    // A reload verifies it again: refused, and it leaves the servers.
    let r = h.http.post(h.at("/v1/skills/reload")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let (_, v) = h.get("/v1/mcp/servers").await;
    assert_eq!(servers_named(&v, "notes"), None, "{v}");
}
