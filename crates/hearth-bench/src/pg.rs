//! `hearth-load --backend postgres`: the same levels on PostgreSQL, one
//! replica and then several on one database, and the queries an idle
//! replica sends.

#[cfg(not(feature = "postgres"))]
pub(crate) async fn compare(
    _args: &crate::Args,
    _var: &str,
    _tmp: &std::path::Path,
    _fake_url: &str,
    _fake_p50: u64,
    _sqlite: &[crate::Level],
) -> anyhow::Result<()> {
    anyhow::bail!(
        "--backend postgres needs hearth-load built with PostgreSQL: \
         cargo build --release -p hearth-bench --features postgres"
    )
}

/// The SQLite server already started, loaded in turn with the PostgreSQL
/// ones under `--interleave`.
#[cfg_attr(
    not(feature = "postgres"),
    expect(dead_code, reason = "read only by the postgres comparison")
)]
pub(crate) struct Sqlite {
    /// Its base URL.
    pub(crate) url: String,
    /// Its process.
    pub(crate) pid: u32,
}

#[cfg(not(feature = "postgres"))]
pub(crate) async fn compare_interleaved(
    _args: &crate::Args,
    _var: &str,
    _tmp: &std::path::Path,
    _fake_url: &str,
    _fake_p50: u64,
    _sqlite: &Sqlite,
) -> anyhow::Result<()> {
    anyhow::bail!(
        "--backend postgres needs hearth-load built with PostgreSQL: \
         cargo build --release -p hearth-bench --features postgres"
    )
}

#[cfg(feature = "postgres")]
pub(crate) use with_postgres::{compare, compare_interleaved};

#[cfg(feature = "postgres")]
mod with_postgres {
    use std::path::Path;
    use std::time::{Duration, Instant};

    use anyhow::{Context, Result, bail};
    use hearth_store::postgres::testing::with_dbname;
    use tokio_postgres::NoTls;

    use crate::{Args, Backend, Level, drive, pct, proc_status_kb, report, start_hearth};

    /// A connection to the server's maintenance database, for creating the
    /// bench's databases and reading their statistics.
    struct Admin {
        client: tokio_postgres::Client,
        url: String,
        made: Vec<String>,
    }

    impl Admin {
        /// The admin connection to the server whose URL the variable `var` holds.
        async fn from_var(var: &str) -> Result<Self> {
            let url = std::env::var(var)
                .with_context(|| format!("--backend postgres reads the server's URL from {var}"))?;
            Self::connect(&url).await
        }

        async fn connect(url: &str) -> Result<Self> {
            let config: tokio_postgres::Config = url
                .parse()
                .context("the --url-env variable does not hold a PostgreSQL URL")?;
            let (client, connection) = config
                .connect(NoTls)
                .await
                .context("connecting to the PostgreSQL server named by --url-env")?;
            tokio::spawn(connection);
            Ok(Self {
                client,
                url: url.to_owned(),
                made: Vec::new(),
            })
        }

        /// A new empty database and the URL that reaches it.
        async fn fresh(&mut self) -> Result<(String, String)> {
            let name = format!("hearth_load_{}_{}", std::process::id(), self.made.len());
            self.client
                .batch_execute(&format!("CREATE DATABASE {name}"))
                .await
                .with_context(|| format!("creating database {name} (the role needs CREATEDB)"))?;
            self.made.push(name.clone());
            Ok((with_dbname(&self.url, &name), name))
        }

        /// Transactions the database has counted (committed or rolled
        /// back): each statement a replica sends outside a transaction is one.
        async fn transactions(&self, db: &str) -> Result<i64> {
            let row = self
                .client
                .query_one(
                    "SELECT (xact_commit + xact_rollback)::BIGINT FROM pg_stat_database \
                     WHERE datname = $1",
                    &[&db],
                )
                .await?;
            Ok(row.get(0))
        }

        /// Drops the databases this run made (the servers are gone by then).
        async fn drop_all(&self) {
            for name in &self.made {
                let _ = self
                    .client
                    .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .await;
            }
        }
    }

    /// Measures PostgreSQL against the SQLite `levels` just measured.
    pub(crate) async fn compare(
        args: &Args,
        var: &str,
        tmp: &Path,
        fake_url: &str,
        fake_p50: u64,
        sqlite: &[Level],
    ) -> Result<()> {
        let mut admin = Admin::from_var(var).await?;
        let outcome = measure(args, &mut admin, tmp, fake_url, fake_p50, sqlite).await;
        admin.drop_all().await;
        outcome
    }

