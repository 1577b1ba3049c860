use super::*;
use std::collections::BTreeMap;

/// A folder with a manifest and a program, not yet signed.
fn skill_dir(root: &Path, name: &str, extra: &str) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(dir.join("lib")).unwrap();
    std::fs::write(
        dir.join(MANIFEST),
        format!(
            r#"{{"name":"{name}","version":"1.0.0","description":"Weather","entry":"server.sh",
               "args":["--stdio"],"env":["WEATHER_KEY"],"hearth":">=0.1, <0.3"{extra}}}"#
        ),
    )
    .unwrap();
    std::fs::write(dir.join("server.sh"), "#!/bin/sh\necho hi\n").unwrap();
    std::fs::write(dir.join("lib/data.txt"), "data").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            dir.join("server.sh"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
    }
    dir
}

fn trust(key: &PrivateKey) -> Trust {
    Trust {
        keys: vec![TrustedKey::parse(&key.public()).unwrap()],
        ..Trust::default()
    }
}

fn refusal(dir: &Path, trust: &Trust) -> String {
    match verify(dir, trust) {
        Err(Error::Refused(why)) => why,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn signed_skill_verifies_and_lists_every_file() {
    let t = tempfile::tempdir().unwrap();
    let dir = skill_dir(t.path(), "weather", "");
    let key = PrivateKey::generate().unwrap();
    assert_eq!(sign(&dir, &key).unwrap(), key.key_id());
    let v = verify(&dir, &trust(&key)).unwrap();
    assert!(v.signed);
    assert_eq!(v.manifest.args, vec!["--stdio"]);
    assert_eq!(
        v.manifest.files.keys().collect::<Vec<_>>(),
        ["lib/data.txt", "server.sh"]
    );
    assert_eq!(v.manifest.key_id.as_deref(), Some(key.key_id().as_str()));
    // Signing again (after an edit) gives a manifest that verifies again.
    std::fs::write(dir.join("lib/data.txt"), "new data").unwrap();
    sign(&dir, &key).unwrap();
    assert!(verify(&dir, &trust(&key)).is_ok());
}

#[test]
fn tampering_is_refused_with_the_reason() {
    let t = tempfile::tempdir().unwrap();
    let key = PrivateKey::generate().unwrap();
    let trust = trust(&key);

    let dir = skill_dir(t.path(), "tampered", "");
    sign(&dir, &key).unwrap();
    std::fs::write(dir.join("server.sh"), "#!/bin/sh\nrm -rf ~\n").unwrap();
    assert_eq!(
        refusal(&dir, &trust),
        "hash mismatch: server.sh is not the file that was signed"
    );

    let dir = skill_dir(t.path(), "unlisted", "");
    sign(&dir, &key).unwrap();
    std::fs::write(dir.join("lib/extra.py"), "print()").unwrap();
    assert!(refusal(&dir, &trust).starts_with("lib/extra.py is not listed in files"));

    let dir = skill_dir(t.path(), "edited", "");
    sign(&dir, &key).unwrap();
    let text = std::fs::read_to_string(dir.join(MANIFEST)).unwrap();
    std::fs::write(dir.join(MANIFEST), text.replace("--stdio", "--evil")).unwrap();
    assert!(refusal(&dir, &trust).starts_with("bad signature"));

    let dir = skill_dir(t.path(), "stranger", "");
    let other = PrivateKey::generate().unwrap();
    sign(&dir, &other).unwrap();
    assert_eq!(
        refusal(&dir, &trust),
        format!(
            "signed by key {}, which is not in [skills] trusted_keys",
            other.key_id()
        )
    );
}

#[test]
fn unsigned_loads_only_from_allowed_dirs() {
    let t = tempfile::tempdir().unwrap();
    let dir = skill_dir(t.path(), "dev", "");
    assert!(refusal(&dir, &Trust::default()).starts_with("unsigned"));
    let dev = Trust {
        allowed_unsigned_dirs: vec![std::fs::canonicalize(t.path()).unwrap()],
        ..Trust::default()
    };
    let v = verify(&dir, &dev).unwrap();
    assert!(!v.signed);
}

#[test]
fn version_range_config_and_entry_are_checked() {
    let t = tempfile::tempdir().unwrap();
    let key = PrivateKey::generate().unwrap();
    let mut trust = trust(&key);

    let dir = skill_dir(t.path(), "future", "");
    let text = std::fs::read_to_string(dir.join(MANIFEST)).unwrap();
    std::fs::write(dir.join(MANIFEST), text.replace(">=0.1, <0.3", ">=2")).unwrap();
    sign(&dir, &key).unwrap();
    assert_eq!(
        refusal(&dir, &trust),
        format!("needs hearth >=2, this is {}", crate::HEARTH_VERSION)
    );

    let dir = skill_dir(t.path(), "needy", r#","requires":["API_URL"]"#);
    sign(&dir, &key).unwrap();
    assert_eq!(
        refusal(&dir, &trust),
        "missing config: set skills.config.needy.API_URL in hearth.toml"
    );
    trust.config.insert(
        "needy".into(),
        BTreeMap::from([("API_URL".into(), "http://x".into())]),
    );
    assert!(verify(&dir, &trust).is_ok());

    let dir = skill_dir(t.path(), "escape", "");
    let text = std::fs::read_to_string(dir.join(MANIFEST)).unwrap();
    std::fs::write(
        dir.join(MANIFEST),
        text.replace("server.sh\"", "../server.sh\""),
    )
    .unwrap();
    sign(&dir, &key).unwrap();
    assert!(refusal(&dir, &trust).contains("outside the skill folder"));

    let dir = skill_dir(t.path(), "traversal", "");
    sign(&dir, &key).unwrap();
    let text = std::fs::read_to_string(dir.join(MANIFEST)).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["files"]["../x"] = "00".into();
    v["signature"] = key.sign(&canonical(&v)).into();
    std::fs::write(dir.join(MANIFEST), v.to_string()).unwrap();
    assert_eq!(
        refusal(&dir, &trust),
        "files: \"../x\" is outside the skill folder"
    );

    let dir = skill_dir(t.path(), "bad", r#","surprise":1"#);
    assert!(refusal(&dir, &trust).contains("unknown field `surprise`"));
    std::fs::write(dir.join(MANIFEST), "{not json").unwrap();
    assert!(refusal(&dir, &trust).contains("not valid JSON"));
}

#[cfg(unix)]
#[test]
fn links_out_and_world_writable_files_are_refused() {
    use std::os::unix::fs::PermissionsExt;
    let t = tempfile::tempdir().unwrap();
    let key = PrivateKey::generate().unwrap();
    let trust = trust(&key);

    let dir = skill_dir(t.path(), "linked", "");
    sign(&dir, &key).unwrap();
    std::fs::write(t.path().join("outside.txt"), "x").unwrap();
    std::os::unix::fs::symlink(t.path().join("outside.txt"), dir.join("lib/out.txt")).unwrap();
    assert!(matches!(sign(&dir, &key), Err(Error::Refused(_))));
    assert_eq!(
        refusal(&dir, &trust),
        "lib/out.txt is a symlink leading outside the skill folder"
    );

    let dir = skill_dir(t.path(), "writable", "");
    sign(&dir, &key).unwrap();
    std::fs::set_permissions(
        dir.join("server.sh"),
        std::fs::Permissions::from_mode(0o757),
    )
    .unwrap();
    assert!(refusal(&dir, &trust).starts_with("server.sh is world-writable"));
    std::fs::set_permissions(
        dir.join("server.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::fs::set_permissions(dir.join("lib"), std::fs::Permissions::from_mode(0o777)).unwrap();
    assert!(refusal(&dir, &trust).starts_with("lib is world-writable"));

    let dir = skill_dir(t.path(), "noexec", "");
    std::fs::set_permissions(
        dir.join("server.sh"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    sign(&dir, &key).unwrap();
    assert!(refusal(&dir, &trust).contains("is not executable"));
}

#[test]
fn a_verified_folder_is_checked_again_before_each_start() {
    let t = tempfile::tempdir().unwrap();
    let key = PrivateKey::generate().unwrap();
    let trust = trust(&key);
    let dir = skill_dir(t.path(), "weather", "");
    sign(&dir, &key).unwrap();
    let v = verify(&dir, &trust).unwrap();
    assert_eq!(
        v.files.keys().collect::<Vec<_>>(),
        ["lib/data.txt", "server.sh"]
    );
    assert_eq!(v.manifest_sha256.len(), 64);
    let check = || match check_unchanged(&v.dir, &v.files, &v.manifest_sha256) {
        Ok(()) => String::new(),
        Err(e) => e.to_string(),
    };
    assert_eq!(check(), "");

    std::fs::write(dir.join("server.sh"), "#!/bin/sh\nrm -rf ~\n").unwrap();
    assert_eq!(
        check(),
        "server.sh changed since the skill was verified; reload the skills to verify it again"
    );
    std::fs::write(dir.join("server.sh"), "#!/bin/sh\necho hi\n").unwrap();
    assert_eq!(check(), "");
    std::fs::write(dir.join("lib/new.py"), "print()").unwrap();
    assert!(check().starts_with("lib/new.py was added since the skill was verified"));
    std::fs::remove_file(dir.join("lib/new.py")).unwrap();
    std::fs::remove_file(dir.join("lib/data.txt")).unwrap();
    assert!(check().starts_with("lib/data.txt was removed since the skill was verified"));
    std::fs::write(dir.join("lib/data.txt"), "data").unwrap();
    // A new version, signed by the same key, is a change too until reloaded.
    std::fs::write(dir.join("lib/data.txt"), "new data").unwrap();
    sign(&dir, &key).unwrap();
    assert!(check().starts_with("hearth-skill.json changed since the skill was verified"));
    let again = verify(&dir, &trust).unwrap();
    assert_ne!(again.manifest_sha256, v.manifest_sha256);
    assert!(check_unchanged(&again.dir, &again.files, &again.manifest_sha256).is_ok());
}
