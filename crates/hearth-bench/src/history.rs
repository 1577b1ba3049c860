//! `hearth-history-bench`: how long the store takes to answer
//! `GET /v1/threads/{k}/history` on a thread of 100k messages, and to load
//! a compacted thread's context at the start of a run.
//!
//! Builds a fresh SQLite database in a temp dir (WAL, normal durability, as
//! `hearth serve` opens it): one thread of `--messages` messages written by
//! runs of 20 messages each, a summary every 10k messages, and a second
//! thread so the index has to tell them apart. Then times `history_page`
//! (the whole of the endpoint's database work) at the newest, a middle and
//! the oldest page, and `thread_context` (what a run reads), in-process.
//! The HTTP layer and JSON encoding of one page are not included.
//!
//! Usage: hearth-history-bench [--messages 100000] [--iterations 300]

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use hearth_core::{Message, Role, RunStatus};
use hearth_store::{Durability, NewRun, RunFinish, SqliteStore, Store};

const PER_RUN: usize = 20;
const SUMMARY_EVERY: i64 = 10_000;

fn arg(name: &str, default: usize) -> Result<usize> {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == name) {
        Some(i) => args
            .get(i + 1)
            .context("a value after the flag")?
            .parse()
            .with_context(|| format!("{name} takes a whole number")),
        None => Ok(default),
    }
}

fn pct(sorted: &[u64], p: f64) -> u64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(i).copied().unwrap_or(0)
}

async fn fill(store: &Arc<dyn Store>, thread: &str, runs: usize) -> Result<()> {
    // A few writers at once, as a busy gateway has: the store batches them.
    let mut tasks = Vec::new();
    for w in 0..8 {
        let store = store.clone();
        let thread = thread.to_owned();
        tasks.push(tokio::spawn(async move {
            for r in (w..runs).step_by(8) {
                let run_id = format!("run_{thread}_{r:06}");
                store
                    .create_run(NewRun {
                        run_id: run_id.clone(),
                        thread_key: thread.clone(),
                        user_key: "bench:user:1".into(),
                        source: "bench".into(),
                        input: "q".into(),
                        idempotency_key: None,
                        created_at: 1_700_000_000_000,
                        scope: None,
                        roles: Vec::new(),
                        parent_run_id: None,
                    })
                    .await?;
                let messages = (0..PER_RUN)
                    .map(|i| {
                        let role = if i % 2 == 0 { Role::User } else { Role::Assistant };
                        Message::text(
                            role,
                            format!("message {i} of run {r}: a sentence of ordinary length, about as long as a chat line"),
                        )
                    })
                    .collect();
                store
                    .finish_run(RunFinish {
                        run_id,
                        status: RunStatus::Succeeded,
                        output: Some("a".into()),
                        error_code: None,
                        error_message: None,
                        messages,
                        steps: Vec::new(),
                        follow_ups: Vec::new(),
                        finished_at: 1_700_000_000_001,
                        last_event_seq: None,
                        outbox: Vec::new(),
                        arm_observations: Vec::new(),
                        model: None,
                        requested_model: None,
                        executed_elsewhere: false,
                    })
                    .await?;
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}

async fn time<F, Fut, T>(what: &str, iterations: usize, mut f: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = hearth_store::Result<T>>,
{
    f().await?; // warm the statement cache and the page cache once
    let mut us = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let t0 = Instant::now();
        f().await?;
        us.push(t0.elapsed().as_micros() as u64);
    }
    us.sort_unstable();
    println!(
        "{what:<48} p50 {:>6} us  p99 {:>6} us  max {:>6} us",
        pct(&us, 0.5),
        pct(&us, 0.99),
        us.last().copied().unwrap_or(0)
    );
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let messages = arg("--messages", 100_000)?;
    let iterations = arg("--iterations", 300)?;
    let dir = std::env::temp_dir().join(format!("hearth-history-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(
        &dir.join("hearth.db"),
        Durability::Normal,
    )?);
    let t0 = Instant::now();
    // The other thread first and last, so the long one's rows are not alone.
    fill(&store, "api:other", 50).await?;
    fill(&store, "api:long", messages / PER_RUN).await?;
    fill(&store, "api:other2", 50).await?;
    let page = store.history_page("api:long", 1, None).await?;
    let newest = page.messages.first().map_or(0, |m| m.id);
    let oldest = newest - messages as i64 + 1;
    // A summary every 10k messages, the newest covering all but the last
    // 100 (what a compacted thread looks like: a short verbatim tail).
    let mut boundaries: Vec<i64> = (1..)
        .map(|k| oldest + k * SUMMARY_EVERY - 1)
        .take_while(|b| *b < newest - 100)
        .collect();
    boundaries.push(newest - 100);
    for at in &boundaries {
        store
            .append_summary(
                "api:long",
                "run_api:long_000000",
                "- what the user said",
                *at,
                1_700_000_000_002,
            )
            .await?;
    }
    let summaries = boundaries.len();
    println!(
        "thread api:long: {messages} messages, {summaries} summaries, ids {oldest}..={newest}; filled in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    let middle = Some(oldest + messages as i64 / 2);
    let deep = Some(oldest + 60);
    time("history_page limit 50, newest page", iterations, || {
        store.history_page("api:long", 50, None)
    })
    .await?;
    time(
        "history_page limit 50, before the middle",
        iterations,
        || store.history_page("api:long", 50, middle),
    )
    .await?;
    time("history_page limit 50, oldest page", iterations, || {
        store.history_page("api:long", 50, deep)
    })
    .await?;
    time("history_page limit 1000, newest page", iterations, || {
        store.history_page("api:long", 1000, None)
    })
    .await?;
    time(
        "thread_context (newest summary + 100 after it)",
        iterations,
        || store.thread_context("api:long"),
    )
    .await?;
    time(
        "thread_history limit 50 (compaction off)",
        iterations,
        || store.thread_history("api:long", 50),
    )
    .await?;
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