    async fn measure(
        args: &Args,
        admin: &mut Admin,
        tmp: &Path,
        fake_url: &str,
        fake_p50: u64,
        sqlite: &[Level],
    ) -> Result<()> {
        let (url, db) = admin.fresh().await?;
        let backend = Backend::Postgres(url, args.pool_size);
        let one = start_hearth(
            &args.bin_dir,
            &tmp.join("pg-one"),
            fake_url,
            false,
            None,
            &args.extra_toml,
            &backend,
        )
        .await?;
        println!(
            "\n## PostgreSQL\n\nstart to /readyz 200 on an empty database (migrations included): {:.1} ms",
            one.startup.as_secs_f64() * 1000.0
        );
        let pid = one.proc.0.id();
        // Let the start-up's own writes settle before counting.
        tokio::time::sleep(Duration::from_secs(2)).await;
        println!(
            "idle RSS after start (postgres): {:.1} MB",
            proc_status_kb(pid, "VmRSS:") as f64 / 1024.0
        );
        let before = admin.transactions(&db).await?;
        let t0 = Instant::now();
        tokio::time::sleep(Duration::from_secs(args.idle_secs)).await;
        // The server publishes a backend's counts when it goes idle, at most
        // once a second; the wait below lets the last ones arrive.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let after = admin.transactions(&db).await?;
        let idle = t0.elapsed().as_secs_f64();
        println!(
            "idle replica: {} transactions in {:.1} s = {:.2} per second (pg_stat_database: an upper bound, it also counts the server's own autovacuum work on the fresh database; the server log with log_statement = 'all' counts the replica's alone)",
            after - before,
            idle,
            (after - before) as f64 / idle
        );

        let urls = std::slice::from_ref(&one.url);
        let mut levels = Vec::new();
        for &c in &args.concurrency {
            levels.push(
                drive(
                    urls,
                    &[pid],
                    c,
                    args.secs,
                    &format!("p{c}"),
                    args.messages(),
                )
                .await?,
            );
        }
        report("postgres, one replica", fake_p50, &levels, &[pid]);
        ratios(sqlite, &levels, fake_p50);
        drop(one);

        if args.replicas > 1 {
            let (url, _db) = admin.fresh().await?;
            let backend = Backend::Postgres(url, args.group_pool_size);
            let mut servers = Vec::new();
            for i in 0..args.replicas {
                servers.push(
                    start_hearth(
                        &args.bin_dir,
                        &tmp.join(format!("pg-replica{i}")),
                        fake_url,
                        false,
                        None,
                        &args.extra_toml,
                        &backend,
                    )
                    .await?,
                );
            }
            let urls: Vec<String> = servers.iter().map(|s| s.url.clone()).collect();
            let pids: Vec<u32> = servers.iter().map(|s| s.proc.0.id()).collect();
            let mut many = Vec::new();
            for &c in &args.concurrency {
                many.push(
                    drive(
                        &urls,
                        &pids,
                        c,
                        args.secs,
                        &format!("r{c}"),
                        args.messages(),
                    )
                    .await?,
                );
            }
            let n = args.replicas;
            report(
                &format!("postgres, {n} replicas round-robin"),
                fake_p50,
                &many,
                &pids,
            );
            group_ratios(n, &levels, &many);
            if many.iter().any(|l| l.errors > 0) {
                bail!("errors under several replicas: see the table above");
            }
        }
        Ok(())
    }

    /// `--interleave`: the SQLite server, one PostgreSQL replica and (with
    /// `--replicas N`) N replicas on another database, all started first;
    /// then each level runs on them in the order SQLite, one, the group,
    /// the group, one, SQLite, half of `--secs` each, so that every server
    /// is loaded at the same minutes of the run.
    pub(crate) async fn compare_interleaved(
        args: &Args,
        var: &str,
        tmp: &Path,
        fake_url: &str,
        fake_p50: u64,
        sqlite: &super::Sqlite,
    ) -> Result<()> {
        let mut admin = Admin::from_var(var).await?;
        let outcome = interleaved(args, &mut admin, tmp, fake_url, fake_p50, sqlite).await;
        admin.drop_all().await;
        outcome
    }

