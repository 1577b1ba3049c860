//! The database under the store: on SQLite, the embedded file (checked by
//! the `store` check that follows); on PostgreSQL, that it answers, that its
//! schema is one this hearth can use, that this machine's clock agrees with
//! the database's (leases are timed by it), and how many replicas are alive.
//!
//! Runs before the store is opened, on a connection that applies no
//! migration, so the version reported is the one found.

use std::collections::BTreeMap;
use std::path::Path;

use hearth_config::Config;

use super::{Report, Status};

/// A clock further from the database's than this is a warning: a replica
/// would renew or take leases late or early by that much.
const MAX_SKEW_MS: i64 = 2_000;

/// Checks the database `config` names.
pub async fn check(
    report: &mut Report,
    home: &Path,
    config: &Config,
    env: &BTreeMap<String, String>,
) {
    match config.store.backend {
        hearth_config::StoreBackend::Sqlite => report.ok(
            "database",
            format!(
                "embedded SQLite file {} (no database server; set [store] backend = \"postgres\" \
                 for several replicas)",
                home.join(hearth_runtime::builder::DB_FILE).display()
            ),
        ),
        hearth_config::StoreBackend::Postgres => postgres(report, config, env).await,
    }
}

#[cfg(not(feature = "postgres"))]
async fn postgres(report: &mut Report, _config: &Config, _env: &BTreeMap<String, String>) {
    report.bad(
        "database",
        Status::Fail,
        "[store] backend = \"postgres\", but this hearth was built without PostgreSQL support",
        Some("build it with `cargo build --release --features postgres`".into()),
    );
}

#[cfg(feature = "postgres")]
async fn postgres(report: &mut Report, config: &Config, env: &BTreeMap<String, String>) {
    use hearth_store::{ClusterStore, PostgresStore};

    let var = &config.store.url_env;
    let Some(url) = env.get(var).filter(|u| !u.is_empty()) else {
        report.bad(
            "database",
            Status::Fail,
            format!(
                "[store] backend = \"postgres\" reads the database URL from {var}, which is not set"
            ),
            Some(format!("export {var}=postgres://user@host:5432/db")),
        );
        return;
    };
    let connected = tokio::time::timeout(
        super::TIMEOUT,
        PostgresStore::connect_unmigrated(url, var, 1),
    )
    .await;
    let store = match connected {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            report.bad("database", Status::Fail, e.to_string(), None);
            return;
        }
        Err(_) => {
            report.bad(
                "database",
                Status::Fail,
                format!(
                    "PostgreSQL did not answer within {} s (the URL in {var})",
                    super::TIMEOUT.as_secs()
                ),
                Some("check that the server runs and the host and port in the URL".into()),
            );
            return;
        }
    };
    report.ok(
        "database",
        format!("PostgreSQL at {} answers", store.target()),
    );

    let applied = match store.schema_version().await {
        Ok((found, known)) => {
            let (status, message) = schema_status(found, known);
            report.push("database schema", status, message);
            found
        }
        Err(e) => {
            report.bad("database schema", Status::Fail, e.to_string(), None);
            return;
        }
    };

    let before = hearth_core::now_ms();
    match store.database_now().await {
        Ok(db) => {
            let after = hearth_core::now_ms();
            let (status, message) = skew_status(before + (after - before) / 2, db);
            let fix = (status != Status::Ok).then(|| {
                "synchronise this machine's clock (NTP: systemd-timesyncd or chrony), and the \
                 database server's"
                    .to_owned()
            });
            report.bad("database clock", status, message, fix);
        }
        Err(e) => report.bad("database clock", Status::Warn, e.to_string(), None),
    }

    if applied == 0 {
        report.ok("replicas", "none yet: the database has no hearth schema");
        return;
    }
    let now = hearth_core::now_ms();
    let lease_ms = i64::try_from(config.store.lease_secs)
        .unwrap_or(i64::MAX / 4_000)
        .saturating_mul(1_000);
    match store.replicas(now - 3 * lease_ms, now).await {
        Ok(alive) => {
            let ids: Vec<&str> = alive.iter().map(|r| r.id.as_str()).collect();
            report.ok(
                "replicas",
                if ids.is_empty() {
                    "none alive (no heartbeat within three leases)".to_owned()
                } else {
                    format!(
                        "{} alive (heartbeat within three leases): {}",
                        ids.len(),
                        ids.join(", ")
                    )
                },
            );
        }
        Err(e) => report.bad("replicas", Status::Warn, e.to_string(), None),
    }
}

/// How a schema version found compares with the one this build writes.
#[cfg_attr(
    all(not(feature = "postgres"), not(test)),
    expect(dead_code, reason = "PostgreSQL only")
)]
fn schema_status(found: u32, known: u32) -> (Status, String) {
    use std::cmp::Ordering;
    match found.cmp(&known) {
        Ordering::Equal => (
            Status::Ok,
            format!("migrations current (version {found}, as this hearth writes)"),
        ),
        Ordering::Less if found == 0 => (
            Status::Ok,
            format!("no hearth schema yet: `hearth serve` creates it (version {known}) at start"),
        ),
        Ordering::Less => (
            Status::Ok,
            format!(
                "version {found}, this hearth writes {known}: `hearth serve` applies the rest at \
                 start"
            ),
        ),
        Ordering::Greater => (
            Status::Fail,
            format!(
                "version {found} is newer than this hearth knows ({known}): upgrade hearth to the \
                 version the other replicas run"
            ),
        ),
    }
}

/// The clock check: this machine's time `local` against the database's
/// `db`, both unix milliseconds.
#[cfg_attr(
    all(not(feature = "postgres"), not(test)),
    expect(dead_code, reason = "PostgreSQL only")
)]
fn skew_status(local: i64, db: i64) -> (Status, String) {
    let skew = db - local;
    let secs = skew.abs() as f64 / 1000.0;
    let side = if skew > 0 { "behind" } else { "ahead of" };
    if skew.abs() > MAX_SKEW_MS {
        (
            Status::Warn,
            format!(
                "this machine's clock is {secs:.1} s {side} the database's (more than {} s): \
                 leases and heartbeats are timed by the database",
                MAX_SKEW_MS / 1000
            ),
        )
    } else {
        (
            Status::Ok,
            format!("this machine's clock is within {secs:.1} s of the database's"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clock_more_than_two_seconds_off_warns() {
        assert_eq!(skew_status(10_000, 11_900).0, Status::Ok);
        assert_eq!(skew_status(10_000, 7_999).0, Status::Warn);
        let (status, message) = skew_status(10_000, 13_500);
        assert_eq!(status, Status::Warn);
        assert!(message.contains("3.5 s behind"), "{message}");
    }

    #[test]
    fn a_schema_newer_than_this_build_fails_and_an_older_one_is_migrated_by_serve() {
        assert_eq!(schema_status(1, 1).0, Status::Ok);
        assert_eq!(schema_status(0, 1).0, Status::Ok);
        let (status, message) = schema_status(3, 1);
        assert_eq!(status, Status::Fail);
        assert!(message.contains("newer"), "{message}");
    }
}
