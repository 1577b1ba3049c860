//! Threads, runs, who the CLI is, permissions in the forms hearth shows,
//! shell completions and the man page.

use serde_json::Value;

use crate::harness::{Hearth, command, hearth};

#[tokio::test]
async fn threads_and_runs_are_listed_shown_and_read() {
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), None).await;
    h.ask("api:one", "first").await;
    h.ask("api:two", "second").await;
    h.ask("api:two", "third").await;

    let (code, out, err) = hearth(&h, &["threads", "list"]).await;
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(lines[0].starts_with("thread"), "{out}");
    // The most recently active first, with its run count.
    assert!(
        lines[1].starts_with("api:two") && lines[1].contains(" 2 "),
        "{out}"
    );
    assert!(lines[2].starts_with("api:one"), "{out}");
    let (code, out, _) = hearth(&h, &["threads", "list", "--json"]).await;
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["threads"][0]["thread_key"], "api:two", "{v}");
    assert_eq!(v["threads"][0]["runs"], 2, "{v}");

    let (code, out, err) = hearth(&h, &["threads", "show", "api:two"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("model      echo/echo") && out.contains("messages   4"),
        "{out}"
    );
    let (code, out, err) = hearth(&h, &["threads", "history", "api:two"]).await;
    assert_eq!(code, 0, "{err}");
    let texts: Vec<&str> = out.lines().map(|l| l.split_once("] ").unwrap().1).collect();
    // Oldest first, as a conversation reads.
    assert_eq!(
        texts,
        [
            "user: second",
            "assistant: echo: second",
            "user: third",
            "assistant: echo: third"
        ],
        "{out}"
    );

    let (code, out, err) = hearth(&h, &["runs", "list", "--thread", "api:two"]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 3, "{out}");
    assert!(
        out.lines()
            .skip(1)
            .all(|l| l.contains("succeeded") && l.contains("api:two")),
        "{out}"
    );
    let (_, out, _) = hearth(&h, &["runs", "list", "--status", "failed"]).await;
    assert_eq!(out.trim(), "no runs");
    let (_, out, _) = hearth(&h, &["runs", "list", "--since", "1h", "--json"]).await;
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["runs"].as_array().unwrap().len(), 3, "{v}");
    let (_, out, _) = hearth(
        &h,
        &["runs", "list", "--since", "2999-01-01T00:00:00Z", "--json"],
    )
    .await;
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["runs"], serde_json::json!([]), "{v}");
    let (code, _, err) = hearth(&h, &["runs", "list", "--since", "yesterday-ish"]).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--since"), "{err}");
}

#[tokio::test]
async fn whoami_and_permissions_check_say_why() {
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), None).await;
    let (code, out, err) = hearth(&h, &["whoami"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("user      cli:user:local"), "{out}");
    let row = |out: &str, cap: &str| {
        out.lines()
            .find(|l| l.starts_with(&format!("{cap} ")))
            .unwrap_or_else(|| panic!("no {cap} in {out}"))
            .to_owned()
    };
    assert!(
        row(&out, "web.fetch").contains("yes")
            && row(&out, "web.fetch").contains("default preset `member`"),
        "{out}"
    );
    assert!(row(&out, "jobs.manage").contains("no"), "{out}");

    // The key as hearth shows it in its messages, and with `user:`.
    let (code, out, err) = hearth(
        &h,
        &["permissions", "grant", "cli:user:local", "jobs.manage"],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.trim(),
        "granted jobs.manage to user:cli:user:local in global"
    );
    let (code, _, err) = hearth(
        &h,
        &[
            "permissions",
            "grant",
            "user:cli:user:bob",
            "preset:trusted",
        ],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = hearth(&h, &["permissions", "grant", "role:42", "web.fetch"]).await;
    assert_eq!(code, 0, "{err}");

    let (_, out, _) = hearth(
        &h,
        &["permissions", "check", "cli:user:local", "jobs.manage"],
    )
    .await;
    assert_eq!(
        out.trim(),
        "allowed: by the grant of jobs.manage to user:cli:user:local in global"
    );
    let (_, out, _) = hearth(
        &h,
        &["permissions", "check", "user:cli:user:bob", "skills.use"],
    )
    .await;
    assert_eq!(
        out.trim(),
        "allowed: by the grant of preset:trusted to user:cli:user:bob in global"
    );
    let (_, out, _) = hearth(&h, &["permissions", "check", "cli:user:bob", "web.fetch"]).await;
    assert!(out.contains("default preset `member`"), "{out}");
    let (_, out, _) = hearth(
        &h,
        &["permissions", "check", "cli:user:eve", "llm.configure"],
    )
    .await;
    assert!(
        out.starts_with("denied: ")
            && out.contains("hearth permissions grant cli:user:eve llm.configure"),
        "{out}"
    );
    let (_, out, _) = hearth(&h, &["whoami"]).await;
    assert!(row(&out, "jobs.manage").contains("yes"), "{out}");
}

#[tokio::test]
async fn completions_parse_and_name_the_subcommands_and_man_is_roff() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: Vec<&'static str>| {
        let mut cmd = command(dir.path());
        cmd.args(args);
        cmd
    };
    let out = run(vec!["completions", "bash"]).output().await.unwrap();
    assert_eq!(out.status.code(), Some(0));
    let script = String::from_utf8(out.stdout).unwrap();
    for sub in ["message", "threads", "whoami", "completions", "serve"] {
        assert!(script.contains(sub), "{sub} missing from the bash script");
    }
    let path = dir.path().join("hearth.bash");
    std::fs::write(&path, &script).unwrap();
    let check = std::process::Command::new("bash")
        .arg("-n")
        .arg(&path)
        .output()
        .unwrap();
    assert!(check.status.success(), "{check:?}");
    for shell in ["zsh", "fish", "powershell"] {
        let out = run(vec!["completions", shell]).output().await.unwrap();
        assert_eq!(out.status.code(), Some(0), "{shell}");
        let script = String::from_utf8(out.stdout).unwrap();
        assert!(script.contains("whoami"), "{shell}: {script}");
    }
    let (code, _, _) = {
        let out = run(vec!["completions", "tcsh"]).output().await.unwrap();
        (out.status.code(), (), ())
    };
    assert_eq!(code, Some(2));

    let out = run(vec!["man"]).output().await.unwrap();
    assert_eq!(out.status.code(), Some(0));
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(
        page.contains("\n.TH hearth 1 "),
        "{}",
        &page[..200.min(page.len())]
    );
    assert!(
        page.contains(".SH \"HEARTH MESSAGE\""),
        "no message section"
    );
    assert!(
        page.contains(".SH \"EXIT STATUS\"\nExit codes:"),
        "no exit codes"
    );
    // Each command's own subcommands by their full usage, not as pages
    // that do not exist (`hearth-run-get(1)`).
    assert!(
        page.contains("\\fBhearth run get <RUN_ID>\\fR"),
        "no run get"
    );
    assert!(!page.contains("hearth\\-run\\-get(1)") && !page.contains("hearth-run-get(1)"));
}
