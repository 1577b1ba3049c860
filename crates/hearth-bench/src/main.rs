//! `hearth-load`: measures the whole gateway on this machine.
//!
//! Starts `fake-openai` (zero latency) and `hearth serve` on a fresh temp home,
//! then reports: time from spawn to `/readyz` 200, idle RSS, completed runs per
//! second at each concurrency, per-run latency minus the fake provider's own
//! (hearth's overhead), CPU time per run, peak RSS, and the same in strict
//! durability next to this disk's fsync rate. Each message is a new thread and
//! waits for its answer (`wait: true`), so every run includes its SQLite writes.
//! Only 127.0.0.1 is contacted.
//!
//! Usage: hearth-load [--bin-dir target/release] [--secs 10] [--concurrency 1,16,64]
//!        [--strict-concurrency 16,64] [--emulate-fsync-ms 4] [--openai]
//!        [--extra-toml FILE] [--backend sqlite|postgres] [--url-env VAR]
//!        [--replicas N] [--pool-size N] [--group-pool-size N] [--idle-secs 30]
//!        [--interleave] [--thread-messages 1] [--sticky]
//!
//! `--backend postgres` (a driver and a `hearth` built with `--features
//! postgres`) measures the same levels on PostgreSQL right after SQLite, on
//! the server whose URL the variable `--url-env` names (default
//! `HEARTH_DATABASE_URL`; a fresh database is created there per server
//! group, so the URL needs a role that may create databases), then the
//! ratio of the two. With `--replicas N` (N > 1) it then starts N replicas
//! on one fresh database and sends each worker's messages to them in turn
//! (round-robin, as a load balancer would). `--pool-size N` sets `[store]
//! pool_size` of the one replica, `--group-pool-size N` that of each replica
//! of the group (so that N replicas can share the server processes one
//! replica has; `--pool-size` when not given). Before loading, one idle replica
//! is watched for `--idle-secs`: the transactions its database counts in
//! `pg_stat_database` per second are the queries an idle replica sends.
//!
//! `--interleave` (with `--backend postgres`) keeps the SQLite server, the
//! PostgreSQL replica and the `--replicas` group all started, and runs each
//! level in the order SQLite, PostgreSQL, the group, the group, PostgreSQL,
//! SQLite (half the seconds each): the ratios then compare servers loaded
//! at the same minutes, on a machine whose speed moves from one minute to
//! the next (a shared VM's does by tens of percent), instead of levels
//! measured tens of seconds apart.
//!
//! `--thread-messages N` sends each worker's messages to one thread N at a
//! time (each waiting for its answer), then to a new thread: from the second
//! message on, a run reads its thread's history, as in a chat. The default,
//! 1, makes every message a new thread.
//!
//! `--sticky` sends all of a worker's messages to one replica of the
//! `--replicas` group (worker `w` to replica `w mod N`), as a load balancer
//! with sticky sessions would, instead of each message to the next replica.
//!
//! `--extra-toml FILE` appends FILE to every hearth.toml the driver writes
//! (`FAKE_URL` in it becomes the fake provider's address):
//! e.g. `[router] strategy = "learn"` with arms and a budget pool, to compare
//! the router and budgets against the default fixed model
//! (`crates/hearth-bench/learn-pool.toml`).
//!
//! `--openai` drives the same server through `/openai/v1/chat/completions`
//! too (non-streaming, a new `user`, so a new thread, per message), for the
//! comparison issue 9 asks for. Each level then runs in the order messages,
//! openai, openai, messages (half the seconds each), so a machine that gets
//! busier or a database that grows during the run weighs on both alike.
//!
//! `--emulate-fsync-ms N` adds a strict run on an emulated slow disk: an
//! LD_PRELOAD shim (`fsync_delay.c`, built with `cc`) adds N ms to every fsync
//! of the hearth process, so fsync sharing can be seen on a disk whose fsync
//! is fast.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::json;

mod pg;

