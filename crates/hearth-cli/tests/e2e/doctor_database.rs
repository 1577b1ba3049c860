//! `hearth doctor`'s database checks: the embedded file on SQLite; on
//! PostgreSQL, reachable (named by host:port/db, never the password), the
//! schema version against this build's, the clock against the database's,
//! and the replicas alive.

use std::path::Path;

use hearth_testkit::FakeOpenAi;
use serde_json::Value;

use crate::harness::{Hearth, command, fake_config};

/// A private home holding `config`.
fn home_with(dir: &Path, config: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(home.join("hearth.toml"), config).unwrap();
    home
}

/// `hearth doctor --json`: its exit code and checks.
async fn doctor_json(home: &Path, env: &[(&str, &str)]) -> (i32, Vec<Value>) {
    let mut cmd = command(home);
    cmd.args(["doctor", "--json"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().await.unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{e}: {text}\n{}", String::from_utf8_lossy(&out.stderr)));
    (
        out.status.code().unwrap_or(-1),
        v["checks"].as_array().unwrap().clone(),
    )
}

fn check<'a>(checks: &'a [Value], name: &str) -> &'a Value {
    checks
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name:?} in {checks:#?}"))
}

fn postgres_config(base_url: &str) -> String {
    format!(
        "{}[store]\nbackend = \"postgres\"\nlease_secs = 2\n",
        fake_config(base_url)
    )
}

async fn database() -> Option<String> {
    if !cfg!(feature = "postgres") {
        eprintln!("skipped: hearth was built without the postgres feature");
        return None;
    }
    hearth_store::postgres::testing::fresh_database_url().await
}

#[tokio::test]
async fn on_sqlite_the_database_is_the_embedded_file() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let home = home_with(dir.path(), &fake_config(&fake.base_url()));
    let (code, checks) = doctor_json(&home, &[]).await;
    assert_eq!(code, 0, "{checks:#?}");
    let db = check(&checks, "database");
    assert_eq!(db["status"], "ok");
    assert!(
        db["message"]
            .as_str()
            .unwrap()
            .contains("embedded SQLite file"),
        "{db}"
    );
    assert_eq!(check(&checks, "store")["status"], "ok");
}

#[tokio::test]
async fn on_postgres_doctor_checks_the_schema_the_clock_and_the_replicas() {
    let Some(url) = database().await else { return };
    let fake = FakeOpenAi::start().await;
    let config = postgres_config(&fake.base_url());
    let env = [("HEARTH_DATABASE_URL", url.as_str())];
    let dir = tempfile::tempdir().unwrap();
    let home = home_with(dir.path(), &config);
    let db_name = url.split('?').next().unwrap().rsplit('/').next().unwrap();

    // A fresh database: reachable, no schema yet, no replica.
    let (code, checks) = doctor_json(&home, &env).await;
    assert_eq!(code, 0, "{checks:#?}");
    let db = check(&checks, "database");
    assert_eq!(db["status"], "ok", "{db}");
    assert!(
        db["message"]
            .as_str()
            .unwrap()
            .contains(&format!("/{db_name}")),
        "{db}"
    );
    let schema = check(&checks, "database schema");
    assert!(
        schema["message"]
            .as_str()
            .unwrap()
            .contains("no hearth schema yet"),
        "{schema}"
    );
    assert_eq!(check(&checks, "database clock")["status"], "ok");
    assert_eq!(check(&checks, "replicas")["status"], "ok");

    // A replica running: current migrations, one replica alive, named.
    let other = tempfile::tempdir().unwrap();
    let h = Hearth::start_with(other.path(), Some(&config), &env).await;
    let (_, ready) = h.get("/readyz").await;
    let replica = ready["replica"].as_str().unwrap().to_owned();
    let (code, checks) = doctor_json(&home, &env).await;
    assert_eq!(code, 0, "{checks:#?}");
    let schema = check(&checks, "database schema");
    assert_eq!(schema["status"], "ok", "{schema}");
    assert!(
        schema["message"]
            .as_str()
            .unwrap()
            .contains("migrations current"),
        "{schema}"
    );
    let replicas = check(&checks, "replicas")["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        replicas.starts_with("1 alive") || replicas.starts_with("2 alive"),
        "{replicas}"
    );
    assert!(replicas.contains(&replica), "{replicas}");
    h.terminate().await;

    // A schema from a newer hearth: doctor fails as serve would.
    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
        .execute(
            "INSERT INTO hearth_schema_migrations (version, applied_at) VALUES (999, 0)",
            &[],
        )
        .await
        .unwrap();
    let (code, checks) = doctor_json(&home, &env).await;
    assert_eq!(code, 2, "{checks:#?}");
    let schema = check(&checks, "database schema");
    assert_eq!(schema["status"], "fail", "{schema}");
    assert!(
        schema["message"].as_str().unwrap().contains("newer"),
        "{schema}"
    );
}

#[tokio::test]
async fn an_unreachable_database_fails_by_host_port_and_name_only() {
    if !cfg!(feature = "postgres") {
        eprintln!("skipped: hearth was built without the postgres feature");
        return;
    }
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let home = home_with(dir.path(), &postgres_config(&fake.base_url()));
    let url = "postgres://hearth:s3cretpw@127.0.0.1:1/nowhere";
    let (code, checks) = doctor_json(&home, &[("HEARTH_DATABASE_URL", url)]).await;
    assert_eq!(code, 2, "{checks:#?}");
    let db = check(&checks, "database");
    assert_eq!(db["status"], "fail", "{db}");
    let message = db["message"].as_str().unwrap();
    assert!(message.contains("127.0.0.1:1/nowhere"), "{message}");
    assert!(!serde_json::to_string(&checks).unwrap().contains("s3cretpw"));
}
