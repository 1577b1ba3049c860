//! A skills folder as a user has it (SKILL.md skills, a signed executable
//! skill, a refused one), loaded and read through the tool registry.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hearth_skills::{
    Host, PrivateKey, Root, Skills, SkillsOptions, Source, Trust, TrustedKey, manifest,
};
use hearth_tools::{ToolContext, ToolRegistry};
use serde_json::Value;

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn executable(dir: &Path) {
    write(
        dir,
        "hearth-skill.json",
        r#"{"name":"weather","version":"1.2.0","description":"Forecasts","entry":"bin/server",
            "args":["--stdio"],"env":["WEATHER_KEY"],"publisher":"Example","hearth":">=0.1"}"#,
    );
    write(dir, "bin/server", "#!/bin/sh\nexec cat\n");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let p = dir.join("bin/server");
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

async fn call(r: &ToolRegistry, name: &str, args: &str) -> Value {
    let out = r
        .execute(&ToolContext::default(), name, args, Duration::from_secs(5))
        .await;
    serde_json::from_str(&out.json).unwrap()
}

#[tokio::test]
async fn a_skills_folder_end_to_end() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("skills");
    write(
        &root,
        "pdf/SKILL.md",
        "---\nname: pdf\ndescription: Fill PDF forms.\n---\nSee {baseDir}/forms.md first.\n",
    );
    write(&root, "pdf/forms.md", "Use pdftk.");
    write(&t.path().join("secret"), "key.txt", "s3cret");
    write(
        &root,
        "bad/SKILL.md",
        "---\nname: Bad\ndescription: x\n---\n",
    );
    let key = PrivateKey::generate().unwrap();
    executable(&root.join("weather"));
    manifest::sign(&root.join("weather"), &key).unwrap();
    executable(&root.join("stranger"));
    write(
        &root,
        "stranger/hearth-skill.json",
        &std::fs::read_to_string(root.join("weather/hearth-skill.json"))
            .unwrap()
            .replace("weather", "stranger"),
    );
    manifest::sign(&root.join("stranger"), &PrivateKey::generate().unwrap()).unwrap();

    let skills = Arc::new(Skills::load(SkillsOptions {
        roots: vec![Root {
            path: root.clone(),
            source: Source::Home,
        }],
        trust: Trust {
            keys: vec![TrustedKey::parse(&key.public()).unwrap()],
            ..Trust::default()
        },
        prompt_budget_chars: 1000,
        host: Host {
            os: "linux".into(),
            ..Host::default()
        },
    }));
    let c = skills.catalog();
    let listed: Vec<(&str, bool, Option<bool>)> = c
        .skills
        .iter()
        .map(|s| (s.name.as_str(), s.eligible, s.signed))
        .collect();
    assert_eq!(
        listed,
        [
            ("Bad", false, None),
            ("pdf", true, None),
            ("stranger", false, Some(false)),
            ("weather", true, Some(true))
        ]
    );
    assert!(
        c.get("stranger")
            .unwrap()
            .reason
            .as_deref()
            .unwrap()
            .contains("not in [skills] trusted_keys")
    );
    let exe: Vec<_> = c.executables().collect();
    assert_eq!(exe.len(), 1);
    assert_eq!(
        (
            exe[0].name.as_str(),
            exe[0].args.as_slice(),
            exe[0].env.as_slice()
        ),
        (
            "weather",
            &["--stdio".to_owned()][..],
            &["WEATHER_KEY".to_owned()][..]
        )
    );
    assert!(exe[0].entry.is_absolute() && exe[0].entry.ends_with("weather/bin/server"));
    assert!(skills.prompt().contains("- pdf: Fill PDF forms."));

    let mut r = ToolRegistry::new();
    for tool in hearth_skills::tools::tools(skills.clone()) {
        assert_eq!(tool.capability(), Some("skills.read"));
        r.register(tool);
    }
    let v = call(&r, "skill_read", r#"{"name":"pdf"}"#).await;
    let dir = std::fs::canonicalize(root.join("pdf")).unwrap();
    assert_eq!(
        v["instructions"],
        format!("See {}/forms.md first.\n", dir.display())
    );
    let v = call(&r, "skill_file", r#"{"skill":"pdf","path":"forms.md"}"#).await;
    let wrapped = v["untrusted_content"].as_str().unwrap();
    assert!(
        wrapped.starts_with("<untrusted-content source=\"skill_file\""),
        "{wrapped}"
    );
    assert!(wrapped.contains(r#""content":"Use pdftk.""#), "{wrapped}");
    let v = call(
        &r,
        "skill_file",
        r#"{"skill":"pdf","path":"../../secret/key.txt"}"#,
    )
    .await;
    assert!(v["error"].as_str().unwrap().contains("without `..`"), "{v}");
    let v = call(&r, "skill_read", r#"{"name":"Bad"}"#).await;
    assert!(v["error"].as_str().unwrap().contains("invalid name"), "{v}");
    let v = call(&r, "skill_read", r#"{"name":"nope"}"#).await;
    assert_eq!(v["error"], "no skill named \"nope\"");

    // A skill added later is served after a reload, not before.
    write(
        &root,
        "late/SKILL.md",
        "---\nname: late\ndescription: Later.\n---\nhi\n",
    );
    assert!(call(&r, "skill_read", r#"{"name":"late"}"#).await["error"].is_string());
    assert_eq!(skills.reload().skills.len(), 5);
    assert_eq!(
        call(&r, "skill_read", r#"{"name":"late"}"#).await["instructions"],
        "hi\n"
    );
}
