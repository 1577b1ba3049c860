//! `hearth-chaos`: several replicas on one PostgreSQL database while one of
//! them is SIGKILLed every few seconds and started again, and what that
//! cost: messages lost, answered twice, answered out of their thread's
//! order, Telegram updates handled twice, and how long each run a killed
//! replica held waited for another replica to take it.
//!
//! Runs the testkit's fake provider (echo, zero latency) and fake Telegram
//! Bot API in this process and `--replicas` `hearth serve` processes (a
//! release build with `--features postgres`) on a fresh database of the
//! server the variable `--url-env` names (default `HEARTH_DATABASE_URL`).
//! `--concurrency` clients send `--messages` messages over `--threads`
//! threads through `POST /v1/messages` with `wait`, each thread's messages
//! one after the other (the next once the previous is answered), each to the next live
//! replica in turn; a request a dying replica drops is sent again to another
//! with the same idempotency key, as a client behind a load balancer would.
//! Meanwhile `--tg-users` Telegram users each send `--tg-messages`
//! messages, the next once the answer to the last arrived. Every
//! `--kill-every` seconds the next replica is SIGKILLed and started again on
//! its home. At the end, each thread's stored history must be exactly its
//! messages in order, each followed by its one answer, and each Telegram
//! message must have been answered exactly once, and every model call must
//! have carried its thread's earlier messages, all of them and in order
//! (whichever replica made it, and whether it read the thread's history or
//! started from what it held). Two counts tell apart why
//! one was not: an update handled twice (two runs of one Telegram message,
//! counted in the database) and an answer sent twice (counted by the fake;
//! README: a reply whose send was cut by the kill after Telegram took it is
//! sent again, since Telegram cannot deduplicate a message).
//!
//! Usage: hearth-chaos [--bin-dir target/release] [--replicas 3] [--messages 2000]
//!        [--threads 200] [--concurrency 32] [--kill-every 3] [--lease-secs 2]
//!        [--tg-users 20] [--tg-messages 10] [--provider-delay-ms 300] [--url-env VAR]
//!
//! The provider answers after `--provider-delay-ms`, so runs are in flight
//! when their replica is killed and the whole takes long enough for several
//! kills; the killing goes on until every run has ended.
//!
//! Each replica's log (`serve.log` in its home, warnings and errors) is
//! kept when a guarantee did not hold, or always with `HEARTH_BENCH_KEEP=1`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use hearth_testkit::FakeOpenAi;
use hearth_testkit::fake_telegram::{FakeTelegram, User};
use serde_json::json;
use tokio::sync::RwLock;
use tokio_postgres::NoTls;

const TOKEN: &str = "7000000001:AAchaosTOKENchaosTOKENchaosTOKEN";
const SECRET_KEY: &str = "aGVhcnRoLWxvYWQtYmVuY2gtbWFzdGVyLWtleS0wMDA=";
const UNFINISHED: &str = "('queued', 'running', 'awaiting_confirmation')";

struct Args {
    bin_dir: PathBuf,
    replicas: usize,
    messages: usize,
    threads: usize,
    concurrency: usize,
    kill_every: f64,
    lease_secs: u64,
    tg_users: i64,
    tg_messages: usize,
    provider_delay_ms: u64,
    url_env: String,
}

fn parse_args() -> Result<Args> {
    let mut a = Args {
        bin_dir: PathBuf::from("target/release"),
        replicas: 3,
        messages: 2000,
        threads: 200,
        concurrency: 32,
        kill_every: 3.0,
        lease_secs: 2,
        tg_users: 20,
        tg_messages: 10,
        provider_delay_ms: 300,
        url_env: "HEARTH_DATABASE_URL".into(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--bin-dir" => a.bin_dir = PathBuf::from(val()?),
            "--replicas" => a.replicas = val()?.parse()?,
            "--messages" => a.messages = val()?.parse()?,
            "--threads" => a.threads = val()?.parse()?,
            "--concurrency" => a.concurrency = val()?.parse()?,
            "--kill-every" => a.kill_every = val()?.parse()?,
            "--lease-secs" => a.lease_secs = val()?.parse()?,
            "--tg-users" => a.tg_users = val()?.parse()?,
            "--tg-messages" => a.tg_messages = val()?.parse()?,
            "--provider-delay-ms" => a.provider_delay_ms = val()?.parse()?,
            "--url-env" => a.url_env = val()?,
            other => bail!("unknown argument {other}; see the doc at the top of hearth-chaos"),
        }
    }
    if a.replicas < 2 || a.threads == 0 || a.concurrency == 0 {
        bail!("--replicas must be at least 2, --threads and --concurrency at least 1");
    }
    Ok(a)
}

