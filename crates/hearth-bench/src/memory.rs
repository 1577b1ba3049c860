//! `hearth-memory-bench`: how long `GET /v1/memory/search` takes by meaning
//! over one user's 100k facts, through the whole gateway.
//!
//! Fills a fresh store (the home's SQLite file, or with `--backend postgres`
//! a fresh database on the server the variable `--url-env` names) with
//! `--facts` user-wide facts of one user, each with a `--dim`-dimensional
//! embedding, in-process before the server starts. Then starts `hearth
//! serve` with `[memory] embeddings` on the testkit's fake provider (run
//! in this process, zero latency; its vectors are derived from the text, so
//! the same text always gets the same vector) and sends `--queries`
//! searches one after the other in `vector` and then `hybrid` mode,
//! reporting p50, p95 and p99. Each search includes the embedding call for
//! the query (to the fake, on 127.0.0.1), the read of every vector of the
//! user, the brute-force cosine ranking and the HTTP round trip.
//!
//! `HEARTH_BENCH_KEEP=1` keeps the temp home (to inspect its database).
//!
//! Usage: hearth-memory-bench [--bin-dir target/release] [--facts 100000]
//!        [--dim 384] [--queries 200] [--backend sqlite|postgres] [--url-env VAR]
//!        [--store-only] [--database NAME] [--vector-cache-mb N]
//!
//! `--store-only` times the store alone (no server is started), and then
//! again with a new fact saved and embedded before each search.
//!
//! `--database NAME` (PostgreSQL only) uses the database `NAME` on that
//! server and keeps it: made and filled when it does not exist, searched
//! as it is when it does (filling 10^5 facts takes half a minute, so runs
//! compared one after the other can share one fill). Drop it afterwards.
//! `--vector-cache-mb N` bounds the store-only searches' copy of the
//! user's vectors on PostgreSQL as `[memory] vector_cache_mb` does (0:
//! every search reads them from the database).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use hearth_store::{Durability, NewMemory, SqliteStore, Store};
use hearth_testkit::FakeOpenAi;

const USER: &str = "bench:user:1";
const MODEL: &str = "fake/embed-model";

struct Args {
    bin_dir: PathBuf,
    facts: usize,
    dim: usize,
    queries: usize,
    /// `Some(variable)` for PostgreSQL.
    postgres: Option<String>,
    /// Time the store alone, without starting a server.
    store_only: bool,
    /// A PostgreSQL database kept between runs (filled once).
    database: Option<String>,
    /// `[memory] vector_cache_mb` for the store-only searches on PostgreSQL.
    vector_cache_mb: Option<usize>,
}

fn parse_args() -> Result<Args> {
    let mut a = Args {
        bin_dir: PathBuf::from("target/release"),
        facts: 100_000,
        dim: 384,
        queries: 200,
        postgres: None,
        store_only: false,
        database: None,
        vector_cache_mb: None,
    };
    let mut backend = "sqlite".to_owned();
    let mut url_env = "HEARTH_DATABASE_URL".to_owned();
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--bin-dir" => a.bin_dir = PathBuf::from(val()?),
            "--facts" => a.facts = val()?.parse()?,
            "--dim" => a.dim = val()?.parse()?,
            "--queries" => a.queries = val()?.parse()?,
            "--backend" => backend = val()?,
            "--url-env" => url_env = val()?,
            "--store-only" => a.store_only = true,
            "--database" => a.database = Some(val()?),
            "--vector-cache-mb" => a.vector_cache_mb = Some(val()?.parse()?),
            other => {
                bail!("unknown argument {other}; see the doc at the top of hearth-memory-bench")
            }
        }
    }
    match backend.as_str() {
        "sqlite" => {}
        "postgres" => a.postgres = Some(url_env),
        other => bail!("--backend {other}: use sqlite or postgres"),
    }
    if let Some(name) = &a.database {
        if a.postgres.is_none() {
            bail!("--database needs --backend postgres");
        }
        // It goes into CREATE DATABASE as written.
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        {
            bail!("--database {name}: use lower-case letters, digits and _ only");
        }
    }
    if a.dim == 0 || a.queries == 0 {
        bail!("--dim and --queries must be at least 1");
    }
    Ok(a)
}