    async fn interleaved(
        args: &Args,
        admin: &mut Admin,
        tmp: &Path,
        fake_url: &str,
        fake_p50: u64,
        sqlite: &super::Sqlite,
    ) -> Result<()> {
        let start = |dir: String, url: String, pool: Option<u32>| {
            let backend = Backend::Postgres(url, pool);
            async move {
                start_hearth(
                    &args.bin_dir,
                    &tmp.join(dir),
                    fake_url,
                    false,
                    None,
                    &args.extra_toml,
                    &backend,
                )
                .await
            }
        };
        let (url, _db) = admin.fresh().await?;
        let one = start("pg-one".into(), url, args.pool_size).await?;
        let mut group = Vec::new();
        if args.replicas > 1 {
            let (url, _db) = admin.fresh().await?;
            for i in 0..args.replicas {
                group.push(
                    start(format!("pg-replica{i}"), url.clone(), args.group_pool_size).await?,
                );
            }
        }
        let one_urls = std::slice::from_ref(&one.url);
        let one_pid = [one.proc.0.id()];
        let group_urls: Vec<String> = group.iter().map(|s| s.url.clone()).collect();
        let group_pids: Vec<u32> = group.iter().map(|s| s.proc.0.id()).collect();
        let sqlite_urls = std::slice::from_ref(&sqlite.url);
        let half = (args.secs / 2).max(1);
        let (mut lite, mut pg, mut many) = (Vec::new(), Vec::new(), Vec::new());
        for &c in &args.concurrency {
            let msg = args.messages();
            let s1 = drive(sqlite_urls, &[sqlite.pid], c, half, &format!("n{c}a"), msg).await?;
            let p1 = drive(one_urls, &one_pid, c, half, &format!("p{c}a"), msg).await?;
            let m = if group.is_empty() {
                None
            } else {
                let m1 = drive(&group_urls, &group_pids, c, half, &format!("r{c}a"), msg).await?;
                let m2 = drive(&group_urls, &group_pids, c, half, &format!("r{c}b"), msg).await?;
                Some(m1.merge(m2))
            };
            let p2 = drive(one_urls, &one_pid, c, half, &format!("p{c}b"), msg).await?;
            let s2 = drive(sqlite_urls, &[sqlite.pid], c, half, &format!("n{c}b"), msg).await?;
            lite.push(s1.merge(s2));
            pg.push(p1.merge(p2));
            many.extend(m);
        }
        println!(
            "\n## Interleaved (SQLite, PostgreSQL, the group, the group, PostgreSQL, SQLite per level)"
        );
        report("normal", fake_p50, &lite, &[sqlite.pid]);
        report("postgres, one replica", fake_p50, &pg, &one_pid);
        ratios(&lite, &pg, fake_p50);
        if !many.is_empty() {
            let n = args.replicas;
            report(
                &format!("postgres, {n} replicas round-robin"),
                fake_p50,
                &many,
                &group_pids,
            );
            group_ratios(n, &pg, &many);
        }
        if pg.iter().chain(&many).any(|l| l.errors > 0) {
            bail!("errors on PostgreSQL: see the tables above");
        }
        Ok(())
    }

    /// PostgreSQL against SQLite, level by level.
    fn ratios(sqlite: &[Level], pg: &[Level], fake_p50: u64) {
        println!(
            "\n| concurrency | SQLite runs/s | PostgreSQL runs/s | PostgreSQL / SQLite | overhead p50 SQLite | overhead p50 PostgreSQL |"
        );
        println!("| ---: | ---: | ---: | ---: | ---: | ---: |");
        for (s, p) in sqlite.iter().zip(pg) {
            let (sr, pr) = (rate(s), rate(p));
            println!(
                "| {} | {:.0} | {:.0} | {:.2} | {:.2} ms | {:.2} ms |",
                s.concurrency,
                sr,
                pr,
                if sr > 0.0 { pr / sr } else { 0.0 },
                overhead_ms(s, fake_p50),
                overhead_ms(p, fake_p50),
            );
        }
    }

    /// N replicas against one, level by level.
    fn group_ratios(n: usize, one: &[Level], many: &[Level]) {
        println!("\n| concurrency | one replica runs/s | {n} replicas runs/s | ratio |");
        println!("| ---: | ---: | ---: | ---: |");
        for (o, m) in one.iter().zip(many) {
            let (or, mr) = (rate(o), rate(m));
            println!(
                "| {} | {:.0} | {:.0} | {:.2} |",
                o.concurrency,
                or,
                mr,
                if or > 0.0 { mr / or } else { 0.0 }
            );
        }
    }

    fn rate(l: &Level) -> f64 {
        if l.secs > 0.0 {
            l.runs as f64 / l.secs
        } else {
            0.0
        }
    }

    fn overhead_ms(l: &Level, fake_p50: u64) -> f64 {
        pct(&l.lat_us, 0.5).saturating_sub(fake_p50) as f64 / 1000.0
    }
}
