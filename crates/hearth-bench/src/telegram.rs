//! The Telegram load driver: a release `hearth serve` polling the fake Bot
//! API, answering with the zero-latency fake provider (both fakes run in
//! this process), so the figures are hearth's channel path alone plus the
//! fakes' own cost.
//!
//! Usage: hearth-telegram-load [--bin-dir target/release] [--secs 10] [--chats 100] [--discord]
//!        [--fresh-chats]
//!
//! Prints: idle RSS with Telegram connected (and Discord too, connected to
//! the fake Discord gateway, with `--discord`), answered messages per second
//! with `--chats` chats each sending its next message as soon as the answer
//! arrives, and the per-message latency (update queued -> answer received by
//! the fake) next to the fake provider's own latency, whose difference is
//! the channel and runtime overhead.
//!
//! By default each chat is one thread that grows with every message, and
//! with compaction every run sends the thread's whole history up to its
//! context window, so a long run measures a long thread. `--fresh-chats`
//! sends each message from a new private chat (a new thread), which holds
//! the history constant and measures the channel path alone, as
//! `hearth-load` does with a new thread per message.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use hearth_testkit::FakeOpenAi;
use hearth_testkit::fake_discord::FakeDiscord;
use hearth_testkit::fake_telegram::{FakeTelegram, User};
use tokio::sync::Mutex;

const TOKEN: &str = "7000000001:AAbenchTOKENbenchTOKENbenchTOKEN";
const DISCORD_TOKEN: &str = "MTAwMDAwMDAwMDAwMDAwMDAx.Gfake.discordTOKENdiscordTOKEN";

struct Args {
    bin_dir: PathBuf,
    secs: u64,
    chats: i64,
    discord: bool,
    fresh_chats: bool,
}

