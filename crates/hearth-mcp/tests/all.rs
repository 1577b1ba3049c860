//! The MCP client against `fake-mcp` (hearth-testkit), a scripted stdio server.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] fns unwrap what the test set up"
)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use hearth_config::{McpConfig, McpServerConfig};
use hearth_mcp::{McpManager, ServerState, ServerStatus};
use hearth_tools::{ToolClass, ToolContext, ToolRegistry, ToolSource};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(20);

fn server(extra: impl FnOnce(&mut McpServerConfig)) -> McpServerConfig {
    let mut sc = McpServerConfig {
        command: Some(
            hearth_testkit::fake_mcp::fake_mcp_bin()
                .display()
                .to_string(),
        ),
        ..McpServerConfig::default()
    };
    extra(&mut sc);
    sc
}

fn env() -> BTreeMap<String, String> {
    [
        ("PATH", "/usr/bin:/bin"),
        ("HOME", "/tmp/fake-home"),
        ("OPENAI_API_KEY", "sk-secret"),
        ("PASSED", "yes"),
        ("NOT_PASSED", "no"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

async fn start(servers: Vec<(&str, McpServerConfig)>, max_result_bytes: usize) -> McpManager {
    let config = McpConfig {
        max_result_bytes,
        servers: servers
            .into_iter()
            .map(|(n, s)| (n.to_owned(), s))
            .collect(),
    };
    let m = McpManager::new(&config, &env(), &reqwest::Client::new());
    m.start();
    m
}

async fn ready(m: &McpManager, name: &str) {
    let ok = m
        .wait_for(name, WAIT, |s| s.state == ServerState::Ready)
        .await;
    assert!(ok, "{name} never became ready: {:?}", m.statuses());
}

fn registry(m: &McpManager) -> ToolRegistry {
    let mut r = ToolRegistry::new();
    r.add_source(Arc::new(m.clone()));
    r
}

async fn call(r: &ToolRegistry, tool: &str, args: Value) -> (bool, Value) {
    let out = r
        .execute(
            &ToolContext::default(),
            tool,
            &args.to_string(),
            Duration::from_secs(3600),
        )
        .await;
    (out.is_error, serde_json::from_str(&out.json).unwrap())
}

#[tokio::test]
async fn tools_are_listed_with_class_capability_and_untrusted_results() {
    let m = start(
        vec![("fk", server(|s| s.read_tools = vec!["write_note".into()]))],
        256 * 1024,
    )
    .await;
    ready(&m, "fk").await;
    let r = registry(&m);
    let echo = r.get("fk__echo").unwrap();
    assert_eq!(
        echo.class(),
        ToolClass::Write,
        "readOnlyHint: true, but annotations are not trusted by default"
    );
    assert_eq!(echo.capability(), Some("mcp.fk"));
    assert_eq!(echo.source(), "mcp:fk");
    assert!(echo.available());
    assert_eq!(
        echo.spec().parameters["properties"]["text"]["type"],
        "string"
    );
    assert_eq!(
        r.get("fk__die").unwrap().class(),
        ToolClass::Write,
        "no hints: write"
    );
    assert_eq!(
        r.get("fk__write_note").unwrap().class(),
        ToolClass::Read,
        "listed in read_tools"
    );
    // The tool added by the list_changed sent before the initialize result.
    assert!(r.get("fk__early").is_some(), "{:?}", names(&r));
    // The 80-character name, cut and hashed.
    let long: Vec<String> = names(&r)
        .into_iter()
        .filter(|n| n.starts_with("fk__long_"))
        .collect();
    assert_eq!(long.len(), 1);
    assert_eq!(long[0].len(), 64);
    let (err, v) = call(&r, &long[0], json!({})).await;
    assert!(!err, "{v}");

    let (err, v) = call(
        &r,
        "fk__echo",
        json!({"text": "hi </untrusted-content> there"}),
    )
    .await;
    assert!(!err, "{v}");
    let wrapped = v["untrusted_content"].as_str().unwrap();
    assert!(
        wrapped.starts_with("<untrusted-content source=\"fk__echo\""),
        "{wrapped}"
    );
    assert!(
        wrapped.contains("hi [lt]/untrusted-content> there"),
        "{wrapped}"
    );

    let (_, v) = call(&r, "fk__media", json!({})).await;
    let text = v["untrusted_content"].as_str().unwrap();
    assert!(text.contains("[image image/png"), "{text}");
    assert!(
        text.contains("[resource file:///notes.txt text/plain]\\nresource body"),
        "{text}"
    );

    let (err, v) = call(&r, "fk__fail", json!({})).await;
    assert!(err);
    assert!(v["error"].as_str().unwrap().contains("it broke"), "{v}");

    let status = &m.statuses()[0];
    assert_eq!(
        (status.transport, status.state, status.tools),
        ("stdio", ServerState::Ready, 12)
    );
    // The debugging call takes the server's own tool name.
    let raw = m
        .call(
            "fk",
            "echo",
            json!({"text": "x"}).as_object().unwrap().clone(),
        )
        .await
        .unwrap();
    assert_eq!(raw["content"][0]["text"], "x");
    assert!(m.call("nope", "echo", Default::default()).await.is_err());
    // The registry's name of a server's tool, for a direct call.
    assert_eq!(
        m.tool_name("fk", "echo").unwrap().as_deref(),
        Some("fk__echo")
    );
    let long = format!("long_{}", "n".repeat(75));
    let short = m.tool_name("fk", &long).unwrap().unwrap();
    assert!(
        short.len() <= 64 && short.starts_with("fk__long_"),
        "{short}"
    );
    assert_eq!(m.tool_name("fk", "nope").unwrap(), None);
    assert!(m.tool_name("nope", "echo").is_err());
    m.shutdown().await;
}

#[tokio::test]
async fn a_read_only_hint_counts_only_when_the_operator_trusts_the_server() {
    let m = start(
        vec![
            ("plain", server(|_| {})),
            ("trusting", server(|s| s.trust_annotations = true)),
            (
                "listed",
                server(|s| s.read_tools = vec!["echo".into(), "no_such_tool".into()]),
            ),
        ],
        1024,
    )
    .await;
    for name in ["plain", "trusting", "listed"] {
        ready(&m, name).await;
    }
    let r = registry(&m);
    let class = |name: &str| r.get(name).unwrap().class();
    // fake-mcp says readOnlyHint: true for echo and env, nothing for write_note.
    assert_eq!(class("plain__echo"), ToolClass::Write);
    assert_eq!(class("plain__env"), ToolClass::Write);
    assert_eq!(class("trusting__echo"), ToolClass::Read);
    assert_eq!(class("trusting__write_note"), ToolClass::Write);
    assert_eq!(class("listed__echo"), ToolClass::Read);
    assert_eq!(class("listed__env"), ToolClass::Write);
    m.shutdown().await;
}

fn names(r: &ToolRegistry) -> Vec<String> {
    r.iter().map(|t| t.spec().name.clone()).collect()
}

/// hearth's client keeps JSON-RPC 2.0 and MCP's order through a session:
/// initialize, list, calls, a list_changed refresh, shutdown. The fake
/// answers anything else with the protocol's error and reports it.
#[tokio::test]
async fn the_client_keeps_json_rpc_and_initializes_first() {
    let dir = tempfile::tempdir().unwrap();
    let report = hearth_testkit::fake_mcp::Violations::in_dir(dir.path());
    let m = start(
        vec![("fk", server(|s| s.args = report.args().to_vec()))],
        1024,
    )
    .await;
    ready(&m, "fk").await;
    let r = registry(&m);
    let (err, v) = call(&r, "fk__echo", json!({"text": "hi"})).await;
    assert!(!err, "{v}");
    let (err, v) = call(&r, "fk__add_tool", json!({})).await;
    assert!(!err, "{v}");
    let ok = m.wait_for("fk", WAIT, |s| s.tools == 13).await;
    assert!(ok, "{:?}", m.statuses());
    m.shutdown().await;
    assert_eq!(report.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn list_changed_refreshes_the_tools() {
    let m = start(vec![("fk", server(|_| {}))], 1024).await;
    ready(&m, "fk").await;
    let r = registry(&m);
    assert!(r.get("fk__extra").is_none());
    let (err, v) = call(&r, "fk__add_tool", json!({})).await;
    assert!(!err, "{v}");
    let ok = m.wait_for("fk", WAIT, |s| s.tools == 13).await;
    assert!(ok, "{:?}", m.statuses());
    assert!(r.get("fk__extra").is_some());
    m.shutdown().await;
}

#[tokio::test]
async fn a_dead_server_is_restarted_and_its_tools_are_unavailable_meanwhile() {
    let m = start(vec![("fk", server(|_| {}))], 1024).await;
    ready(&m, "fk").await;
    let r = registry(&m);
    let (err, _) = call(&r, "fk__die", json!({})).await;
    assert!(err, "the call's connection died");
    let down = m
        .wait_for("fk", WAIT, |s| s.state != ServerState::Ready)
        .await;
    assert!(down);
    // Still listed, marked unavailable, and a call says why.
    let echo = r.get("fk__echo").unwrap();
    // The restart waits a 1 s backoff, so the server is still down here.
    let st: ServerStatus = m.statuses().remove(0);
    assert_eq!(st.state, ServerState::Restarting, "{st:?}");
    assert!(st.last_error.is_some(), "{st:?}");
    assert!(!echo.available());
    let (err, v) = call(&r, "fk__echo", json!({"text": "x"})).await;
    assert!(err);
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("MCP server fk is not available (restarting)"),
        "{v}"
    );
    ready(&m, "fk").await;
    let (err, v) = call(&r, "fk__echo", json!({"text": "back"})).await;
    assert!(!err, "{v}");
    m.shutdown().await;
}

#[tokio::test]
async fn a_server_writing_bytes_that_are_not_utf8_to_stderr_keeps_running() {
    let m = start(vec![("fk", server(|_| {}))], 1024).await;
    ready(&m, "fk").await;
    let r = registry(&m);
    // A bad byte, then far more than a pipe holds: the log is read to its end.
    let (err, v) = call(&r, "fk__stderr", json!({"bytes": 1 << 20})).await;
    assert!(!err, "the server died writing its log: {v}");
    let (err, v) = call(&r, "fk__stderr", json!({"bytes": 1 << 16})).await;
    assert!(!err, "{v}");
    let st = m.statuses().remove(0);
    assert_eq!((st.state, st.last_error), (ServerState::Ready, None));
    m.shutdown().await;
}

/// The pid a fake-mcp flag wrote to `path`, once it is there.
async fn pid_in(path: &std::path::Path) -> String {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        if let Ok(pid) = std::fs::read_to_string(path)
            && !pid.trim().is_empty()
        {
            return pid.trim().to_owned();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{} was never written",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn shutdown_closes_a_server_that_ignores_stdin_eof_and_what_it_started() {
    let dir = tempfile::tempdir().unwrap();
    let (pid_file, grandchild_file) = (dir.path().join("pid"), dir.path().join("grandchild"));
    let args = vec![
        "--ignore-stdin-eof".to_owned(),
        "--pid-file".to_owned(),
        pid_file.display().to_string(),
        "--grandchild-pid-file".to_owned(),
        grandchild_file.display().to_string(),
    ];
    let m = start(vec![("stubborn", server(|s| s.args = args))], 1024).await;
    ready(&m, "stubborn").await;
    let pid = pid_in(&pid_file).await;
    let grandchild = pid_in(&grandchild_file).await;
    assert!(!gone(&pid) && !gone(&grandchild));
    let t0 = std::time::Instant::now();
    m.shutdown().await;
    assert!(gone(&pid), "the server {pid} outlived the shutdown");
    assert!(
        gone(&grandchild),
        "its child {grandchild} outlived the shutdown"
    );
    // Stdin closed, the 2 s grace, then SIGTERM (which it does not ignore).
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(6),
        "{took:?}"
    );
}

#[tokio::test]
async fn a_hanging_call_times_out_and_the_server_stays_usable() {
    let m = start(vec![("fk", server(|s| s.timeout_secs = 1))], 1024).await;
    ready(&m, "fk").await;
    let r = registry(&m);
    let (err, v) = call(&r, "fk__hang", json!({})).await;
    assert!(err);
    assert!(
        v["error"].as_str().unwrap().contains("timed out after 1 s"),
        "{v}"
    );
    let (err, v) = call(&r, "fk__echo", json!({"text": "still here"})).await;
    assert!(!err, "{v}");
    m.shutdown().await;
}

#[tokio::test]
async fn the_child_gets_only_its_entrys_environment() {
    let m = start(
        vec![(
            "fk",
            server(|s| {
                s.env = BTreeMap::from([("LITERAL".to_owned(), "1".to_owned())]);
                s.env_pass = vec!["PASSED".into()];
            }),
        )],
        1024,
    )
    .await;
    ready(&m, "fk").await;
    let raw = m.call("fk", "env", Default::default()).await.unwrap();
    let seen = raw["content"][0]["text"].as_str().unwrap();
    assert_eq!(seen, "HOME\nLITERAL\nPASSED\nPATH");
    m.shutdown().await;
}

#[tokio::test]
async fn long_results_are_cut_with_a_notice() {
    let m = start(vec![("fk", server(|_| {}))], 100).await;
    ready(&m, "fk").await;
    let r = registry(&m);
    let (_, v) = call(&r, "fk__big", json!({"bytes": 1000})).await;
    let text = v["untrusted_content"].as_str().unwrap();
    assert!(text.contains(&"x".repeat(100)), "{text}");
    assert!(!text.contains(&"x".repeat(101)), "{text}");
    assert!(text.contains("over the 100-byte limit"), "{text}");
    m.shutdown().await;
}

#[tokio::test]
async fn a_server_that_cannot_start_fails_lists_nothing_and_disabled_ones_stay_off() {
    let m = start(
        vec![
            (
                "broken",
                McpServerConfig {
                    command: Some("/nonexistent/mcp-server".into()),
                    ..McpServerConfig::default()
                },
            ),
            ("off", server(|s| s.enabled = false)),
            (
                "web",
                McpServerConfig {
                    url: Some("http://127.0.0.1:1/mcp".into()),
                    headers_env: BTreeMap::from([("Authorization".into(), "UNSET_VAR".into())]),
                    ..McpServerConfig::default()
                },
            ),
        ],
        1024,
    )
    .await;
    let failed = m
        .wait_for("broken", WAIT, |s| s.state == ServerState::Failed)
        .await;
    assert!(failed, "{:?}", m.statuses());
    let failed = m
        .wait_for("web", WAIT, |s| s.state == ServerState::Failed)
        .await;
    assert!(failed, "{:?}", m.statuses());
    let st = m.statuses();
    assert!(
        st[0]
            .last_error
            .as_deref()
            .unwrap()
            .contains("/nonexistent/mcp-server"),
        "{st:?}"
    );
    assert_eq!(
        (st[1].name.as_str(), st[1].state),
        ("off", ServerState::Disabled)
    );
    assert!(
        st[2].last_error.as_deref().unwrap().contains("UNSET_VAR"),
        "{st:?}"
    );
    assert_eq!(st[2].transport, "http");
    assert!(m.tools().is_empty());
    m.shutdown().await;
}

/// A dev-mode skill folder `notes` (with its state folders beside it) whose
/// entry is a script that refuses to start outside its folder, records its
/// pid in its state folder, and execs `fake-mcp`. Not verified yet.
fn skill_folder() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("skills/notes");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("hearth-skill.json"),
        r#"{"name":"notes","version":"1.0.0","description":"Notes","entry":"run.sh",
            "env":["PASSED","DECLARED_BUT_UNSET"],"hearth":">=0.1"}"#,
    )
    .unwrap();
    let fake = hearth_testkit::fake_mcp::fake_mcp_bin();
    let script = format!(
        "#!/bin/sh\n[ -f marker ] || {{ echo 'not run from the skill folder' >&2; exit 1; }}\n\
         echo $$ > \"$HEARTH_SKILL_STATE/pid\"\nexec '{}' \"$@\"\n",
        fake.display()
    );
    let entry = dir.join("run.sh");
    std::fs::write(&entry, script).unwrap();
    std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(dir.join("marker"), "").unwrap();
    root
}

/// The skill of `skill_folder`, verified now (unsigned, allowed as dev
/// mode), run under `name`.
fn skill(name: &str, root: &std::path::Path) -> hearth_mcp::SkillServer {
    let trust = hearth_skills::Trust {
        allowed_unsigned_dirs: vec![std::fs::canonicalize(root).unwrap()],
        ..hearth_skills::Trust::default()
    };
    let v = hearth_skills::manifest::verify(&root.join("skills/notes"), &trust).unwrap();
    let mut exe = hearth_skills::ExecutableSkill::new(
        v,
        BTreeMap::from([("API_URL".to_owned(), "http://x".to_owned())]),
    );
    exe.name = name.to_owned();
    hearth_mcp::SkillServer {
        skill: exe,
        timeout_secs: 1,
        state_dir: root.join("skills-state").join(name),
        read_tools: Vec::new(),
        trust_annotations: false,
    }
}

/// Whether process `pid` has exited (or is a zombie nobody reaped yet).
fn gone(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

#[tokio::test]
async fn an_executable_skill_runs_as_a_server_and_follows_reloads() {
    let folder = skill_folder();
    let m = start(vec![("fk", server(|_| {}))], 1024).await;
    let mut notes = skill("notes", folder.path());
    notes.trust_annotations = true;
    let synced = m.sync_skills(vec![notes.clone(), skill("fk", folder.path())]);
    assert_eq!(synced.started, vec!["notes"]);
    assert_eq!(
        synced.clashing,
        vec!["fk"],
        "a configured server keeps its name"
    );
    ready(&m, "notes").await;
    let r = registry(&m);
    // Grantable: the configured server's capability, not the skill's.
    assert_eq!(
        r.extra_capabilities(),
        BTreeMap::from([("mcp.fk".to_owned(), "trusted")])
    );
    let echo = r.get("notes__echo").unwrap();
    assert_eq!(echo.class(), ToolClass::Read, "trust_annotations is set");
    assert_eq!(echo.capability(), Some("skills.use"));
    assert_eq!(
        echo.capability_preset(),
        None,
        "skills.use is a known capability"
    );
    assert_eq!(echo.source(), "skill:notes");
    assert_eq!(
        r.get("notes__write_note").unwrap().class(),
        ToolClass::Write
    );
    let (err, v) = call(&r, "notes__echo", json!({"text": "from a skill"})).await;
    assert!(!err, "{v}");
    assert!(
        v["untrusted_content"]
            .as_str()
            .unwrap()
            .contains("from a skill"),
        "{v}"
    );
    // Only the declared variables that are set, PATH, HOME, its config and
    // its state folder. (PWD is exported by the entry's own shell.)
    let raw = m.call("notes", "env", Default::default()).await.unwrap();
    let seen: Vec<&str> = raw["content"][0]["text"]
        .as_str()
        .unwrap()
        .lines()
        .filter(|v| *v != "PWD")
        .collect();
    assert_eq!(
        seen,
        ["API_URL", "HEARTH_SKILL_STATE", "HOME", "PASSED", "PATH"]
    );
    let state = folder.path().join("skills-state/notes");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&state).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
    }
    // The per-call timeout applies.
    let (err, v) = call(&r, "notes__hang", json!({})).await;
    assert!(err);
    assert!(
        v["error"].as_str().unwrap().contains("timed out after 1 s"),
        "{v}"
    );

    // The same list again changes nothing; the child keeps running.
    let pid = std::fs::read_to_string(state.join("pid")).unwrap();
    let pid = pid.trim().to_owned();
    assert_eq!(
        m.sync_skills(vec![notes.clone()]),
        hearth_mcp::SkillsSynced::default()
    );
    assert!(!gone(&pid));

    // A changed skill is restarted; a removed one is stopped and its tools go.
    let mut changed = notes.clone();
    changed.skill.args = vec!["--changed".into()];
    let synced = m.sync_skills(vec![changed]);
    assert_eq!(
        (synced.stopped, synced.started),
        (vec!["notes".to_owned()], vec!["notes".to_owned()])
    );
    ready(&m, "notes").await;
    let synced = m.sync_skills(Vec::new());
    assert_eq!(synced.stopped, vec!["notes"]);
    assert!(r.get("notes__echo").is_none());
    assert!(m.statuses().iter().all(|s| s.name != "notes"));
    let deadline = std::time::Instant::now() + WAIT;
    while !gone(&pid) {
        assert!(
            std::time::Instant::now() < deadline,
            "the child {pid} was not stopped"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    m.shutdown().await;
}

#[tokio::test]
async fn a_skill_that_crashes_at_start_is_retried_and_isolated() {
    let folder = skill_folder();
    std::fs::remove_file(folder.path().join("skills/notes/marker")).unwrap();
    let m = start(Vec::new(), 1024).await;
    m.sync_skills(vec![skill("broken", folder.path())]);
    let failed = m
        .wait_for("broken", WAIT, |s| s.state == ServerState::Failed)
        .await;
    assert!(failed, "{:?}", m.statuses());
    let st = m.statuses().remove(0);
    assert!(
        st.last_error
            .as_deref()
            .unwrap()
            .contains("not run from the skill folder"),
        "{st:?}"
    );
    assert!(m.tools().is_empty());
    m.shutdown().await;
}

#[tokio::test]
async fn a_skill_changed_after_it_was_verified_is_not_started_again_after_a_crash() {
    let folder = skill_folder();
    let m = start(Vec::new(), 1024).await;
    let notes = skill("notes", folder.path());
    m.sync_skills(vec![notes.clone()]);
    ready(&m, "notes").await;
    let pid_file = notes.state_dir.join("pid");
    let pid = pid_in(&pid_file).await;
    std::fs::remove_file(&pid_file).unwrap();
    // Edited in place, no reload: the running child is left alone...
    let script = folder.path().join("skills/notes/run.sh");
    let mut text = std::fs::read_to_string(&script).unwrap();
    text.push_str("# changed\n");
    std::fs::write(&script, text).unwrap();
    assert!(!gone(&pid));
    // ...but when it dies, the edited program is not started in its place.
    let r = registry(&m);
    let (err, _) = call(&r, "notes__die", json!({})).await;
    assert!(err);
    let refused = m
        .wait_for("notes", WAIT, |s| {
            s.state == ServerState::Failed || (s.state == ServerState::Ready && pid_file.exists())
        })
        .await;
    let st = m.statuses().remove(0);
    assert!(refused, "{st:?}");
    assert!(!pid_file.exists(), "the edited run.sh was started: {st:?}");
    assert_eq!(st.state, ServerState::Failed, "{st:?}");
    assert!(
        st.last_error
            .as_deref()
            .unwrap()
            .contains("run.sh changed since the skill was verified"),
        "{st:?}"
    );
    m.shutdown().await;
}

#[tokio::test]
async fn a_new_version_of_a_skill_is_restarted_on_reload() {
    let folder = skill_folder();
    let m = start(Vec::new(), 1024).await;
    let first = skill("notes", folder.path());
    m.sync_skills(vec![first.clone()]);
    ready(&m, "notes").await;
    let pid_file = first.state_dir.join("pid");
    let old = pid_in(&pid_file).await;
    std::fs::remove_file(&pid_file).unwrap();
    // Same program, arguments and settings; one more file.
    std::fs::write(folder.path().join("skills/notes/data.txt"), "v2").unwrap();
    let second = skill("notes", folder.path());
    let synced = m.sync_skills(vec![second]);
    assert_eq!(
        (synced.stopped, synced.started),
        (vec!["notes".to_owned()], vec!["notes".to_owned()])
    );
    ready(&m, "notes").await;
    let new = pid_in(&pid_file).await;
    assert_ne!(old, new);
    assert!(gone(&old), "the old version {old} still runs");
    m.shutdown().await;
}

#[tokio::test]
async fn a_tool_of_a_starting_server_can_be_waited_for_and_a_failed_one_says_why() {
    let m = start(
        vec![
            (
                "slow",
                server(|s| s.args = vec!["--start-delay-ms".into(), "300".into()]),
            ),
            (
                "broken",
                McpServerConfig {
                    command: Some("/nonexistent/mcp-server".into()),
                    ..McpServerConfig::default()
                },
            ),
            ("off", server(|s| s.enabled = false)),
        ],
        1024,
    )
    .await;
    let r = registry(&m);
    // Not listed yet; the wait ends when it is.
    assert!(r.get("slow__echo").is_none());
    let wait = r.pending("slow__echo").expect("a starting server's tool");
    wait.await.unwrap();
    assert!(r.get("slow__echo").is_some_and(|t| t.available()));
    assert!(r.pending("slow__echo").is_none(), "callable now");
    // A tool the server turns out not to have.
    let err = r.pending("slow__nope").unwrap().await.unwrap_err();
    assert_eq!(err, "MCP server slow has no tool slow__nope");
    // A server that cannot start: the wait ends with its error, and so does a call.
    let err = r.pending("broken__read").unwrap().await.unwrap_err();
    assert!(
        err.contains("MCP server broken is not available (failed)")
            && err.contains("/nonexistent/mcp-server"),
        "{err}"
    );
    let (is_err, v) = call(&r, "broken__read", json!({})).await;
    assert!(is_err);
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .starts_with("MCP server broken is not available (failed)"),
        "{v}"
    );
    // Disabled: nothing to wait for; a name of no server stays unknown.
    assert!(r.pending("off__echo").is_none());
    assert!(r.pending("nobody__echo").is_none());
    let (_, v) = call(&r, "nobody__echo", json!({})).await;
    assert_eq!(v["error"], "unknown tool \"nobody__echo\"");
    m.shutdown().await;
}
