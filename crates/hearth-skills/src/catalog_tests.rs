use super::*;
use std::path::Path;

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn md(name: &str, description: &str, extra: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n{extra}---\nRun {{baseDir}}/run.sh\n")
}

fn options(roots: Vec<Root>) -> SkillsOptions {
    SkillsOptions {
        roots,
        prompt_budget_chars: 4000,
        host: Host {
            os: "linux".into(),
            path: Vec::new(),
            env: ["HAVE_KEY".to_owned()].into(),
        },
        ..SkillsOptions::default()
    }
}

#[test]
fn precedence_eligibility_and_reasons() {
    let t = tempfile::tempdir().unwrap();
    let (high, low) = (t.path().join("high"), t.path().join("low"));
    write(&high, "dup/SKILL.md", &md("dup", "from high", ""));
    write(&low, "dup/SKILL.md", &md("dup", "from low", ""));
    let meta = |json: &str| format!("metadata: {{\"openclaw\": {json}}}\n");
    write(
        &low,
        "mac/SKILL.md",
        &md("mac", "d", &meta(r#"{"os": ["darwin"]}"#)),
    );
    write(
        &low,
        "bin/SKILL.md",
        &md(
            "bin",
            "d",
            &meta(r#"{"requires": {"bins": ["no-such-program-x"]}}"#),
        ),
    );
    write(
        &low,
        "any/SKILL.md",
        &md(
            "any",
            "d",
            &meta(r#"{"requires": {"anyBins": ["nope1", "nope2"]}}"#),
        ),
    );
    write(
        &low,
        "env/SKILL.md",
        &md(
            "env",
            "d",
            &meta(r#"{"requires": {"env": ["HAVE_KEY", "NO_KEY"]}}"#),
        ),
    );
    write(
        &low,
        "always/SKILL.md",
        &md("always", "d", &meta(r#"{"always": true, "os": ["win32"]}"#)),
    );
    write(
        &low,
        "keyed/SKILL.md",
        &md(
            "keyed",
            "d",
            &meta(r#"{"requires": {"env": ["HAVE_KEY"]}}"#),
        ),
    );
    write(&low, "broken/SKILL.md", "---\nname: broken\n---\n");
    let roots = vec![
        Root {
            path: high.clone(),
            source: Source::Workspace,
        },
        Root {
            path: low.clone(),
            source: Source::Home,
        },
    ];
    let c = Catalog::load(&options(roots));
    let got: Vec<(&str, &str, bool, Option<&str>)> = c
        .skills
        .iter()
        .map(|s| {
            (
                s.name.as_str(),
                s.source.as_str(),
                s.eligible,
                s.reason.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("dup", "workspace", true, None),
            ("always", "home", true, None),
            (
                "any",
                "home",
                false,
                Some("needs one of the programs nope1, nope2 on PATH")
            ),
            (
                "bin",
                "home",
                false,
                Some("needs the program no-such-program-x on PATH")
            ),
            (
                "broken",
                "home",
                false,
                Some("invalid description: is required")
            ),
            (
                "env",
                "home",
                false,
                Some("needs the environment variable NO_KEY")
            ),
            ("keyed", "home", true, None),
            (
                "mac",
                "home",
                false,
                Some("needs os darwin (this is linux)")
            ),
        ]
    );
    assert_eq!(c.get("dup").unwrap().description, "from high");
    assert_eq!(c.get("dup").unwrap().signed, None);
    let body = c.get("keyed").unwrap().body().unwrap();
    let real = std::fs::canonicalize(low.join("keyed")).unwrap();
    assert_eq!(body, format!("Run {}/run.sh\n", real.display()));
}

#[test]
fn prompt_lists_offered_skills_within_the_budget() {
    let t = tempfile::tempdir().unwrap();
    for i in 0..5 {
        write(
            t.path(),
            &format!("s{i}/SKILL.md"),
            &md(&format!("s{i}"), &"word ".repeat(20), ""),
        );
    }
    write(
        t.path(),
        "hidden/SKILL.md",
        &md("hidden", "d", "disable-model-invocation: true\n"),
    );
    let root = vec![Root {
        path: t.path().into(),
        source: Source::Home,
    }];
    let mut o = options(root);
    o.prompt_budget_chars = 400;
    let c = Catalog::load(&o);
    let p = &*c.prompt;
    assert!(p.starts_with("## Skills\n"), "{p}");
    assert!(p.contains("- s0: word"), "{p}");
    assert!(p.len() <= 400 + "More skills (read them for what they do): s1, s2, s3, s4\n".len());
    assert!(
        p.ends_with("More skills (read them for what they do): s2, s3, s4\n"),
        "{p}"
    );
    assert!(!p.contains("hidden"), "{p}");
    assert!(c.get("hidden").unwrap().eligible);
    assert!(!c.get("hidden").unwrap().offered());
    // No skill, no prompt text at all.
    assert_eq!(&*Catalog::load(&options(Vec::new())).prompt, "");
}

#[test]
fn reload_sees_new_skills_and_executables_are_described() {
    let t = tempfile::tempdir().unwrap();
    let root = vec![Root {
        path: t.path().into(),
        source: Source::Extra,
    }];
    let mut o = options(root);
    o.trust.allowed_unsigned_dirs = vec![std::fs::canonicalize(t.path()).unwrap()];
    let skills = Skills::load(o);
    assert!(skills.catalog().skills.is_empty());
    let heard = Arc::new(std::sync::Mutex::new(Vec::new()));
    let h = heard.clone();
    skills.on_reload(move |c| {
        let names = c.executables().map(|e| e.name.clone());
        h.lock().unwrap().extend(names);
    });
    write(t.path(), "a/SKILL.md", &md("a", "first", ""));
    write(
        t.path(),
        "exe/hearth-skill.json",
        r#"{"name":"exe","version":"0.1.0","description":"A tool server","entry":"run","env":["K"],"hearth":"0.1"}"#,
    );
    write(t.path(), "exe/run", "#!/bin/sh\n");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let run = t.path().join("exe/run");
        std::fs::set_permissions(run, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    write(
        t.path(),
        "refused/hearth-skill.json",
        r#"{"name":"refused"}"#,
    );
    let c = skills.reload();
    assert_eq!(skills.catalog().skills.len(), 3);
    assert_eq!(
        *heard.lock().unwrap(),
        ["exe"],
        "the listener saw the reload"
    );
    let exe = c.get("exe").unwrap();
    assert_eq!(
        (exe.eligible, exe.signed, exe.description.as_str()),
        (true, Some(false), "A tool server")
    );
    let bad = c.get("refused").unwrap();
    assert_eq!(bad.signed, Some(false));
    assert!(
        bad.reason
            .as_deref()
            .unwrap()
            .starts_with("refused: hearth-skill.json: missing field"),
        "{:?}",
        bad.reason
    );
    let e: Vec<&ExecutableSkill> = c.executables().collect();
    assert_eq!(e.len(), 1);
    assert_eq!(
        e[0].entry,
        std::fs::canonicalize(t.path()).unwrap().join("exe/run")
    );
    assert_eq!(e[0].env, vec!["K"]);
    // An executable skill without SKILL.md is not in the prompt.
    assert!(!skills.prompt().contains("exe"));
    assert!(skills.prompt().contains("- a: first"));
}

#[cfg(unix)]
#[test]
fn a_skill_md_swapped_for_a_link_after_load_is_not_read() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("skills");
    write(&root, "pdf/SKILL.md", &md("pdf", "Fill PDF forms.", ""));
    write(t.path(), "hearth.toml", "api_key = \"sk-secret\"\n");
    let skills = Arc::new(Skills::load(options(vec![Root {
        path: root.clone(),
        source: Source::Home,
    }])));
    let skill = skills.catalog().get("pdf").unwrap().clone();
    assert!(skill.body().unwrap().starts_with("Run "));
    // Swapped after the load for a link to a file outside the folder.
    let md_path = root.join("pdf/SKILL.md");
    std::fs::remove_file(&md_path).unwrap();
    std::os::unix::fs::symlink(t.path().join("hearth.toml"), &md_path).unwrap();
    let err = skill.body().unwrap_err().to_string();
    assert!(err.contains("leads outside the skill's folder"), "{err}");
    // Neither the invoked-skill prompt nor skill_read sends the target.
    assert!(!skills.prompt_for("/pdf form.pdf").contains("sk-secret"));
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let read = crate::tools::SkillRead::new(skills.clone());
    let out = rt.block_on(hearth_tools::Tool::call(
        &read,
        &hearth_tools::ToolContext::default(),
        serde_json::json!({"name": "pdf"}),
    ));
    let err = out.unwrap_err().0;
    assert!(!err.contains("sk-secret"), "{err}");
    assert!(err.contains("leads outside"), "{err}");
}

#[test]
fn a_skill_md_over_the_cap_is_refused_at_load_and_at_use() {
    let t = tempfile::tempdir().unwrap();
    let big = format!(
        "{}{}",
        md("big", "Too long.", ""),
        "x".repeat(crate::read::MAX_SKILL_MD_BYTES as usize)
    );
    write(t.path(), "big/SKILL.md", &big);
    write(t.path(), "ok/SKILL.md", &md("ok", "Fine.", ""));
    let c = Catalog::load(&options(vec![Root {
        path: t.path().into(),
        source: Source::Home,
    }]));
    let big = c.get("big").unwrap();
    assert!(!big.eligible);
    assert_eq!(
        big.reason.as_deref(),
        Some("invalid SKILL.md: is larger than 256 KiB")
    );
    // Grown after the load.
    let ok = c.get("ok").unwrap();
    std::fs::write(
        &ok.path,
        format!("{}{}", md("ok", "Fine.", ""), "y".repeat(300_000)),
    )
    .unwrap();
    let err = ok.body().unwrap_err().to_string();
    assert!(err.contains("larger than 256 KiB"), "{err}");
}
