//! `hearth store copy-to-postgres`: moves a home's SQLite database into an
//! empty PostgreSQL database, for a home that outgrows one machine.
//!
//! Works on the home directly, with the home lock held (no server may write
//! the SQLite file while it is read). The URL is read from the environment
//! only and never printed: messages show `host:port/database`.

use crate::Exit;
use crate::cli::{Global, StoreCommand};

/// Runs a store command.
pub async fn run(g: &Global, command: StoreCommand) -> Result<(), Exit> {
    match command {
        StoreCommand::CopyToPostgres { url_env } => copy_to_postgres(g, url_env).await,
    }
}

#[cfg(not(feature = "postgres"))]
async fn copy_to_postgres(_g: &Global, _url_env: Option<String>) -> Result<(), Exit> {
    Err(Exit::config(anyhow::anyhow!(
        "this hearth was built without PostgreSQL support; build it with `cargo build \
         --release --features postgres` to copy a home into PostgreSQL"
    )))
}

#[cfg(feature = "postgres")]
async fn copy_to_postgres(g: &Global, url_env: Option<String>) -> Result<(), Exit> {
    use std::io::IsTerminal;

    use hearth_store::PostgresStore;
    use hearth_store::postgres::copy::{self, CopyError};

    let home = crate::serve::home_dir(g)?;
    let sqlite = home.join(hearth_runtime::builder::DB_FILE);
    if !sqlite.is_file() {
        return Err(Exit::config(anyhow::anyhow!(
            "there is no SQLite database at {}: give the home that holds it with --home or \
             HEARTH_HOME",
            sqlite.display()
        )));
    }
    // Held to the end: a server started meanwhile would write the file
    // being copied.
    let _lock = crate::home_lock::lock(&home).map_err(|e| {
        anyhow::anyhow!("{e}; the copy reads the SQLite database of a stopped hearth")
    })?;
    let var = match url_env {
        Some(v) => v,
        None => crate::serve::load_config(g, &home)?.store.url_env,
    };
    let url = std::env::var(&var)
        .ok()
        .filter(|u| !u.is_empty())
        .ok_or_else(|| {
            Exit::config(anyhow::anyhow!(
                "the PostgreSQL URL goes in the environment variable {var}, which is not set: \
                 export {var}=postgres://user@host:5432/db (or name another variable with \
                 --url-env)"
            ))
        })?;
    let target = PostgresStore::connect(&url, &var, 2)
        .await
        .map_err(anyhow::Error::new)?;
    eprintln!(
        "copying {} into PostgreSQL at {}",
        sqlite.display(),
        target.target()
    );

    let live = std::io::stderr().is_terminal();
    let json = g.json;
    let mut progress = |e: copy::CopyEvent<'_>| match e {
        copy::CopyEvent::Progress { table, done, rows } if live => {
            eprint!("\r\x1b[2K{table}: {done}/{rows} rows");
        }
        copy::CopyEvent::Finished { table, rows } => {
            if live {
                eprint!("\r\x1b[2K");
            }
            if !json {
                println!("{table}: {rows} rows");
            }
        }
        _ => {}
    };
    let report = match copy::copy_from_sqlite(&sqlite, &target, &mut progress).await {
        Ok(r) => r,
        Err(e @ CopyError::NotEmpty { .. }) => return Err(Exit::config(e)),
        Err(e) => return Err(anyhow::Error::new(e).into()),
    };
    if !json && !report.postgres_only.is_empty() {
        eprintln!(
            "left empty (PostgreSQL only): {}",
            report.postgres_only.join(", ")
        );
    }

    eprintln!("comparing the two databases table by table");
    let checks = copy::compare_with_sqlite(&sqlite, &target)
        .await
        .map_err(anyhow::Error::new)?;
    let differ: Vec<_> = checks.iter().filter(|c| !c.matches()).collect();
    if json {
        let tables: Vec<_> = checks
            .iter()
            .map(|c| {
                serde_json::json!({
                    "table": c.table,
                    "rows": c.postgres.rows,
                    "sqlite_rows": c.sqlite.rows,
                    "checksum": c.postgres.checksum,
                    "sqlite_checksum": c.sqlite.checksum,
                    "matches": c.matches(),
                })
            })
            .collect();
        crate::output::print_json(&serde_json::json!({
            "target": target.target(),
            "tables": tables,
            "matches": differ.is_empty(),
        }));
    } else {
        for c in &differ {
            println!(
                "{}: DIFFERS: SQLite {} rows (checksum {}), PostgreSQL {} rows (checksum {})",
                c.table, c.sqlite.rows, c.sqlite.checksum, c.postgres.rows, c.postgres.checksum
            );
        }
    }
    if !differ.is_empty() {
        return Err(anyhow::anyhow!(
            "{} of {} tables differ after the copy; do not start hearth on {} yet: drop its \
             tables, then copy again",
            differ.len(),
            checks.len(),
            target.target()
        )
        .into());
    }
    if !json {
        println!(
            "copied and checked {} tables into {}: row counts and checksums match; set [store] \
             backend = \"postgres\" and start hearth",
            checks.len(),
            target.target()
        );
    }
    Ok(())
}