/// A child process killed on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One replica: its home (kept across restarts), its process and identity.
struct Replica {
    home: PathBuf,
    url: String,
    id: String,
    proc: Option<Proc>,
}

/// What every replica is started with.
struct Launch {
    bin_dir: PathBuf,
    config: String,
    database_url: String,
}

impl Launch {
    /// Starts a replica on `home` and waits until it is ready.
    async fn start(&self, home: &Path) -> Result<Replica> {
        std::fs::create_dir_all(home)?;
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(home, std::fs::Permissions::from_mode(0o700))?;
        }
        std::fs::write(home.join("hearth.toml"), &self.config)?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let url = format!("http://127.0.0.1:{port}");
        // Every start of this replica's home logs to one file, kept when
        // the guarantees did not hold.
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(home.join("serve.log"))?;
        let child = Command::new(self.bin_dir.join("hearth"))
            .args(["serve", "--home"])
            .arg(home)
            .args(["--bind", &format!("127.0.0.1:{port}")])
            .env("HEARTH_DATABASE_URL", &self.database_url)
            .env("HEARTH_SECRET_KEY", SECRET_KEY)
            .env("HEARTH_BENCH_KEY", "bench-key")
            .env("TG_TOKEN", TOKEN)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .context("starting hearth (build it: cargo build --release -p hearth-cli --features postgres)")?;
        let proc = Proc(child);
        let http = reqwest::Client::new();
        let t0 = Instant::now();
        loop {
            if let Ok(r) = http.get(format!("{url}/readyz")).send().await
                && r.status().as_u16() == 200
            {
                let v: serde_json::Value = r.json().await?;
                let id = v["replica"].as_str().unwrap_or_default().to_owned();
                return Ok(Replica {
                    home: home.to_owned(),
                    url,
                    id,
                    proc: Some(proc),
                });
            }
            if t0.elapsed() > Duration::from_secs(60) {
                bail!("a replica was not ready within 60 s");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// The live replicas' URLs, in a fixed order; a killed one is replaced.
type Live = Arc<RwLock<Vec<String>>>;

/// Sends one message until a replica accepts it (same idempotency key on
/// every try). Returns how many tries it took.
async fn send(http: &reqwest::Client, live: &Live, n: u64, thread: usize, k: usize) -> Result<u32> {
    let body = json!({
        "text": format!("t{thread} m{k}"),
        "thread_key": format!("api:chaos-{thread}"),
        "idempotency_key": format!("chaos-{thread}-{k}"),
        // Each message waits for its answer, so sending spans the whole
        // run and requests meet the kills; a request a dying replica drops
        // is sent again, and the replica that gets it waits on the same run.
        "wait": true,
    });
    let t0 = Instant::now();
    let mut attempt = 0u32;
    loop {
        let url = {
            let live = live.read().await;
            live[(n as usize + attempt as usize) % live.len()].clone()
        };
        match http
            .post(format!("{url}/v1/messages"))
            .json(&body)
            .send()
            .await
        {
            Ok(r) if r.status().is_success() => return Ok(attempt + 1),
            Ok(r) if r.status().is_client_error() && r.status().as_u16() != 429 => {
                bail!("t{thread} m{k} was refused: {}", r.status());
            }
            _ => {}
        }
        if t0.elapsed() > Duration::from_secs(60) {
            bail!("t{thread} m{k}: no replica accepted it within 60 s");
        }
        attempt += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let args = parse_args()?;
    let admin_url = std::env::var(&args.url_env).with_context(|| {
        format!(
            "hearth-chaos reads the PostgreSQL server's URL from {}",
            args.url_env
        )
    })?;
    let (admin, connection) = admin_url
        .parse::<tokio_postgres::Config>()?
        .connect(NoTls)
        .await
        .context("connecting to the PostgreSQL server")?;
    tokio::spawn(connection);
    let name = format!("hearth_chaos_{}", std::process::id());
    admin
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await?;
    let database_url = hearth_store::postgres::testing::with_dbname(&admin_url, &name);
    let outcome = chaos(&args, &database_url).await;
    let _ = admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .await;
    outcome
}

async fn chaos(args: &Args, database_url: &str) -> Result<()> {
    let (db, connection) = database_url
        .parse::<tokio_postgres::Config>()?
        .connect(NoTls)
        .await?;
    tokio::spawn(connection);
    let fake = FakeOpenAi::start().await;
    fake.set_default_delay(Duration::from_millis(args.provider_delay_ms));
    let tg = Arc::new(FakeTelegram::start(TOKEN).await);
    let launch = Launch {
        bin_dir: args.bin_dir.clone(),
        config: format!(
            "[llm]\ndefault_model = \"fake/bench\"\n[llm.providers.fake]\ntype = \"openai_compat\"\n\
             base_url = \"{}\"\napi_key_env = \"HEARTH_BENCH_KEY\"\nmodels = [\"bench\"]\n\
             [log]\nlevel = \"warn\"\n[store]\nbackend = \"postgres\"\nlease_secs = {}\n\
             [channels.telegram]\nenabled = true\ntoken_env = \"TG_TOKEN\"\napi_base = \"{}\"\n\
             open_dms = true\npoll_timeout_secs = 1\n",
            fake.base_url(),
            args.lease_secs,
            tg.url()
        ),
        database_url: database_url.to_owned(),
    };
    let tmp = std::env::temp_dir().join(format!("hearth-chaos-{}", std::process::id()));
    let mut replicas = Vec::new();
    for i in 0..args.replicas {
        replicas.push(launch.start(&tmp.join(format!("replica{i}"))).await?);
    }
    let live: Live = Arc::new(RwLock::new(
        replicas.iter().map(|r| r.url.clone()).collect(),
    ));
    println!(
        "{} replicas on one database, lease_secs = {}, one SIGKILLed every {} s",
        args.replicas, args.lease_secs, args.kill_every
    );

    // Clients: each takes the next thread and sends its messages in order.
    let per_thread = args.messages.div_ceil(args.threads);
    let next_thread = Arc::new(AtomicU64::new(0));
    let retries = Arc::new(AtomicU64::new(0));
    let sent = Arc::new(AtomicU64::new(0));
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()?;
    let t0 = Instant::now();
    let mut clients = Vec::new();
    for _ in 0..args.concurrency {
        let (http, live, next_thread, retries, sent) = (
            http.clone(),
            live.clone(),
            next_thread.clone(),
            retries.clone(),
            sent.clone(),
        );
        let threads = args.threads as u64;
        clients.push(tokio::spawn(async move {
            loop {
                let t = next_thread.fetch_add(1, Ordering::Relaxed);
                if t >= threads {
                    return anyhow::Ok(());
                }
                for k in 0..per_thread {
                    let n = sent.fetch_add(1, Ordering::Relaxed);
                    let tries = send(&http, &live, n, t as usize, k).await?;
                    retries.fetch_add(u64::from(tries - 1), Ordering::Relaxed);
                }
            }
        }));
    }
    // Telegram users: each sends its next message once the last is answered.
    let mut users = Vec::new();
    for u in 1..=args.tg_users {
        let tg = tg.clone();
        let n = args.tg_messages;
        users.push(tokio::spawn(async move {
            let user = User::new(u);
            for k in 0..n {
                let text = format!("tg u{u} n{k}");
                let answer = format!("echo: {text}");
                tg.push_update(tg.private_text(&user, &text));
                let answered = tg
                    .wait_for(
                        |st| st.sent().iter().any(|m| m.chat_id == u && m.text == answer),
                        Duration::from_secs(90),
                    )
                    .await;
                if !answered {
                    bail!("telegram user {u}: message {k} not answered within 90 s");
                }
            }
            anyhow::Ok(())
        }));
    }

    // The killer: the next replica every `kill_every` seconds, until the
    // clients and users are done; each kill notes the runs the replica held.
    let done = Arc::new(AtomicBool::new(false));
    let mut orphan_waits: Vec<f64> = Vec::new();
    let mut kills = 0usize;
    let mut kill_times: Vec<Instant> = Vec::new();
    let mut victim = 0usize;
    let watch = {
        let done = done.clone();
        let clients_done = async {
            for c in clients {
                c.await??;
            }
            for u in users {
                u.await??;
            }
            anyhow::Ok(())
        };
        tokio::spawn(async move {
            let out = clients_done.await;
            done.store(true, Ordering::Relaxed);
            out
        })
    };
    loop {
        tokio::time::sleep(Duration::from_secs_f64(args.kill_every)).await;
        if done.load(Ordering::Relaxed) && unfinished(&db).await? == 0 {
            break;
        }
        let r = &mut replicas[victim];
        let killed = r.id.clone();
        let held: Vec<String> = db
            .query(
                &format!(
                    "SELECT run_id FROM runs WHERE lease_owner = $1 AND status IN {UNFINISHED}"
                ),
                &[&killed],
            )
            .await?
            .iter()
            .map(|row| row.get(0))
            .collect();
        let at = Instant::now();
        r.proc = None; // SIGKILL
        kills += 1;
        kill_times.push(at);
        let restarted = launch.start(&r.home.clone()).await?;
        live.write().await[victim] = restarted.url.clone();
        *r = restarted;
        orphan_waits.extend(wait_for_new_owner(&db, &held, &killed, at).await?);
        victim = (victim + 1) % replicas.len();
    }
    watch.await??;
    let accepted_in = t0.elapsed().as_secs_f64();

    // Everything accepted runs to its end.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let row = db
            .query_one(
                &format!("SELECT count(*) FROM runs WHERE status IN {UNFINISHED}"),
                &[],
            )
            .await?;
        let left: i64 = row.get(0);
        if left == 0 {
            break;
        }
        if Instant::now() > deadline {
            bail!("{left} runs were still unfinished 120 s after the last message");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let total = t0.elapsed().as_secs_f64();
    let report = check_threads(&db, args.threads, per_thread).await?;
    let contexts = check_contexts(&fake.requests());
    let tg_twice_list = tg_answered_twice(&tg, args.tg_users, args.tg_messages);
    let tg_twice = tg_twice_list.len();
    let tg_runs_twice = tg_handled_twice(&db, args.tg_users as usize * args.tg_messages).await?;
    let failed: i64 = db
        .query_one("SELECT count(*) FROM runs WHERE status <> 'succeeded'", &[])
        .await?
        .get(0);
    orphan_waits.sort_by(f64::total_cmp);
    println!(
        "{} messages over {} threads at concurrency {} and {} Telegram messages: all accepted in {:.1} s, all finished in {:.1} s; {} kills; {} requests sent again after a replica dropped them; {} runs not succeeded",
        args.threads * per_thread,
        args.threads,
        args.concurrency,
        args.tg_users as usize * args.tg_messages,
        accepted_in,
        total,
        kills,
        retries.load(Ordering::Relaxed),
        failed
    );
    println!(
        "model calls checked for their thread's earlier messages: {} (API), {} (Telegram)",
        contexts.api, contexts.telegram
    );
    println!(
        "\n| lost | answered twice | order violations | wrong contexts | Telegram updates handled twice | Telegram answers sent twice | orphaned runs | orphan wait p50 | orphan wait max | lease_secs + 2 s |"
    );
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let p = |q: f64| {
        orphan_waits
            .get(((orphan_waits.len() as f64 - 1.0) * q).round() as usize)
            .copied()
            .unwrap_or(0.0)
    };
    println!(
        "| {} | {} | {} | {} | {} | {} | {} | {:.2} s | {:.2} s | {} s |",
        report.lost,
        report.twice,
        report.out_of_order,
        contexts.wrong,
        tg_runs_twice,
        tg_twice,
        orphan_waits.len(),
        p(0.5),
        p(1.0),
        args.lease_secs + 2
    );
    if !tg_twice_list.is_empty() {
        // A send the kill cut after Telegram took it (README) comes just
        // before a kill; one long before any kill was sent twice otherwise.
        let gaps: Vec<String> = tg_twice_list
            .iter()
            .map(
                |(chat, text)| match first_send_to_kill(&tg, &kill_times, *chat, text) {
                    Some(gap) => format!("{:+.0} ms", gap * 1000.0),
                    None => "no kill".to_owned(),
                },
            )
            .collect();
        println!(
            "Telegram answers sent twice, from each one's first send to the nearest kill \
             (negative: the fake answered it after the kill): {}",
            gaps.join(", ")
        );
        if std::env::var_os("HEARTH_BENCH_KEEP").is_some() {
            let since = |t: Instant| t.saturating_duration_since(t0).as_secs_f64();
            let kills: Vec<String> = kill_times
                .iter()
                .map(|k| format!("{:.3}", since(*k)))
                .collect();
            println!("kills at (s): {}", kills.join(", "));
            for (chat, text) in &tg_twice_list {
                for r in tg
                    .requests()
                    .iter()
                    .filter(|r| r.body["chat_id"].to_string().trim_matches('"') == chat.to_string())
                {
                    println!(
                        "  chat {chat} at {:.3} s: {} {} -> {}",
                        since(r.at),
                        r.method,
                        r.body["text"].as_str().unwrap_or(""),
                        r.status
                    );
                }
                let _ = text;
            }
        }
    }
    drop(replicas);
    let broken = report.lost
        + report.twice
        + report.out_of_order
        + contexts.wrong
        + tg_runs_twice
        + tg_twice
        > 0
        || failed > 0;
    if broken || std::env::var_os("HEARTH_BENCH_KEEP").is_some() {
        println!(
            "kept the replicas' homes and logs (serve.log) in {}",
            tmp.display()
        );
    } else {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    if broken {
        bail!("the guarantees did not hold: see the table");
    }
    Ok(())
}

/// Runs not yet ended.
async fn unfinished(db: &tokio_postgres::Client) -> Result<i64> {
    let row = db
        .query_one(
            &format!("SELECT count(*) FROM runs WHERE status IN {UNFINISHED}"),
            &[],
        )
        .await?;
    Ok(row.get(0))
}

/// Seconds each run in `held` waited after `at` until a replica other than
/// `killed` held it or it ended.
async fn wait_for_new_owner(
    db: &tokio_postgres::Client,
    held: &[String],
    killed: &str,
    at: Instant,
) -> Result<Vec<f64>> {
    let mut waiting: Vec<String> = held.to_vec();
    let mut waits = Vec::new();
    let deadline = at + Duration::from_secs(60);
    while !waiting.is_empty() {
        let rows = db
            .query(
                "SELECT run_id, status, lease_owner FROM runs WHERE run_id = ANY($1)",
                &[&waiting],
            )
            .await?;
        let mut taken: HashMap<String, bool> = HashMap::new();
        for row in &rows {
            let status: String = row.get(1);
            let owner: Option<String> = row.get(2);
            let moved = owner.is_some_and(|o| o != killed);
            let ended = !matches!(
                status.as_str(),
                "queued" | "running" | "awaiting_confirmation"
            );
            taken.insert(row.get(0), moved || ended);
        }
        let now = at.elapsed().as_secs_f64();
        waiting.retain(|id| {
            let done = taken.get(id).copied().unwrap_or(true);
            if done {
                waits.push(now);
            }
            !done
        });
        if Instant::now() > deadline {
            bail!(
                "{} runs of a killed replica had no new owner after 60 s",
                waiting.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    Ok(waits)
}

/// What each thread's stored history says.
struct ThreadReport {
    lost: usize,
    twice: usize,
    out_of_order: usize,
}

/// Each thread must hold its messages in order, each followed by its one
/// answer (`echo: <message>`).
async fn check_threads(
    db: &tokio_postgres::Client,
    threads: usize,
    per_thread: usize,
) -> Result<ThreadReport> {
    let mut report = ThreadReport {
        lost: 0,
        twice: 0,
        out_of_order: 0,
    };
    for t in 0..threads {
        let rows = db
            .query(
                "SELECT role, CASE WHEN content LIKE '[%' THEN content::jsonb -> 0 ->> 'text' ELSE content END FROM messages \
                 WHERE thread_key = $1 AND covers_to IS NULL ORDER BY id",
                &[&format!("api:chaos-{t}")],
            )
            .await?;
        let history: Vec<(String, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
        let users: Vec<&str> = history
            .iter()
            .filter(|(role, _)| role == "user")
            .map(|(_, c)| c.as_str())
            .collect();
        let expected: Vec<String> = (0..per_thread).map(|k| format!("t{t} m{k}")).collect();
        for e in &expected {
            match users.iter().filter(|u| **u == e).count() {
                0 => report.lost += 1,
                1 => {}
                _ => report.twice += 1,
            }
        }
        let mut seen: Vec<&str> = users.clone();
        seen.dedup();
        let in_order: Vec<&str> = expected
            .iter()
            .map(String::as_str)
            .filter(|e| seen.contains(e))
            .collect();
        if seen != in_order {
            report.out_of_order += 1;
        }
        // Each message is followed by exactly its answer.
        for pair in history.chunks(2) {
            match pair {
                [(ur, u), (ar, a)] if ur == "user" && ar == "assistant" => {
                    if *a != format!("echo: {u}") {
                        report.out_of_order += 1;
                    }
                }
                _ => report.twice += 1,
            }
        }
    }
    Ok(report)
}

/// What [`check_contexts`] found.
struct ContextReport {
    /// Model calls of the API threads checked.
    api: usize,
    /// Model calls of the Telegram chats checked.
    telegram: usize,
    /// Calls whose user messages were not their thread's, from its first
    /// to the one answered, in order.
    wrong: usize,
}

/// Each model call answers its thread's message `k` (`t<t> m<k>`, `tg u<u>
/// n<k>`) and must carry the thread's messages 0 to `k`, in order, as the
/// user's turns: none lost or repeated, none of another thread.
fn check_contexts(requests: &[serde_json::Value]) -> ContextReport {
    let mut report = ContextReport {
        api: 0,
        telegram: 0,
        wrong: 0,
    };
    for request in requests {
        let users: Vec<&str> = request["messages"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .filter(|m| m["role"] == "user")
            .filter_map(|m| m["content"].as_str())
            .collect();
        let Some(last) = users.last() else {
            continue;
        };
        let Some((thread, k)) = last
            .rsplit_once(' ')
            .and_then(|(thread, n)| Some((thread, n.get(1..)?.parse::<usize>().ok()?)))
        else {
            continue;
        };
        let (mark, counter) = if thread.starts_with("tg ") {
            ("n", &mut report.telegram)
        } else if thread.starts_with('t') {
            ("m", &mut report.api)
        } else {
            continue;
        };
        *counter += 1;
        let expected: Vec<String> = (0..=k).map(|i| format!("{thread} {mark}{i}")).collect();
        if users != expected {
            report.wrong += 1;
        }
    }
    report
}

/// Telegram messages stored as more than one run: updates handled twice.
/// Every one of the `sent` messages must be found as a run, so that a count
/// of none means none rather than a query that matched nothing.
async fn tg_handled_twice(db: &tokio_postgres::Client, sent: usize) -> Result<usize> {
    let row = db
        .query_one(
            "SELECT count(DISTINCT (thread_key, input)), \
             count(*) - count(DISTINCT (thread_key, input)) FROM runs \
             WHERE input LIKE 'tg u% n%'",
            &[],
        )
        .await?;
    let (found, extra): (i64, i64) = (row.get(0), row.get(1));
    if usize::try_from(found)? != sent {
        bail!("{found} Telegram messages found as runs, {sent} sent");
    }
    Ok(usize::try_from(extra)?)
}

/// Telegram messages the bot answered more than once: chat and answer.
fn tg_answered_twice(tg: &FakeTelegram, users: i64, per_user: usize) -> Vec<(i64, String)> {
    let sent = tg.sent();
    let mut twice = Vec::new();
    for u in 1..=users {
        for k in 0..per_user {
            let answer = format!("echo: tg u{u} n{k}");
            if sent
                .iter()
                .filter(|m| m.chat_id == u && m.text == answer)
                .count()
                > 1
            {
                twice.push((u, answer));
            }
        }
    }
    twice
}

/// Seconds from the first accepted send of `text` to `chat` to the nearest
/// kill (negative when the kill came first: a request the killed replica had
/// written before it died is answered by the fake after).
fn first_send_to_kill(tg: &FakeTelegram, kills: &[Instant], chat: i64, text: &str) -> Option<f64> {
    let first = tg
        .requests()
        .into_iter()
        .find(|r| {
            r.method == "sendMessage"
                && r.status == 200
                && (r.body["chat_id"].as_i64() == Some(chat)
                    || r.body["chat_id"].as_str() == Some(chat.to_string().as_str()))
                && r.body["text"].as_str() == Some(text)
        })?
        .at;
    kills
        .iter()
        .map(|k| {
            if *k >= first {
                k.duration_since(first).as_secs_f64()
            } else {
                -first.duration_since(*k).as_secs_f64()
            }
        })
        .min_by(|a, b| a.abs().total_cmp(&b.abs()))
}
