//! `hearth init` against the real binary: it writes a minimal hearth.toml
//! that `serve` answers with, keeps an existing file unless `--force`,
//! lists the server's models, finds a local Ollama, and exits with doctor's
//! status.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use axum::Json;
use axum::routing::get;
use hearth_testkit::FakeOpenAi;
use serde_json::json;
use tokio::io::AsyncWriteExt;

use crate::doctor::hearth;
use crate::harness::{Hearth, command};

/// No Ollama here: a port that was just free.
fn no_ollama() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    format!("http://127.0.0.1:{}", l.local_addr().unwrap().port())
}

fn private_home(dir: &Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
    home
}

#[tokio::test]
async fn init_yes_writes_a_config_that_serve_answers_with() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let home = private_home(dir.path());
    let base = fake.base_url();
    let ollama = no_ollama();
    let env = [
        ("FAKE_KEY", "test-key"),
        ("HEARTH_OLLAMA_URL", ollama.as_str()),
    ];
    let (code, out, err) = hearth(
        &home,
        &[
            "init",
            "--yes",
            "--provider",
            "openai-compat",
            "--base-url",
            &base,
            "--model",
            "fake-model",
            "--key-env",
            "FAKE_KEY",
        ],
        &env,
    )
    .await;
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("Next: hearth serve"), "{out}");
    let written = std::fs::read_to_string(home.join("hearth.toml")).unwrap();
    assert!(written.contains("api_key_env = \"FAKE_KEY\""), "{written}");
    assert!(
        !written.contains("test-key"),
        "a key value was written:\n{written}"
    );
    let h = Hearth::start_with(&home, None, &[("FAKE_KEY", "test-key")]).await;
    let env = h.ask("cli:init", "hello from init").await;
    assert_eq!(env["status"], "succeeded", "{env}");
    assert!(
        env["output"]["text"]
            .as_str()
            .unwrap()
            .contains("hello from init"),
        "{env}"
    );
    assert_eq!(env["model"], "compat/fake-model", "{env}");
    h.kill().await;
    assert!(fake.violations().is_empty());
}

#[tokio::test]
async fn an_existing_file_is_kept_unless_force_which_keeps_a_bak() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let home = private_home(dir.path());
    let mine = "[llm]\ndefault_model = \"echo/echo\"\n";
    std::fs::write(home.join("hearth.toml"), mine).unwrap();
    let base = fake.base_url();
    let ollama = no_ollama();
    let env = [
        ("FAKE_KEY", "test-key"),
        ("HEARTH_OLLAMA_URL", ollama.as_str()),
    ];
    let args = [
        "init",
        "--yes",
        "--provider",
        "openai-compat",
        "--base-url",
        &base,
        "--key-env",
        "FAKE_KEY",
    ];
    let (code, out, err) = hearth(&home, &args, &env).await;
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("is kept"), "{out}");
    assert_eq!(
        std::fs::read_to_string(home.join("hearth.toml")).unwrap(),
        mine
    );
    let mut forced = args.to_vec();
    forced.push("--force");
    let (code, out, err) = hearth(&home, &forced, &env).await;
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(
        std::fs::read_to_string(home.join("hearth.toml.bak")).unwrap(),
        mine
    );
    // No --model: the first model the server lists.
    let written = std::fs::read_to_string(home.join("hearth.toml")).unwrap();
    assert!(
        written.contains("default_model = \"compat/fake-model\""),
        "{written}"
    );
}

#[tokio::test]
async fn asked_it_offers_the_servers_models_and_a_channel_whose_token_doctor_needs() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let home = private_home(dir.path());
    let base = fake.base_url();
    let ollama = no_ollama();
    let mut cmd = command(&home);
    cmd.args([
        "init",
        "--ask",
        "--provider",
        "openai-compat",
        "--base-url",
        &base,
        "--key-env",
        "FAKE_KEY",
    ])
    .env("FAKE_KEY", "test-key")
    .env("HEARTH_OLLAMA_URL", &ollama)
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // The second model listed; Telegram, its token in TG_TOKEN (unset).
    stdin.write_all(b"2\ntelegram\nTG_TOKEN\n").await.unwrap();
    drop(stdin);
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.contains("1 fake-model") && text.contains("2 other-model"),
        "{text}"
    );
    let written = std::fs::read_to_string(home.join("hearth.toml")).unwrap();
    assert!(written.contains("compat/other-model"), "{written}");
    assert!(
        written.contains("[channels.telegram]") && written.contains("token_env = \"TG_TOKEN\""),
        "{written}"
    );
    // Serve would refuse without the token: doctor says so, and init exits 2.
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("FAIL  channel telegram"), "{text}");
}

#[tokio::test]
async fn a_local_ollama_is_found_and_its_models_listed() {
    let app = axum::Router::new()
        .route(
            "/api/tags",
            get(|| async { Json(json!({"models": [{"name": "llama3.2:latest"}]})) }),
        )
        .route(
            "/v1/models",
            get(|| async { Json(json!({"object": "list", "data": [{"id": "llama3.2:latest"}]})) }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let dir = tempfile::tempdir().unwrap();
    let home = private_home(dir.path());
    let (code, out, err) = hearth(&home, &["init", "--yes"], &[("HEARTH_OLLAMA_URL", &url)]).await;
    assert_eq!(code, 0, "{out}\n{err}");
    let written = std::fs::read_to_string(home.join("hearth.toml")).unwrap();
    assert!(
        written.contains(&format!("base_url = \"{url}/v1\"")),
        "{written}"
    );
    assert!(
        written.contains("default_model = \"ollama/llama3.2:latest\""),
        "{written}"
    );
    // A model the Ollama does not have: doctor's fix is to pull it, and
    // init exits with doctor's warning status.
    let (code, out, err) = hearth(
        &home,
        &[
            "init",
            "--yes",
            "--force",
            "--provider",
            "ollama",
            "--model",
            "qwen3",
        ],
        &[("HEARTH_OLLAMA_URL", &url)],
    )
    .await;
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(out.contains("WARN  model ollama/qwen3"), "{out}");
    assert!(out.contains("fix: ollama pull qwen3"), "{out}");
    // Nothing found and nothing said: what to pass.
    let dir = tempfile::tempdir().unwrap();
    let home = private_home(dir.path());
    let ollama = no_ollama();
    let (code, _, err) = hearth(&home, &["init", "--yes"], &[("HEARTH_OLLAMA_URL", &ollama)]).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("pass --provider"), "{err}");
}

#[tokio::test]
async fn the_commented_file_serve_seeds_is_replaced_without_force() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let home = private_home(dir.path());
    // What a first `hearth serve` leaves: the commented default file.
    std::fs::write(
        home.join("hearth.toml"),
        hearth_config::home::DEFAULT_CONFIG,
    )
    .unwrap();
    let base = fake.base_url();
    let ollama = no_ollama();
    let (code, out, err) = hearth(
        &home,
        &[
            "init",
            "--yes",
            "--provider",
            "openai-compat",
            "--base-url",
            &base,
            "--model",
            "fake-model",
            "--key-env",
            "FAKE_KEY",
        ],
        &[("FAKE_KEY", "test-key"), ("HEARTH_OLLAMA_URL", &ollama)],
    )
    .await;
    assert_eq!(code, 0, "{out}\n{err}");
    let written = std::fs::read_to_string(home.join("hearth.toml")).unwrap();
    assert!(written.contains("compat/fake-model"), "{written}");
    assert!(!home.join("hearth.toml.bak").exists());
}