/// A vector derived from the text alone (FNV-1a seeding xorshift), so a
/// fact's stored vector and the fake's answer for the same text agree.
fn vector_of(text: &str, dim: usize) -> Vec<f32> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let mut x = h | 1;
    (0..dim)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // In [-1, 1).
            ((x >> 40) as f32 / (1u64 << 23) as f32) - 1.0
        })
        .collect()
}

fn pct(sorted: &[u64], p: f64) -> u64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(i).copied().unwrap_or(0)
}

/// Saves `facts` facts of one user with their vectors, eight writers at once.
/// One row of the results table: `mode`'s latencies (sorted, in µs) as
/// p50, p95 and p99.
fn print_row(args: &Args, backend: &str, mode: &str, lat: &[u64]) {
    println!(
        "| {backend} | {mode} | {} | {} | {} | {:.1} ms | {:.1} ms | {:.1} ms |",
        args.facts,
        args.dim,
        args.queries,
        pct(lat, 0.50) as f64 / 1000.0,
        pct(lat, 0.95) as f64 / 1000.0,
        pct(lat, 0.99) as f64 / 1000.0,
    );
}

/// Saves `text` as a user-wide fact of the user and embeds it.
async fn remember(store: &dyn Store, text: String, dim: usize) -> Result<()> {
    let vector = vector_of(&text, dim);
    let saved = store
        .save_memory(NewMemory {
            user_key: USER.into(),
            thread_key: None,
            text,
            run_id: None,
            at: hearth_core::now_ms(),
        })
        .await?;
    store
        .set_memory_embedding(saved.memory.id, MODEL, &vector)
        .await?;
    Ok(())
}

async fn fill(store: Arc<dyn Store>, facts: usize, dim: usize) -> Result<()> {
    let mut tasks = Vec::new();
    for w in 0..8 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            for i in (w..facts).step_by(8) {
                let text = format!(
                    "fact number {i}: the user mentioned item {} once",
                    i * 7919 % 100_003
                );
                remember(&*store, text, dim).await?;
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}

/// Times the store's own search by meaning (no HTTP, no embedding call).
/// With `save_first`, each search (the first included) comes after a new
/// fact of the user is saved and embedded, as a run that remembers and then
/// searches makes them; only the search is timed.
async fn in_process(
    store: &Arc<dyn Store>,
    dim: usize,
    queries: usize,
    save_first: bool,
) -> Result<Vec<u64>> {
    let scope = hearth_store::MemoryScope {
        user_key: USER.into(),
        thread_key: None,
    };
    let mut lat = Vec::with_capacity(queries);
    let mut cpu0 = 0.0;
    for i in 0..=queries {
        if i == 1 {
            cpu0 = cpu_secs();
        }
        if save_first {
            remember(&**store, format!("fact saved before search {i}"), dim).await?;
        }
        let q = vector_of(&format!("query {i}"), dim);
        let t = Instant::now();
        let found = store.nearest_memories(&scope, MODEL, &q, 100).await?;
        // The first one warms the caches (the server's and, on PostgreSQL,
        // the replica's copy of the user's vectors), as the server's first
        // search does: reported apart.
        if i > 0 {
            lat.push(t.elapsed().as_micros() as u64);
        } else {
            println!(
                "first search (nothing held yet): {:.1} ms",
                t.elapsed().as_secs_f64() * 1000.0
            );
        }
        if found.is_empty() {
            bail!("the store found nothing by meaning for query {i}");
        }
    }
    println!(
        "store only: {:.1} ms of CPU per search (this process, all threads: load-independent)",
        (cpu_secs() - cpu0) * 1000.0 / queries as f64
    );
    lat.sort_unstable();
    Ok(lat)
}

/// This process's resident memory (`VmRSS`), in kB; 0 when unknown.
fn vm_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// This process's CPU time (user + system), in seconds.
fn cpu_secs() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime: fields 14 and 15 of stat, 11 and 12 after ')';
    // in clock ticks, 100 a second on Linux.
    (ticks(11) + ticks(12)) / 100.0
}

