//! A fresh PostgreSQL database per test, on the server that
//! `HEARTH_TEST_POSTGRES_URL` names (the throw-away cluster `.ci/test`
//! starts). Without that variable a test is skipped with one line, except
//! under `CI=true`, where a missing server is a failure.
//!
//! A test does not drop its database: it may end by a panic, and what it
//! left is what one looks at when it failed. On a server that outlives the
//! tests (a developer's own), each new database is named with the time it
//! was made, and making one drops the test databases of earlier runs: those
//! made over [`STALE_AFTER_SECS`] ago that nobody is connected to.

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

/// How old a test database is before a later test run drops it: longer
/// than any run of the tests, so that a run never loses a database it uses.
pub const STALE_AFTER_SECS: u64 = 6 * 3600;

/// The prefix of every test database's name.
const PREFIX: &str = "hearth_t_";

/// A new, empty database on the test server, and a URL that reaches it.
/// Drops the stale test databases of earlier runs first.
pub async fn fresh_database_url() -> Option<String> {
    let admin = server_url()?;
    let config: tokio_postgres::Config = admin.parse().expect("HEARTH_TEST_POSTGRES_URL parses");
    let (client, connection) = config
        .connect(NoTls)
        .await
        .expect("the PostgreSQL test server accepts a connection");
    let driver = tokio::spawn(connection);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("the clock is after 1970")
        .as_secs();
    drop_stale(&client, now).await;
    let mut bytes = [0u8; 6];
    getrandom::fill(&mut bytes).expect("random bytes");
    let name = format!("{PREFIX}{now}_{}", data_encoding::HEXLOWER.encode(&bytes));
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .expect("the test server creates a database");
    drop(client);
    let _ = driver.await;
    Some(with_dbname(&admin, &name))
}

/// Drops the test databases [`is_stale`] at `now` that nobody is connected
/// to. Best effort: another test run may be dropping the same one, and a
/// database someone is connected to is kept (no `FORCE`).
async fn drop_stale(client: &tokio_postgres::Client, now: u64) {
    let Ok(rows) = client
        .query(
            "SELECT datname FROM pg_database d WHERE datname LIKE 'hearth\\_t\\_%' \
             AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.datname = d.datname)",
            &[],
        )
        .await
    else {
        return;
    };
    for row in rows {
        let name: String = row.get(0);
        if is_stale(&name, now) {
            let _ = client
                .batch_execute(&format!("DROP DATABASE IF EXISTS {name}"))
                .await;
        }
    }
}

/// Whether the test database `name` was made more than
/// [`STALE_AFTER_SECS`] before `now`: its name holds the second it was made
/// (`hearth_t_<secs>_<random>`). A name without one is from before test
/// databases were named so, hence stale; a name that is not a test
/// database's never is.
pub fn is_stale(name: &str, now: u64) -> bool {
    let Some(rest) = name.strip_prefix(PREFIX) else {
        return false;
    };
    match rest.split_once('_') {
        Some((secs, _)) => match secs.parse::<u64>() {
            Ok(made) => now.saturating_sub(made) > STALE_AFTER_SECS,
            Err(_) => false,
        },
        None => rest.len() == 16 && rest.bytes().all(|b| b.is_ascii_hexdigit()),
    }
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

/// A plain connection to the database `store` writes to, for a test that
/// looks at it or changes it behind the store's back.
pub async fn sql_client(store: &PostgresStore) -> tokio_postgres::Client {
    let url = server_url().expect("a store of the test server was made, so it is set");
    let db = store.target().rsplit('/').next().unwrap_or_default();
    let (client, connection) = with_dbname(&url, db)
        .parse::<tokio_postgres::Config>()
        .expect("the test URL parses")
        .connect(NoTls)
        .await
        .expect("the test database accepts a connection");
    tokio::spawn(connection);
    client
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
    use super::{STALE_AFTER_SECS, is_stale, with_dbname};

    #[test]
    fn a_test_database_is_stale_only_once_it_is_older_than_any_test_run() {
        let now = 1_800_000_000;
        let made = |secs: u64| format!("hearth_t_{secs}_0123456789ab");
        assert!(!is_stale(&made(now), now));
        assert!(!is_stale(&made(now - STALE_AFTER_SECS), now));
        assert!(is_stale(&made(now - STALE_AFTER_SECS - 1), now));
        // Made by a machine whose clock is ahead: kept until it is old here.
        assert!(!is_stale(&made(now + 60), now));
        // Named before names held the time: from an earlier run.
        assert!(is_stale("hearth_t_00c1d2e3f4a5b6c7", now));
        // Not a test database of this module's.
        assert!(!is_stale("hearth", now));
        assert!(!is_stale("hearth_t_notes", now));
        assert!(!is_stale("hearth_t_x_0123", now));
        assert!(!is_stale("hearth_load_123_0", now));
    }

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
