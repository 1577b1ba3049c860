//! TLS to PostgreSQL: `sslmode=require` in the URL encrypts the connection
//! and verifies the server against the trust store (here a CA `.ci/test`
//! made, named by `SSL_CERT_FILE`); an untrusted server is refused, naming
//! the database but never the URL; without `sslmode=require` the connection
//! stays plain. The throw-away cluster listens with TLS on 127.0.0.1.

use crate::harness::{Hearth, command, fake_config};
use hearth_testkit::FakeOpenAi;

/// The TLS listener of the test cluster: its port and its CA's PEM file.
fn tls_listener() -> Option<(String, String)> {
    if !cfg!(feature = "postgres") {
        eprintln!("skipped: hearth was built without the postgres feature");
        return None;
    }
    match (
        std::env::var("HEARTH_TEST_POSTGRES_TLS_PORT"),
        std::env::var("HEARTH_TEST_POSTGRES_TLS_CA"),
    ) {
        (Ok(port), Ok(ca)) => Some((port, ca)),
        _ if std::env::var("CI").is_ok_and(|v| v == "true") => panic!(
            "HEARTH_TEST_POSTGRES_TLS_PORT/_CA are not set under CI=true: .ci/test makes a TLS \
             listener with openssl"
        ),
        _ => {
            eprintln!("skipped: no PostgreSQL TLS listener (HEARTH_TEST_POSTGRES_TLS_PORT)");
            None
        }
    }
}

/// A fresh database, reached over TCP at `localhost` with `sslmode`.
async fn database_over_tcp(port: &str, sslmode: &str) -> Option<(String, String)> {
    let url = hearth_store::postgres::testing::fresh_database_url().await?;
    let name = url
        .split('?')
        .next()
        .and_then(|base| base.rsplit('/').next())
        .unwrap()
        .to_owned();
    Some((
        format!("postgres://postgres@localhost:{port}/{name}?sslmode={sslmode}"),
        name,
    ))
}

/// Whether the server sees `database`'s connections encrypted: `Some(true)`
/// when every one is, `Some(false)` when none is.
async fn encrypted(database: &str) -> Option<bool> {
    let admin = hearth_store::postgres::testing::server_url().unwrap();
    let (client, conn) = tokio_postgres::connect(&admin, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let row = client
        .query_one(
            "SELECT bool_and(s.ssl), bool_or(s.ssl) FROM pg_stat_activity a \
             JOIN pg_stat_ssl s USING (pid) WHERE a.datname = $1",
            &[&database],
        )
        .await
        .unwrap();
    let (all, any): (Option<bool>, Option<bool>) = (row.get(0), row.get(1));
    match (all, any) {
        (Some(true), _) => Some(true),
        (_, Some(false)) => Some(false),
        _ => None,
    }
}

fn config(base_url: &str) -> String {
    format!("{}[store]\nbackend = \"postgres\"\n", fake_config(base_url))
}

#[tokio::test]
async fn sslmode_require_encrypts_and_verifies_the_server() {
    let Some((port, ca)) = tls_listener() else {
        return;
    };
    let Some((url, name)) = database_over_tcp(&port, "require").await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("HEARTH_DATABASE_URL", url.as_str()),
        ("SSL_CERT_FILE", ca.as_str()),
    ];
    let h = Hearth::start_with(dir.path(), Some(&config(&fake.base_url())), &env).await;
    let answer = h.ask("api:tls", "hello").await;
    assert_eq!(answer["output"]["text"], "echo: hello", "{answer}");
    assert_eq!(
        encrypted(&name).await,
        Some(true),
        "every connection of the replica is TLS"
    );
    h.kill().await;

    // The system's own trust store does not know the test CA: refused, and
    // the message names the database, never the URL.
    let out = command(dir.path())
        .args(["serve", "--bind", "127.0.0.1:0"])
        .env("HEARTH_DATABASE_URL", &url)
        .output()
        .await
        .unwrap();
    assert!(!out.status.success(), "an unverified server is refused");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("localhost:{port}/{name}")), "{err}");
    assert!(
        !err.contains("postgres://"),
        "the URL is never printed: {err}"
    );
    assert!(
        err.to_lowercase().contains("certificate") || err.contains("UnknownIssuer"),
        "says why: {err}"
    );
}

#[tokio::test]
async fn without_sslmode_require_the_connection_stays_plain() {
    let Some((port, _ca)) = tls_listener() else {
        return;
    };
    let Some((url, name)) = database_over_tcp(&port, "prefer").await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    // No CA: a server certificate nobody vouches for does not stop it.
    let env = [("HEARTH_DATABASE_URL", url.as_str())];
    let h = Hearth::start_with(dir.path(), Some(&config(&fake.base_url())), &env).await;
    let answer = h.ask("api:plain", "hello").await;
    assert_eq!(answer["output"]["text"], "echo: hello", "{answer}");
    assert_eq!(encrypted(&name).await, Some(false));
    h.kill().await;
}