/// A child process killed on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn start_hearth(
    bin_dir: &Path,
    home: &Path,
    fake_url: &str,
    database_url: Option<&str>,
) -> Result<(Proc, String)> {
    let mut cfg = format!(
        "[llm]\ndefault_model = \"fake/bench\"\n[llm.providers.fake]\ntype = \"openai_compat\"\n\
         base_url = \"{fake_url}\"\napi_key_env = \"HEARTH_BENCH_KEY\"\nmodels = [\"bench\"]\n\
         [memory]\nembeddings = \"{MODEL}\"\n[log]\nlevel = \"warn\"\n"
    );
    if database_url.is_some() {
        cfg.push_str("[store]\nbackend = \"postgres\"\n");
    }
    std::fs::write(home.join("hearth.toml"), cfg)?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let mut cmd = Command::new(bin_dir.join("hearth"));
    if let Some(db) = database_url {
        cmd.env("HEARTH_DATABASE_URL", db);
    }
    let child = cmd
        .args(["serve", "--home"])
        .arg(home)
        .args(["--bind", &format!("127.0.0.1:{port}")])
        .env("HEARTH_BENCH_KEY", "bench-key")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting hearth (build it: cargo build --release -p hearth-cli)")?;
    let proc = Proc(child);
    let http = reqwest::Client::new();
    let t0 = Instant::now();
    loop {
        if let Ok(r) = http.get(format!("{url}/readyz")).send().await
            && r.status().as_u16() == 200
        {
            return Ok((proc, url));
        }
        if t0.elapsed() > Duration::from_secs(60) {
            bail!("hearth was not ready within 60 s");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Times `queries` searches in `mode`; fails when one finds nothing.
async fn searches(url: &str, mode: &str, queries: usize) -> Result<Vec<u64>> {
    let http = reqwest::Client::new();
    let mut lat = Vec::with_capacity(queries);
    for i in 0..queries {
        // Spaces as %20 and the user key's colons as %3A: plain query text.
        let q = format!("what%20did%20the%20user%20say%20about%20item%20{i}");
        let user = USER.replace(':', "%3A");
        let t = Instant::now();
        let r = http
            .get(format!(
                "{url}/v1/memory/search?q={q}&user_key={user}&mode={mode}&limit=10"
            ))
            .send()
            .await?;
        let status = r.status();
        let body: serde_json::Value = r.json().await?;
        lat.push(t.elapsed().as_micros() as u64);
        let found = body["items"].as_array().map_or(0, Vec::len);
        if !status.is_success() || found == 0 {
            bail!("search {i} ({mode}) answered {status} with {found} items: {body}");
        }
    }
    lat.sort_unstable();
    Ok(lat)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let args = parse_args()?;
    let tmp = std::env::temp_dir().join(format!("hearth-memory-bench-{}", std::process::id()));
    let home = tmp.join("home");
    std::fs::create_dir_all(&home)?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700))?;
    }
    let fake = FakeOpenAi::start().await;
    let dim = args.dim;
    fake.embed_with(move |text| vector_of(text, dim));

    let (store, database_url, filled) = open(&args, &home).await?;
    if filled {
        println!(
            "searching the facts filled before in database {:?}",
            args.database
        );
    } else {
        let t0 = Instant::now();
        fill(store.clone(), args.facts, args.dim).await?;
        println!(
            "filled {} facts of one user with {}-dimensional vectors in {:.1} s",
            args.facts,
            args.dim,
            t0.elapsed().as_secs_f64()
        );
    }
    // Closed, checkpointed and opened again, as a server finds it.
    drop(store);
    let (store, _) = reopen(&args, &home, database_url.as_deref()).await?;
    let rss = vm_rss_kb();
    let scan = in_process(&store, args.dim, args.queries, false).await?;
    println!(
        "resident memory of this process: {} kB before the searches, {} kB after",
        rss,
        vm_rss_kb()
    );
    let after_saves = if args.store_only {
        in_process(&store, args.dim, args.queries, true).await?
    } else {
        Vec::new()
    };
    drop(store);
    let backend = if database_url.is_some() {
        "postgres"
    } else {
        "sqlite"
    };
    println!("\n| backend | mode | facts | dim | searches | p50 | p95 | p99 |");
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    print_row(
        &args,
        backend,
        "store only (in-process `nearest_memories`)",
        &scan,
    );
    if args.store_only {
        print_row(
            &args,
            backend,
            "store only, a fact saved and embedded before each search",
            &after_saves,
        );
        let _ = std::fs::remove_dir_all(&tmp);
        return Ok(());
    }

    let (_server, url) = start_hearth(
        &args.bin_dir,
        &home,
        &fake.base_url(),
        database_url.as_deref(),
    )
    .await?;
    // One search first: the server's first touch of the data is not a
    // steady-state search.
    searches(&url, "vector", 1).await?;
    for mode in ["vector", "hybrid"] {
        let lat = searches(&url, mode, args.queries).await?;
        print_row(&args, backend, mode, &lat);
    }
    if std::env::var_os("HEARTH_BENCH_KEEP").is_some() {
        println!("kept {}", tmp.display());
    } else {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    Ok(())
}

/// The store to fill, the database URL the server then uses, and whether
/// it was filled by an earlier run (`--database`).
async fn open(args: &Args, home: &Path) -> Result<(Arc<dyn Store>, Option<String>, bool)> {
    match &args.postgres {
        None => {
            let store = SqliteStore::open(&home.join("hearth.db"), Durability::Normal)?;
            Ok((Arc::new(store), None, false))
        }
        Some(var) => postgres(var, args.database.as_deref()).await,
    }
}

/// The store filled by [`open`], opened again.
async fn reopen(args: &Args, home: &Path, url: Option<&str>) -> Result<(Arc<dyn Store>, ())> {
    match url {
        None => {
            // The fill's pages move from the write-ahead log into the file,
            // where a long-running server finds them after its checkpoints.
            let path = home.join("hearth.db");
            let db = rusqlite::Connection::open(&path)?;
            db.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
            drop(db);
            Ok((Arc::new(SqliteStore::open(&path, Durability::Normal)?), ()))
        }
        Some(url) => reconnect(args, url).await,
    }
}

#[cfg(feature = "postgres")]
async fn reconnect(args: &Args, url: &str) -> Result<(Arc<dyn Store>, ())> {
    let var = args.postgres.as_deref().unwrap_or("HEARTH_DATABASE_URL");
    let store = hearth_store::postgres::PostgresStore::connect(url, var, 8).await?;
    if let Some(mb) = args.vector_cache_mb {
        store.set_vector_cache_bytes(mb.saturating_mul(1 << 20));
    }
    Ok((Arc::new(store), ()))
}

#[cfg(not(feature = "postgres"))]
async fn reconnect(_args: &Args, _url: &str) -> Result<(Arc<dyn Store>, ())> {
    bail!("built without PostgreSQL")
}

#[cfg(feature = "postgres")]
async fn postgres(var: &str, keep: Option<&str>) -> Result<(Arc<dyn Store>, Option<String>, bool)> {
    let admin = std::env::var(var)
        .with_context(|| format!("--backend postgres reads the server's URL from {var}"))?;
    let config: tokio_postgres::Config = admin.parse().context("parsing the PostgreSQL URL")?;
    let (client, connection) = config.connect(tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    let name = keep.map_or_else(
        || format!("hearth_memory_bench_{}", std::process::id()),
        str::to_owned,
    );
    let exists = client
        .query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&name])
        .await?
        .is_some();
    if !exists {
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .with_context(|| format!("creating database {name} (the role needs CREATEDB)"))?;
    }
    let url = hearth_store::postgres::testing::with_dbname(&admin, &name);
    let store = hearth_store::postgres::PostgresStore::connect(&url, var, 8).await?;
    Ok((Arc::new(store), Some(url), exists))
}

#[cfg(not(feature = "postgres"))]
async fn postgres(
    _var: &str,
    _keep: Option<&str>,
) -> Result<(Arc<dyn Store>, Option<String>, bool)> {
    bail!(
        "--backend postgres needs hearth-memory-bench built with PostgreSQL: \
         cargo build --release -p hearth-bench --features postgres"
    )
}