struct Args {
    bin_dir: PathBuf,
    secs: u64,
    concurrency: Vec<usize>,
    strict_concurrency: Vec<usize>,
    emulate_fsync_ms: Option<u64>,
    openai: bool,
    /// TOML appended to every hearth.toml the driver writes.
    extra_toml: String,
    /// Measure PostgreSQL too: the admin URL's variable.
    postgres_url_env: Option<String>,
    /// Replicas sharing one PostgreSQL database in the cluster level.
    replicas: usize,
    /// How long an idle replica is watched for queries.
    idle_secs: u64,
    /// Run each level on every server in turn (`--interleave`).
    interleave: bool,
    /// `[store] pool_size` of the one PostgreSQL replica (hearth's default
    /// when not given).
    pool_size: Option<u32>,
    /// `[store] pool_size` of each replica of the `--replicas` group
    /// (`--pool-size` when not given).
    group_pool_size: Option<u32>,
    /// Messages a worker sends to one thread before it opens the next.
    thread_messages: u64,
    /// Each worker sends to one server of a group (`--sticky`), as a load
    /// balancer with sticky sessions would, instead of round-robin.
    sticky: bool,
}

impl Args {
    /// The `/v1/messages` load these arguments ask for.
    fn messages(&self) -> Api {
        Api::Messages {
            per_thread: self.thread_messages,
            sticky: self.sticky,
        }
    }
}

/// Where a server keeps its store.
#[derive(Clone)]
enum Backend {
    /// The home's SQLite file.
    Sqlite,
    /// A PostgreSQL database: its URL, and the pool size when not hearth's default.
    #[cfg_attr(
        not(feature = "postgres"),
        expect(dead_code, reason = "made only by the postgres comparison")
    )]
    Postgres(String, Option<u32>),
}

/// Which endpoint a load level drives.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Api {
    /// `POST /v1/messages` with `wait: true`, `per_thread` messages to each
    /// thread (`--thread-messages`) before the next; `sticky` (`--sticky`)
    /// sends all of a worker's messages to one server instead of each to
    /// the next.
    Messages { per_thread: u64, sticky: bool },
    /// `POST /openai/v1/chat/completions` (non-streaming).
    OpenAi,
}

fn parse_args() -> Result<Args> {
    let mut a = Args {
        bin_dir: PathBuf::from("target/release"),
        secs: 10,
        concurrency: vec![1, 16, 64],
        strict_concurrency: vec![16, 64],
        emulate_fsync_ms: None,
        openai: false,
        extra_toml: String::new(),
        postgres_url_env: None,
        replicas: 1,
        idle_secs: 30,
        interleave: false,
        pool_size: None,
        group_pool_size: None,
        thread_messages: 1,
        sticky: false,
    };
    let mut backend = "sqlite".to_owned();
    let mut url_env = "HEARTH_DATABASE_URL".to_owned();
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--bin-dir" => a.bin_dir = PathBuf::from(val()?),
            "--secs" => a.secs = val()?.parse()?,
            "--concurrency" => a.concurrency = list(&val()?)?,
            "--strict-concurrency" => a.strict_concurrency = list(&val()?)?,
            "--emulate-fsync-ms" => a.emulate_fsync_ms = Some(val()?.parse()?),
            "--openai" => a.openai = true,
            "--extra-toml" => {
                let path = val()?;
                a.extra_toml = std::fs::read_to_string(&path)
                    .with_context(|| format!("reading --extra-toml {path}"))?;
            }
            "--backend" => backend = val()?,
            "--url-env" => url_env = val()?,
            "--replicas" => a.replicas = val()?.parse()?,
            "--idle-secs" => a.idle_secs = val()?.parse()?,
            "--interleave" => a.interleave = true,
            "--sticky" => a.sticky = true,
            "--thread-messages" => {
                let n: u64 = val()?.parse()?;
                if n == 0 {
                    bail!("--thread-messages must be at least 1");
                }
                a.thread_messages = n;
            }
            "--pool-size" => a.pool_size = Some(val()?.parse()?),
            "--group-pool-size" => a.group_pool_size = Some(val()?.parse()?),
            other => bail!("unknown argument {other}; see the doc at the top of hearth-load"),
        }
    }
    match backend.as_str() {
        "sqlite" => {}
        "postgres" => a.postgres_url_env = Some(url_env),
        other => bail!("--backend {other}: use sqlite or postgres"),
    }
    if a.replicas == 0 {
        bail!("--replicas must be at least 1");
    }
    if a.group_pool_size.is_none() {
        a.group_pool_size = a.pool_size;
    }
    if a.interleave && (a.postgres_url_env.is_none() || a.openai) {
        bail!(
            "--interleave compares SQLite with PostgreSQL: give --backend postgres, without --openai"
        );
    }
    Ok(a)
}