fn parse_args() -> Result<Args> {
    let mut a = Args {
        bin_dir: PathBuf::from("target/release"),
        secs: 10,
        chats: 100,
        discord: false,
        fresh_chats: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--bin-dir" => a.bin_dir = PathBuf::from(val()?),
            "--secs" => a.secs = val()?.parse()?,
            "--chats" => a.chats = val()?.parse()?,
            "--discord" => a.discord = true,
            "--fresh-chats" => a.fresh_chats = true,
            other => bail!("unknown argument {other}"),
        }
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

fn rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn pct(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

async fn start_hearth(bin_dir: &Path, home: &Path, cfg: &str) -> Result<(Proc, String)> {
    std::fs::create_dir_all(home)?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(home, std::fs::Permissions::from_mode(0o700))?;
    }
    std::fs::write(home.join("hearth.toml"), cfg)?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let child = Command::new(bin_dir.join("hearth"))
        .args(["serve", "--home"])
        .arg(home)
        .args(["--bind", &format!("127.0.0.1:{port}")])
        .env("TG_TOKEN", TOKEN)
        // The fake provider, like a real one, refuses a call without a key.
        .env("HEARTH_BENCH_KEY", "bench-key")
        .env("DC_TOKEN", DISCORD_TOKEN)
        .env_remove("OPENAI_API_KEY")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting hearth (build it: cargo build --release -p hearth-cli)")?;
    let proc = Proc(child);
    let http = reqwest::Client::new();
    let t0 = Instant::now();
    let mut last = serde_json::Value::Null;
    loop {
        if let Ok(r) = http.get(format!("{url}/v1/channels")).send().await
            && let Ok(v) = r.json::<serde_json::Value>().await
        {
            let all = v["channels"].as_array();
            if all.is_some_and(|all| {
                !all.is_empty()
                    && all
                        .iter()
                        .all(|c| c["enabled"] == false || c["state"] == "connected")
            }) {
                return Ok((proc, url));
            }
            last = v;
        }
        if t0.elapsed() > Duration::from_secs(20) {
            bail!("the channels did not connect within 20 s: {last}");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// p50 of the fake provider's own answer time, as hearth would see it.
async fn provider_p50_us(base: &str) -> Result<u64> {
    let http = reqwest::Client::new();
    let body = serde_json::json!({"model": "bench", "stream": true,
        "messages": [{"role": "user", "content": "hi"}]});
    let mut lat = Vec::new();
    for _ in 0..300 {
        let t = Instant::now();
        let r = http
            .post(format!("{base}/chat/completions"))
            .bearer_auth("bench-key")
            .json(&body)
            .send()
            .await?;
        let _ = r.bytes().await?;
        lat.push(t.elapsed().as_micros() as u64);
    }
    lat.sort_unstable();
    Ok(pct(&lat, 0.5))
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = parse_args()?;
    let fake = FakeOpenAi::start().await;
    let tg = Arc::new(FakeTelegram::start(TOKEN).await);
    let tmp = std::env::temp_dir().join(format!("hearth-tg-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let cfg = format!(
        "[llm]\ndefault_model = \"fake/bench\"\n[llm.providers.fake]\ntype = \"openai_compat\"\n\
         base_url = \"{}\"\napi_key_env = \"HEARTH_BENCH_KEY\"\nmodels = [\"bench\"]\n\
         [log]\nlevel = \"warn\"\n[channels.telegram]\nenabled = true\ntoken_env = \"TG_TOKEN\"\napi_base = \"{}\"\n\
         open_dms = true\npoll_timeout_secs = 30\n",
        fake.base_url(),
        tg.url()
    );
    let discord = if args.discord {
        Some(FakeDiscord::start(DISCORD_TOKEN).await)
    } else {
        None
    };
    let cfg = match &discord {
        Some(dc) => format!(
            "{cfg}[channels.discord]\nenabled = true\ntoken_env = \"DC_TOKEN\"\n\
             api_base = \"{}\"\ngateway_url = \"\"\n",
            dc.api_base()
        ),
        None => cfg,
    };
    let (proc, _url) = start_hearth(&args.bin_dir, &tmp.join("home"), &cfg).await?;
    if let Some(dc) = &discord {
        dc.wait_ready(1).await;
    }
    let pid = proc.0.id();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let idle = rss_kb(pid);

    let provider = provider_p50_us(&fake.base_url()).await?;
    let deadline = Instant::now() + Duration::from_secs(args.secs);
    let latencies = Arc::new(Mutex::new(Vec::<u64>::new()));
    // One watcher reads the bot's new messages and tells each chat's task,
    // so the driver's own cost stays linear in the messages sent.
    let mut inboxes = std::collections::HashMap::new();
    let mut receivers = Vec::new();
    for chat in 1..=args.chats {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<()>();
        inboxes.insert(chat, tx);
        receivers.push((chat, rx));
    }
    let n_chats = args.chats;
    let watcher = {
        let tg = tg.clone();
        tokio::spawn(async move {
            let mut seen = 0usize;
            loop {
                if !tg
                    .wait_for(|st| st.sent().len() > seen, Duration::from_secs(60))
                    .await
                {
                    return;
                }
                let chats: Vec<i64> =
                    tg.with_state(|st| st.sent()[seen..].iter().map(|m| m.chat_id).collect());
                seen += chats.len();
                for chat in chats {
                    // With fresh chats, message n of task c comes from chat
                    // c + n * chats: the task is the chat id modulo chats.
                    let task = (chat - 1).rem_euclid(n_chats) + 1;
                    if let Some(tx) = inboxes.get(&task) {
                        let _ = tx.send(());
                    }
                }
            }
        })
    };
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for (chat, mut rx) in receivers {
        let (tg, latencies) = (tg.clone(), latencies.clone());
        let fresh = args.fresh_chats;
        tasks.push(tokio::spawn(async move {
            let mut n = 0i64;
            while Instant::now() < deadline {
                n += 1;
                let user = User::new(if fresh { chat + n * n_chats } else { chat });
                let t = Instant::now();
                tg.push_update(tg.private_text(&user, &format!("message {n}")));
                match tokio::time::timeout(Duration::from_secs(30), rx.recv()).await {
                    Ok(Some(())) => {}
                    _ => {
                        return Err(anyhow::anyhow!(
                            "chat {chat}: answer {n} did not arrive within 30 s"
                        ));
                    }
                }
                latencies.lock().await.push(t.elapsed().as_micros() as u64);
            }
            Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    watcher.abort();
    let elapsed = t0.elapsed().as_secs_f64();
    let busy = rss_kb(pid);
    let mut lat = latencies.lock().await.clone();
    lat.sort_unstable();
    let rejected = tg.rejections();
    println!(
        "| chats | answered | per s | latency p50 ms | p99 ms | provider p50 ms | overhead p50 ms | idle RSS MB | RSS after MB | rejected |"
    );
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let ms = |us: u64| us as f64 / 1000.0;
    let p50 = pct(&lat, 0.5);
    println!(
        "| {} | {} | {:.0} | {:.2} | {:.2} | {:.2} | {:.2} | {:.1} | {:.1} | {} |",
        args.chats,
        lat.len(),
        lat.len() as f64 / elapsed,
        ms(p50),
        ms(pct(&lat, 0.99)),
        ms(provider),
        ms(p50.saturating_sub(provider)),
        idle as f64 / 1024.0,
        busy as f64 / 1024.0,
        rejected.len()
    );
    drop(proc);
    let _ = std::fs::remove_dir_all(&tmp);
    Ok(())
}
