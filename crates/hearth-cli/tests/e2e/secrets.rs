//! Sealed secrets end to end: keygen, set from stdin, a provider keyed by a
//! sealed secret, and the value never on disk in the clear.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use hearth_testkit::{FakeOpenAi, Reply};
use tokio::io::AsyncWriteExt;

use crate::harness::{FAKE_KEY_LINE, Hearth, command, fake_config};

const VALUE: &str = "sk-e2e-SEALED-value-7f3a9c1d";

/// Runs `hearth <args>` on `home` with `env` and `stdin`; (code, stdout, stderr).
pub(crate) async fn hearth(
    home: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    stdin: Option<&str>,
) -> (i32, String, String) {
    let mut cmd = command(home);
    cmd.args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        pipe.write_all(input.as_bytes()).await.unwrap();
        drop(pipe);
    }
    let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("hearth did not exit within 30 s")
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The database file and its WAL, concatenated.
pub(crate) fn db_bytes(home: &Path) -> Vec<u8> {
    let mut bytes = std::fs::read(home.join("hearth.db")).unwrap();
    if let Ok(wal) = std::fs::read(home.join("hearth.db-wal")) {
        bytes.extend(wal);
    }
    bytes
}

pub(crate) fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[tokio::test]
async fn a_provider_key_from_a_sealed_secret() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let config = format!(
        "{}api_key_secret = \"fake.key\"\n",
        fake_config(&fake.base_url()).replace(FAKE_KEY_LINE, "")
    );
    std::fs::write(home.join("hearth.toml"), &config).unwrap();

    // keygen: the key on stdout, the hint on stderr.
    let (code, out, err) = hearth(home, &["secrets", "keygen"], &[], None).await;
    assert_eq!(code, 0, "{err}");
    let key = out.trim().to_owned();
    assert_eq!(key.len(), 44, "{key}");
    assert!(err.contains("HEARTH_SECRET_KEY"), "{err}");
    let with_key = [("HEARTH_SECRET_KEY", key.as_str())];

    // set: needs the key, a valid name and a non-empty value on stdin.
    let (code, _, err) = hearth(home, &["secrets", "set", "fake.key"], &[], Some(VALUE)).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("HEARTH_SECRET_KEY is not set"), "{err}");
    assert!(err.contains("hearth secrets keygen"), "{err}");
    let (code, _, err) = hearth(
        home,
        &["secrets", "set", "fake.key"],
        &[("HEARTH_SECRET_KEY", "short")],
        Some(VALUE),
    )
    .await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("hearth secrets keygen"), "{err}");
    let (code, _, err) = hearth(
        home,
        &["secrets", "set", "bad/name"],
        &with_key,
        Some(VALUE),
    )
    .await;
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("bad/name") && err.contains("A-Z a-z 0-9 _ . -"),
        "{err}"
    );
    let (code, _, err) = hearth(home, &["secrets", "set", "fake.key"], &with_key, Some("\n")).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("empty"), "{err}");
    // One trailing newline is trimmed (as `echo` adds it).
    let (code, out, err) = hearth(
        home,
        &["secrets", "set", "fake.key"],
        &with_key,
        Some(&format!("{VALUE}\n")),
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("stored secret fake.key"), "{out}");
    assert!(!out.contains(VALUE) && !err.contains(VALUE));

    // list: the name, never the value; works without the key.
    let (code, out, err) = hearth(home, &["secrets", "list"], &[], None).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("fake.key "), "{out}");
    assert!(!out.contains(VALUE) && !err.contains(VALUE));
    let (code, out, _) = hearth(home, &["secrets", "list", "--json"], &[], None).await;
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["secrets"][0]["name"], "fake.key");
    assert!(v["secrets"][0]["created_at"].is_string());
    assert!(!out.contains(VALUE));

    // The value reaches the provider as its API key.
    let h = Hearth::start_with(home, None, &with_key).await;
    fake.push(Reply::text("hello from the fake"));
    let v = h.ask("api:secrets", "hi").await;
    assert_eq!(v["output"]["text"], "hello from the fake");
    let headers = fake.request_headers();
    let auth: Vec<&str> = headers[0]
        .iter()
        .filter(|(k, _)| k == "authorization")
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(auth, [format!("Bearer {VALUE}")]);
    assert!(
        !contains(&db_bytes(home), VALUE),
        "plaintext in the database"
    );
    assert!(h.terminate().await.success());
    assert!(
        !contains(&db_bytes(home), VALUE),
        "plaintext in the database"
    );
    let log = std::fs::read(home.join("serve.log")).unwrap();
    assert!(!contains(&log, VALUE), "plaintext in the log");

    // A wrong or missing key stops start-up with a clear message.
    let other = hearth(home, &["secrets", "keygen"], &[], None).await.1;
    let serve = ["serve", "--bind", "127.0.0.1:0"];
    let (code, _, err) = hearth(home, &serve, &[("HEARTH_SECRET_KEY", other.trim())], None).await;
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("provider fake") && err.contains("fake.key"),
        "{err}"
    );
    assert!(err.contains("wrong HEARTH_SECRET_KEY"), "{err}");
    let (code, _, err) = hearth(home, &serve, &[], None).await;
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("provider fake") && err.contains("HEARTH_SECRET_KEY is not set"),
        "{err}"
    );

    // delete; then the provider's secret is missing at start-up.
    let (code, out, err) = hearth(home, &["secrets", "delete", "fake.key"], &[], None).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("deleted secret fake.key"), "{out}");
    let (code, _, err) = hearth(home, &["secrets", "delete", "fake.key"], &[], None).await;
    assert_eq!(code, 1, "{err}");
    let (code, out, _) = hearth(home, &["secrets", "list", "--json"], &[], None).await;
    assert_eq!(code, 0);
    assert!(!out.contains("fake.key"), "{out}");
    let (code, _, err) = hearth(home, &serve, &with_key, None).await;
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("provider fake") && err.contains("hearth secrets set fake.key"),
        "{err}"
    );
}

#[tokio::test]
async fn both_key_sources_is_a_config_error() {
    let dir = tempfile::tempdir().unwrap();
    let config = "[llm.providers.cloud]\ntype = \"openai\"\napi_key_env = \"K\"\n\
                  api_key_secret = \"k\"\nmodels = [\"m\"]\n";
    std::fs::write(dir.path().join("hearth.toml"), config).unwrap();
    let (code, _, err) = hearth(dir.path(), &["serve", "--bind", "127.0.0.1:0"], &[], None).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("llm.providers.cloud"), "{err}");
    assert!(err.contains("not both"), "{err}");
}