fn probe_dir() -> Option<PathBuf> {
    let mut it = std::env::args().skip(1);
    (it.next().as_deref() == Some("--probe-fsync")).then(|| it.next().map(PathBuf::from))?
}

fn list(s: &str) -> Result<Vec<usize>> {
    s.split(',')
        .filter(|x| !x.is_empty())
        .map(|x| Ok(x.trim().parse()?))
        .collect()
}

/// A child process killed on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn read_line_with(child: &mut Child, prefix: &str) -> Result<String> {
    let out = child.stdout.take().context("no stdout")?;
    let mut reader = BufReader::new(out);
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            bail!("process exited before printing {prefix:?}");
        }
        if let Some(rest) = line.trim().strip_prefix(prefix) {
            let rest = rest.to_owned();
            // Keep draining so the child never blocks on a full pipe.
            std::thread::spawn(move || {
                let mut sink = String::new();
                while reader.read_line(&mut sink).map(|n| n > 0).unwrap_or(false) {
                    sink.clear();
                }
            });
            return Ok(rest);
        }
    }
}

fn proc_status_kb(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// utime + stime of a process, in seconds.
fn cpu_secs(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the command name, which is in parentheses and may hold spaces.
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of stat, i.e. 11 and 12 after ')'.
    (ticks(11) + ticks(12)) / clock_ticks()
}

fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

fn pct(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// fsyncs per second of the disk under `dir`: 4 KiB write + fdatasync, 2 s.
fn fsync_rate(dir: &Path) -> Result<f64> {
    let path = dir.join("fsync-probe");
    let mut f = std::fs::File::create(&path)?;
    let buf = [7u8; 4096];
    let t0 = Instant::now();
    let mut n = 0u64;
    while t0.elapsed() < Duration::from_secs(2) {
        f.write_all(&buf)?;
        f.sync_data()?;
        n += 1;
    }
    let rate = n as f64 / t0.elapsed().as_secs_f64();
    drop(f);
    std::fs::remove_file(&path)?;
    Ok(rate)
}

/// The fsync rate a process sees with the shim loaded: this driver re-runs
/// itself in probe mode under LD_PRELOAD.
fn fsync_rate_with(lib: &Path, ms: u64, dir: &Path) -> Result<f64> {
    let out = Command::new(std::env::current_exe()?)
        .arg("--probe-fsync")
        .arg(dir)
        .env("LD_PRELOAD", lib)
        .env("HEARTH_FSYNC_DELAY_US", (ms * 1000).to_string())
        .output()?;
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .context("reading the probe's fsync rate")
}

fn start_fake(bin_dir: &Path) -> Result<(Proc, String)> {
    let mut child = Command::new(bin_dir.join("fake-openai"))
        .args(["--bind", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .spawn()
        .context("starting fake-openai (build it: cargo build --release -p hearth-testkit)")?;
    let url = read_line_with(&mut child, "listening ")?;
    Ok((Proc(child), url))
}

struct Server {
    proc: Proc,
    url: String,
    startup: Duration,
}

async fn start_hearth(
    bin_dir: &Path,
    home: &Path,
    fake_url: &str,
    strict: bool,
    preload: Option<(&Path, u64)>,
    extra_toml: &str,
    backend: &Backend,
) -> Result<Server> {
    std::fs::create_dir_all(home)?;
    set_private(home)?;
    let mut cfg = format!(
        "[llm]\ndefault_model = \"fake/bench\"\n[llm.providers.fake]\ntype = \"openai_compat\"\n\
         base_url = \"{fake_url}\"\napi_key_env = \"HEARTH_BENCH_KEY\"\nmodels = [\"bench\"]\n[log]\nlevel = \"warn\"\n"
    );
    match (backend, strict) {
        (Backend::Sqlite, true) => cfg.push_str("[store]\ndurability = \"strict\"\n"),
        (Backend::Sqlite, false) => {}
        (Backend::Postgres(_, pool), _) => {
            cfg.push_str("[store]\nbackend = \"postgres\"\n");
            if let Some(n) = pool {
                cfg.push_str(&format!("pool_size = {n}\n"));
            }
        }
    }
    // The fake provider's address is known only now.
    cfg.push_str(&extra_toml.replace("FAKE_URL", fake_url));
    // Written before the clock starts: the measured start-up is hearth's own
    // (home check, config, store creation and migration, listener).
    std::fs::write(home.join("hearth.toml"), cfg)?;
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        l.local_addr()?.port()
    };
    let url = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let t0 = Instant::now();
    let mut cmd = Command::new(bin_dir.join("hearth"));
    if let Some((lib, ms)) = preload {
        cmd.env("LD_PRELOAD", lib)
            .env("HEARTH_FSYNC_DELAY_US", (ms * 1000).to_string());
    }
    if let Backend::Postgres(url, _) = backend {
        // Replicas share the master key, as the README asks.
        cmd.env("HEARTH_DATABASE_URL", url)
            .env("HEARTH_SECRET_KEY", BENCH_SECRET_KEY);
    }
    let child = cmd
        .args(["serve", "--home"])
        .arg(home)
        .args(["--bind", &format!("127.0.0.1:{port}")])
        .env_remove("OPENAI_API_KEY")
        // The fake provider, like a real one, refuses a call without a key.
        .env("HEARTH_BENCH_KEY", "bench-key")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting hearth (build it: cargo build --release -p hearth-cli)")?;
    let proc = Proc(child);
    loop {
        if let Ok(r) = http.get(format!("{url}/readyz")).send().await
            && r.status().as_u16() == 200
        {
            break;
        }
        if t0.elapsed() > Duration::from_secs(10) {
            bail!("hearth was not ready within 10 s");
        }
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
    Ok(Server {
        proc,
        url,
        startup: t0.elapsed(),
    })
}

/// The master key every replica of a PostgreSQL group shares (a bench-only
/// value: the databases it seals are thrown away).
const BENCH_SECRET_KEY: &str = "aGVhcnRoLWxvYWQtYmVuY2gtbWFzdGVyLWtleS0wMDA=";

fn set_private(dir: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    Ok(())
}

/// Builds the fsync-delay shim next to the temp homes.
fn build_shim(tmp: &Path) -> Result<PathBuf> {
    let src = tmp.join("fsync_delay.c");
    std::fs::write(&src, include_str!("../fsync_delay.c"))?;
    let lib = tmp.join("fsync_delay.so");
    let ok = Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&lib)
        .arg(&src)
        .arg("-ldl")
        .status()
        .context("running cc to build the fsync-delay shim")?
        .success();
    if !ok {
        bail!("cc could not build the fsync-delay shim");
    }
    Ok(lib)
}

/// A counter's value in hearth's `/metrics`.
async fn metric(http: &reqwest::Client, url: &str, name: &str) -> f64 {
    let Ok(r) = http.get(format!("{url}/metrics")).send().await else {
        return 0.0;
    };
    let text = r.text().await.unwrap_or_default();
    text.lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

/// A counter summed over several servers.
async fn metrics(http: &reqwest::Client, urls: &[String], name: &str) -> f64 {
    let mut sum = 0.0;
    for url in urls {
        sum += metric(http, url, name).await;
    }
    sum
}

/// Latency of the fake provider itself, measured with the same client.
async fn fake_latency_us(fake_url: &str, n: usize) -> Result<Vec<u64>> {
    let http = reqwest::Client::new();
    let body = json!({"model": "bench", "stream": true, "stream_options": {"include_usage": true},
                      "messages": [{"role": "user", "content": "hello"}]});
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let r = http
            .post(format!("{fake_url}/chat/completions"))
            .bearer_auth("bench-key")
            .json(&body)
            .send()
            .await?;
        let _ = r.bytes().await?;
        out.push(t.elapsed().as_micros() as u64);
    }
    out.sort_unstable();
    Ok(out)
}

struct Level {
    concurrency: usize,
    runs: u64,
    errors: u64,
    secs: f64,
    lat_us: Vec<u64>,
    cpu_per_run_us: f64,
    commits: f64,
    writes: f64,
}

impl Level {
    /// Two runs of the same level as one.
    fn merge(mut self, other: Level) -> Level {
        let runs = self.runs + other.runs;
        if runs > 0 {
            self.cpu_per_run_us = (self.cpu_per_run_us * self.runs as f64
                + other.cpu_per_run_us * other.runs as f64)
                / runs as f64;
        }
        self.runs = runs;
        self.errors += other.errors;
        self.secs += other.secs;
        self.lat_us.extend(other.lat_us);
        self.lat_us.sort_unstable();
        self.commits += other.commits;
        self.writes += other.writes;
        self
    }
}

/// Runs one load level for `secs`: `concurrency` workers, each sending its
/// messages to the servers of `urls` in turn (round-robin), CPU counted over
/// every process in `pids`.
async fn drive(
    urls: &[String],
    pids: &[u32],
    concurrency: usize,
    secs: u64,
    tag: &str,
    api: Api,
) -> Result<Level> {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(concurrency)
        .build()?;
    let counter = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let commits0 = metrics(&http, urls, "hearth_store_commits_total").await;
    let writes0 = metrics(&http, urls, "hearth_store_writes_total").await;
    let cpu0: f64 = pids.iter().map(|p| cpu_secs(*p)).sum();
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..concurrency {
        let (http, urls, counter, errors, stop) = (
            http.clone(),
            urls.to_vec(),
            counter.clone(),
            errors.clone(),
            stop.clone(),
        );
        let tag = tag.to_owned();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let (path, body) = match api {
                    Api::Messages { per_thread, .. } => ("/v1/messages", json!({"text": "hello", "thread_key": format!("bench:{tag}:{w}:{}", (i - 1) / per_thread), "wait": true})),
                    Api::OpenAi => ("/openai/v1/chat/completions", json!({"model": "hearth",
                        "user": format!("bench-{tag}-{w}-{i}"), "messages": [{"role": "user", "content": "hello"}]})),
                };
                let url = match api {
                    Api::Messages { sticky: true, .. } => &urls[w % urls.len()],
                    _ => &urls[(w + i as usize) % urls.len()],
                };
                let t = Instant::now();
                match http.post(format!("{url}{path}")).json(&body).send().await {
                    Ok(r) if r.status().as_u16() == 200 => {
                        let ok = r.json::<serde_json::Value>().await.map(|v| match api {
                            Api::Messages { .. } => v["status"] == "succeeded",
                            Api::OpenAi => v["choices"][0]["message"]["content"].is_string(),
                        });
                        if matches!(ok, Ok(true)) {
                            lat.push(t.elapsed().as_micros() as u64);
                            counter.fetch_add(1, Ordering::Relaxed);
                        } else {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    _ => {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            lat
        }));
    }
    tokio::time::sleep(Duration::from_secs(secs)).await;
    stop.store(true, Ordering::Relaxed);
    let mut lat = Vec::new();
    for t in tasks {
        lat.extend(t.await?);
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let cpu = pids.iter().map(|p| cpu_secs(*p)).sum::<f64>() - cpu0;
    let commits = metrics(&http, urls, "hearth_store_commits_total").await - commits0;
    let writes = metrics(&http, urls, "hearth_store_writes_total").await - writes0;
    lat.sort_unstable();
    let runs = counter.load(Ordering::Relaxed);
    Ok(Level {
        concurrency,
        runs,
        errors: errors.load(Ordering::Relaxed),
        secs: elapsed,
        lat_us: lat,
        cpu_per_run_us: if runs > 0 {
            cpu * 1e6 / runs as f64
        } else {
            0.0
        },
        commits,
        writes,
    })
}

fn report(mode: &str, fake_p50: u64, levels: &[Level], pids: &[u32]) {
    println!("\n### {mode} durability\n");
    println!(
        "| concurrency | runs/s | errors | latency p50 | latency p99 | overhead p50 | overhead p99 | CPU per run | commits/s | writes per commit |"
    );
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for l in levels {
        let p50 = pct(&l.lat_us, 0.50);
        let p99 = pct(&l.lat_us, 0.99);
        println!(
            "| {} | {:.0} | {} | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms | {:.0} µs | {:.0} | {:.1} |",
            l.concurrency,
            l.runs as f64 / l.secs,
            l.errors,
            p50 as f64 / 1000.0,
            p99 as f64 / 1000.0,
            p50.saturating_sub(fake_p50) as f64 / 1000.0,
            p99.saturating_sub(fake_p50) as f64 / 1000.0,
            l.cpu_per_run_us,
            l.commits / l.secs,
            if l.commits > 0.0 {
                l.writes / l.commits
            } else {
                0.0
            }
        );
    }
    for pid in pids {
        println!(
            "\npeak RSS ({mode}, pid {pid}): {:.1} MB",
            proc_status_kb(*pid, "VmHWM:") as f64 / 1024.0
        );
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    if let Some(dir) = probe_dir() {
        println!("{:.1}", fsync_rate(&dir)?);
        return Ok(());
    }
    let args = parse_args()?;
    let tmp = std::env::temp_dir().join(format!("hearth-load-{}", std::process::id()));
    std::fs::create_dir_all(&tmp)?;
    let (_fake, fake_url) = start_fake(&args.bin_dir)?;

    let fake = fake_latency_us(&fake_url, 2000).await?;
    let fake_p50 = pct(&fake, 0.5);
    println!(
        "fake provider alone (2000 sequential calls): p50 {:.3} ms, p99 {:.3} ms",
        fake_p50 as f64 / 1000.0,
        pct(&fake, 0.99) as f64 / 1000.0
    );

    // Start-up on an empty home, five times.
    let mut startups = Vec::new();
    for i in 0..5 {
        let s = start_hearth(
            &args.bin_dir,
            &tmp.join(format!("startup{i}")),
            &fake_url,
            false,
            None,
            &args.extra_toml,
            &Backend::Sqlite,
        )
        .await?;
        startups.push(s.startup.as_micros() as u64);
    }
    startups.sort_unstable();
    println!(
        "start to /readyz 200 on an empty home (5 runs): min {:.1} ms, median {:.1} ms, max {:.1} ms",
        startups[0] as f64 / 1000.0,
        startups[2] as f64 / 1000.0,
        startups[4] as f64 / 1000.0
    );

    let normal = start_hearth(
        &args.bin_dir,
        &tmp.join("normal"),
        &fake_url,
        false,
        None,
        &args.extra_toml,
        &Backend::Sqlite,
    )
    .await?;
    let pid = normal.proc.0.id();
    tokio::time::sleep(Duration::from_secs(2)).await;
    println!(
        "idle RSS after start: {:.1} MB",
        proc_status_kb(pid, "VmRSS:") as f64 / 1024.0
    );
    if let (true, Some(var)) = (args.interleave, &args.postgres_url_env) {
        let sqlite = pg::Sqlite {
            url: normal.url.clone(),
            pid,
        };
        let outcome = pg::compare_interleaved(&args, var, &tmp, &fake_url, fake_p50, &sqlite).await;
        drop(normal);
        // The strict and emulated levels are SQLite's alone: run without
        // --interleave for them.
        let _ = std::fs::remove_dir_all(&tmp);
        return outcome;
    }
    let mut levels = Vec::new();
    let mut openai = Vec::new();
    for &c in &args.concurrency {
        let url = std::slice::from_ref(&normal.url);
        let pid = &[pid];
        if args.openai {
            let half = (args.secs / 2).max(1);
            let m1 = drive(url, pid, c, half, &format!("n{c}a"), args.messages()).await?;
            let o1 = drive(url, pid, c, half, &format!("o{c}a"), Api::OpenAi).await?;
            let o2 = drive(url, pid, c, half, &format!("o{c}b"), Api::OpenAi).await?;
            let m2 = drive(url, pid, c, half, &format!("n{c}b"), args.messages()).await?;
            levels.push(m1.merge(m2));
            openai.push(o1.merge(o2));
        } else {
            levels.push(drive(url, pid, c, args.secs, &format!("n{c}"), args.messages()).await?);
        }
    }
    report("normal", fake_p50, &levels, &[pid]);
    if args.openai {
        report(
            "normal (/openai/v1/chat/completions)",
            fake_p50,
            &openai,
            &[pid],
        );
    }
    drop(normal);
    if let Some(var) = &args.postgres_url_env {
        pg::compare(&args, var, &tmp, &fake_url, fake_p50, &levels).await?;
    }

    let rate = fsync_rate(&tmp)?;
    println!("\nthis disk: {rate:.0} fsyncs/s (4 KiB write + fdatasync, 2 s)");
    if !args.strict_concurrency.is_empty() {
        let strict = start_hearth(
            &args.bin_dir,
            &tmp.join("strict"),
            &fake_url,
            true,
            None,
            &args.extra_toml,
            &Backend::Sqlite,
        )
        .await?;
        let pid = strict.proc.0.id();
        let mut levels = Vec::new();
        for &c in &args.strict_concurrency {
            levels.push(
                drive(
                    std::slice::from_ref(&strict.url),
                    &[pid],
                    c,
                    args.secs,
                    &format!("s{c}"),
                    args.messages(),
                )
                .await?,
            );
        }
        report("strict", fake_p50, &levels, &[pid]);
        for l in &levels {
            println!(
                "strict c={}: {:.1}x the fsync rate",
                l.concurrency,
                l.runs as f64 / l.secs / rate
            );
        }
    }
    if let Some(ms) = args.emulate_fsync_ms {
        let lib = build_shim(&tmp)?;
        let home = tmp.join("emulated");
        std::fs::create_dir_all(&home)?;
        let emulated = fsync_rate_with(&lib, ms, &home)?;
        println!("\nemulated slow disk: +{ms} ms per fsync, measured {emulated:.0} fsyncs/s");
        let strict = start_hearth(
            &args.bin_dir,
            &home,
            &fake_url,
            true,
            Some((&lib, ms)),
            &args.extra_toml,
            &Backend::Sqlite,
        )
        .await?;
        let pid = strict.proc.0.id();
        let mut levels = Vec::new();
        for &c in &args.strict_concurrency {
            levels.push(
                drive(
                    std::slice::from_ref(&strict.url),
                    &[pid],
                    c,
                    args.secs,
                    &format!("e{c}"),
                    args.messages(),
                )
                .await?,
            );
        }
        report(
            &format!("strict, emulated {ms} ms fsync,"),
            fake_p50,
            &levels,
            &[pid],
        );
        for l in &levels {
            println!(
                "emulated strict c={}: {:.1}x the fsync rate",
                l.concurrency,
                l.runs as f64 / l.secs / emulated
            );
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    Ok(())
}
