//! `hearth-seed-home`: fills a hearth home with a large history, for
//! measuring the dashboard's (and the API's) pages on a big home.
//!
//! Writes `--runs` finished runs (default 1,000,000) spread over
//! `--threads` threads (default 100,000) and the last 30 days into
//! `<home>/hearth.db` through the store (so every index and derived column
//! is as `hearth serve` writes them): each run has a user and an assistant
//! message and one model-call step; one in fifty failed. One model call
//! per run is recorded for the usage pages. Start `hearth serve --home
//! <home>` on it afterwards (no token: open on loopback).
//!
//! Usage: hearth-seed-home --home DIR [--runs 1000000] [--threads 100000]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use hearth_core::records::{StepKind, StepRecord, StepStatus};
use hearth_core::{Message, Role, RunStatus};
use hearth_store::{Durability, NewRun, RunFinish, SqliteStore, Store};
use serde_json::json;

/// Writers at once: the store batches their commits.
const WRITERS: usize = 8;
const DAY_MS: i64 = 86_400_000;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn number(name: &str, default: usize) -> Result<usize> {
    arg(name).map_or(Ok(default), |v| {
        v.parse()
            .with_context(|| format!("{name} takes a whole number, not {v:?}"))
    })
}

/// When run `i` of `runs` was accepted: spread evenly over the last `span`,
/// oldest first, so acceptance order and time agree.
fn accepted_at(i: usize, runs: usize, now: i64, span: i64) -> i64 {
    now - span + span * i as i64 / runs.max(1) as i64
}

async fn seed_one(
    store: &Arc<dyn Store>,
    i: usize,
    runs: usize,
    threads: usize,
    now: i64,
    span: i64,
) -> Result<()> {
    let run_id = format!("run_seed_{i:08}");
    let at = accepted_at(i, runs, now, span);
    store
        .create_run(NewRun {
            run_id: run_id.clone(),
            thread_key: format!("api:seed-{:06}", i % threads),
            user_key: format!("api:user:seed-{}", i % 1000),
            source: "api".into(),
            input: "a question".into(),
            idempotency_key: None,
            created_at: at,
            scope: None,
            roles: Vec::new(),
            parent_run_id: None,
        })
        .await?;
    let failed = i.is_multiple_of(50);
    store
        .finish_run(RunFinish {
            run_id: run_id.clone(),
            status: if failed {
                RunStatus::Failed
            } else {
                RunStatus::Succeeded
            },
            output: (!failed).then(|| "an answer".to_owned()),
            error_code: failed.then(|| "provider_error".to_owned()),
            error_message: failed.then(|| "the seeded provider failed".to_owned()),
            messages: vec![
                Message::text(
                    Role::User,
                    format!("question {i}: a line of ordinary length"),
                ),
                Message::text(
                    Role::Assistant,
                    format!("answer {i}: a line of ordinary length too"),
                ),
            ],
            steps: vec![StepRecord {
                run_id,
                index: 0,
                kind: StepKind::Llm,
                name: "fake/fake-model".into(),
                status: if failed {
                    StepStatus::Failed
                } else {
                    StepStatus::Succeeded
                },
                started_at: at,
                finished_at: Some(at + 800),
                tokens: Some(json!({ "input_tokens": 120, "output_tokens": 40 })),
                payload: json!({}),
            }],
            follow_ups: Vec::new(),
            finished_at: at + 900,
            last_event_seq: None,
            outbox: Vec::new(),
            arm_observations: Vec::new(),
            model: Some("fake/fake-model".into()),
            requested_model: None,
            executed_elsewhere: false,
        })
        .await?;
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let Some(home) = arg("--home").map(PathBuf::from) else {
        bail!("usage: hearth-seed-home --home DIR [--runs 1000000] [--threads 100000]");
    };
    let runs = number("--runs", 1_000_000)?;
    let threads = number("--threads", 100_000)?.clamp(1, runs.max(1));
    std::fs::create_dir_all(&home).with_context(|| format!("creating {}", home.display()))?;
    let db = home.join("hearth.db");
    let store: Arc<dyn Store> = Arc::new(
        SqliteStore::open(&db, Durability::Normal)
            .with_context(|| format!("opening {}", db.display()))?,
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .context("the clock is before 1970")?
        .as_millis() as i64;
    let span = 30 * DAY_MS;
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            for i in (w..runs).step_by(WRITERS) {
                seed_one(&store, i, runs, threads, now, span).await?;
                if w == 0 && i.is_multiple_of(50_000) && i > 0 {
                    eprintln!("{i} runs written");
                }
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    drop(store);
    // One model call per run for the usage pages, in large transactions
    // (the store records calls one by one as runs make them).
    let mut conn = rusqlite::Connection::open(&db)?;
    let tx = conn.transaction()?;
    {
        let mut ins = tx.prepare(
            "INSERT OR IGNORE INTO llm_calls (run_id, idx, at, provider, model, purpose, input_tokens, \
             output_tokens, latency_ms, status) VALUES (?1, 0, ?2, 'fake', ?3, 'answer', 120, 40, 800, 'ok')",
        )?;
        for i in 0..runs {
            let at = accepted_at(i, runs, now, span);
            let model = if i % 3 == 0 {
                "other-model"
            } else {
                "fake-model"
            };
            ins.execute(rusqlite::params![format!("run_seed_{i:08}"), at, model])?;
        }
    }
    tx.commit()?;
    println!(
        "seeded {runs} runs on {threads} threads in {} ({:.0} s); serve it with: hearth serve --home {}",
        db.display(),
        t0.elapsed().as_secs_f64(),
        home.display()
    );
    Ok(())
}
