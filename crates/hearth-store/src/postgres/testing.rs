//! A fresh PostgreSQL database per test, on the server that
//! `HEARTH_TEST_POSTGRES_URL` names (the throw-away cluster `.ci/test`
//! starts). Without that variable a test is skipped with one line, except
//! under `CI=true`, where a missing server is a failure.

#![expect(
    clippy::expect_used,
    clippy::panic,
    reason = "test set-up: a server that cannot make a database fails the test"
)]

use tokio_postgres::NoTls;

use super::PostgresStore;

/// The variable that names the test server.
pub const TEST_URL_VAR: &str = "HEARTH_TEST_POSTGRES_URL";

/// The URL of the test server, `None` (with a note on stderr) when there is
/// none and this is not CI.
pub fn server_url() -> Option<String> {
    match std::env::var(TEST_URL_VAR) {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var("CI").is_ok_and(|v| v == "true") => panic!(
            "{TEST_URL_VAR} is not set under CI=true: PostgreSQL tests need the throw-away \
             cluster that .ci/test starts (Debian's postgresql package)"
        ),
        _ => {
            eprintln!("skipped: {TEST_URL_VAR} is not set (no PostgreSQL server for this test)");
            None
        }
    }
}

/// A new, empty database on the test server, and a URL that reaches it.
pub async fn fresh_database_url() -> Option<String> {
    let admin = server_url()?;
    let config: tokio_postgres::Config = admin.parse().expect("HEARTH_TEST_POSTGRES_URL parses");
    let (client, connection) = config
        .connect(NoTls)
        .await
        .expect("the PostgreSQL test server accepts a connection");
    let driver = tokio::spawn(connection);
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).expect("random bytes");
    let name = format!("hearth_t_{}", data_encoding::HEXLOWER.encode(&bytes));
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .expect("the test server creates a database");
    drop(client);
    let _ = driver.await;
    Some(with_dbname(&admin, &name))
}

/// Makes the database of `url` refuse new connections and ends its open
/// ones (`accepting = false`), or accept them again: a database lost and
/// back, without stopping the test server that other tests share.
pub async fn set_accepting(url: &str, accepting: bool) {
    let config: tokio_postgres::Config = url.parse().expect("the test URL parses");
    let name = config.get_dbname().expect("the test URL names a database");
    let admin = server_url().expect("the test server is set");
    let (client, connection) = admin
        .parse::<tokio_postgres::Config>()
        .expect("HEARTH_TEST_POSTGRES_URL parses")
        .connect(NoTls)
        .await
        .expect("the PostgreSQL test server accepts a connection");
    let driver = tokio::spawn(connection);
    client
        .batch_execute(&format!(
            "ALTER DATABASE {name} ALLOW_CONNECTIONS {accepting}"
        ))
        .await
        .expect("the test server changes the database");
    if !accepting {
        // With a timeout, each call returns once its server process is gone
        // (without, only once it was signalled: a connection the test uses
        // next could still be ended in the middle of its next statement).
        let ended: Vec<bool> = client
            .query(
                "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity \
                 WHERE datname = $1 AND pid <> pg_backend_pid()",
                &[&name],
            )
            .await
            .expect("the test server ends the database's connections")
            .iter()
            .map(|row| row.get(0))
            .collect();
        assert!(
            ended.iter().all(|&gone| gone),
            "a connection to {name} outlived 10 s of being told to end"
        );
    }
    drop(client);
    let _ = driver.await;
}

/// Makes the database of `url` refuse every insert into `table` whose
/// `column` holds "refuse me" (a trigger raising an error), so that a test
/// can have PostgreSQL refuse one write of a batch.
pub async fn refuse_inserts(url: &str, table: &str, column: &str) {
    let (client, connection) = url
        .parse::<tokio_postgres::Config>()
        .expect("the test URL parses")
        .connect(NoTls)
        .await
        .expect("the test database accepts a connection");
    let driver = tokio::spawn(connection);
    client
        .batch_execute(&format!(
            "CREATE FUNCTION refuse_{table}() RETURNS trigger LANGUAGE plpgsql AS $$ \
             BEGIN RAISE EXCEPTION 'refused by the test'; END $$; \
             CREATE TRIGGER refuse BEFORE INSERT ON {table} FOR EACH ROW \
             WHEN (NEW.{column} LIKE '%refuse me%') EXECUTE FUNCTION refuse_{table}();"
        ))
        .await
        .expect("the test database takes the trigger");
    drop(client);
    let _ = driver.await;
}

/// Applies the migrations up to `version` to the database at `url`, as a
/// hearth of that schema left it (for tests of a later migration).
pub async fn migrate_through(url: &str, version: u32) {
    let store = PostgresStore::connect_unmigrated(url, TEST_URL_VAR, 1)
        .await
        .expect("the test database opens");
    let mut client = store
        .client()
        .await
        .expect("a connection to the test database");
    super::migrations::apply_missing(&mut client, version)
        .await
        .expect("the migrations up to the version apply");
}

/// A fresh, migrated store on a new database of the test server.
pub async fn fresh_store() -> Option<(PostgresStore, ())> {
    let url = fresh_database_url().await?;
    let store = PostgresStore::connect(&url, TEST_URL_VAR, 4)
        .await
        .expect("a fresh PostgreSQL database opens and migrates");
    Some((store, ()))
}

/// `url` with its database replaced by `name` (URLs of the form
/// `postgres://user@host:port/db?params`).
pub fn with_dbname(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let authority_end = base[scheme_end..]
        .find('/')
        .map_or(base.len(), |i| scheme_end + i);
    let mut out = format!("{}/{name}", &base[..authority_end]);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::with_dbname;

    #[test]
    fn the_database_of_a_url_is_replaced_and_its_parameters_kept() {
        assert_eq!(
            with_dbname("postgres://u@127.0.0.1:5433/postgres", "x"),
            "postgres://u@127.0.0.1:5433/x"
        );
        assert_eq!(
            with_dbname("postgres://postgres@/postgres?host=/tmp/s&port=7", "x"),
            "postgres://postgres@/x?host=/tmp/s&port=7"
        );
        assert_eq!(with_dbname("postgres://u@h", "x"), "postgres://u@h/x");
    }
}
