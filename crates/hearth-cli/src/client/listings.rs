//! `hearth runs list` and `hearth threads list|show|history`.

use hearth_core::RunEnvelope;
use hearth_server::dto::{History, RunList, ThreadList, ThreadRuntime};

use super::{Api, enc};
use crate::Exit;
use crate::cli::{RunsCommand, ThreadsCommand};
use crate::output::{print_json, shown, table};

/// `hearth runs ...`
pub(super) async fn runs(api: &Api, command: RunsCommand, json_out: bool) -> Result<(), Exit> {
    let RunsCommand::List {
        status,
        thread,
        since,
        limit,
    } = command;
    let since = since.as_deref().map(parse_since).transpose()?;
    let mut path = format!("/v1/runs?limit={limit}");
    if let Some(s) = &status {
        path.push_str(&format!("&status={}", enc(s)));
    }
    if let Some(t) = &thread {
        path.push_str(&format!("&thread_key={}", enc(t)));
    }
    let mut list: RunList = api.get(&path).await?;
    if let Some(since) = since {
        // The list is newest first; runs created before `since` are cut.
        list.runs.retain(|r| {
            r.created_at
                .parse::<jiff::Timestamp>()
                .is_ok_and(|at| at >= since)
        });
    }
    if json_out {
        print_json(&list);
        return Ok(());
    }
    if list.runs.is_empty() {
        println!("no runs");
        return Ok(());
    }
    let rows: Vec<Vec<String>> = list.runs.iter().map(run_row).collect();
    println!(
        "{}",
        table(
            &["run", "status", "thread", "user", "created"],
            &[false; 5],
            &rows
        )
    );
    Ok(())
}

fn run_row(r: &RunEnvelope) -> Vec<String> {
    vec![
        r.run_id.clone(),
        r.status.as_str().to_owned(),
        r.thread_key.clone(),
        r.user_key.clone(),
        r.created_at.clone(),
    ]
}

/// `--since`: an age back from now (`30m`, `24h`, `7d`) or an RFC 3339 time.
fn parse_since(raw: &str) -> Result<jiff::Timestamp, Exit> {
    let bad = || {
        Exit::config(anyhow::anyhow!(
            "--since {raw:?} is neither an age (30m, 24h, 7d) nor an RFC 3339 time \
             (2026-01-31T09:00:00Z)"
        ))
    };
    if let Ok(t) = raw.parse::<jiff::Timestamp>() {
        return Ok(t);
    }
    let (n, unit) = raw.split_at(raw.len().saturating_sub(1));
    let n: i64 = n.parse().map_err(|_| bad())?;
    let secs = match unit {
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => return Err(bad()),
    };
    let span = jiff::SignedDuration::from_secs(n.checked_mul(secs).ok_or_else(bad)?);
    jiff::Timestamp::now().checked_sub(span).map_err(|_| bad())
}

/// `hearth threads ...`
pub(super) async fn threads(
    api: &Api,
    command: ThreadsCommand,
    json_out: bool,
) -> Result<(), Exit> {
    match command {
        ThreadsCommand::List { limit } => {
            let list: ThreadList = api.get(&format!("/v1/threads?limit={limit}")).await?;
            if json_out {
                print_json(&list);
            } else if list.threads.is_empty() {
                println!("no threads");
            } else {
                let rows: Vec<Vec<String>> = list
                    .threads
                    .iter()
                    .map(|t| {
                        vec![
                            t.thread_key.clone(),
                            t.runs.to_string(),
                            t.last_run_at.clone(),
                        ]
                    })
                    .collect();
                println!(
                    "{}",
                    table(
                        &["thread", "runs", "last run"],
                        &[false, true, false],
                        &rows
                    )
                );
            }
        }
        ThreadsCommand::Show { key } => {
            let rt: ThreadRuntime = api
                .get(&format!("/v1/threads/{}/runtime", enc(&key)))
                .await?;
            if json_out {
                print_json(&rt);
            } else {
                println!("thread     {}", rt.thread_key);
                println!("model      {}", rt.model);
                println!("thinking   {}", rt.thinking);
                println!("incognito  {}", if rt.incognito { "on" } else { "off" });
                println!("messages   {}", rt.message_count);
            }
        }
        ThreadsCommand::History { key, limit } => {
            let h: History = api
                .get(&format!("/v1/threads/{}/history?limit={limit}", enc(&key)))
                .await?;
            if json_out {
                print_json(&h);
                return Ok(());
            }
            if h.messages.is_empty() {
                println!("no messages on {key}");
            }
            // The API gives the newest first; a conversation reads oldest first.
            for m in h.messages.iter().rev() {
                let mark = if m.compacted { " (summarised)" } else { "" };
                let text = m.text.as_deref().unwrap_or("(tool call or result)");
                println!("[{}] {}{mark}: {}", m.created_at, m.role, shown(text));
            }
            if let Some(before) = h.next_before {
                eprintln!(
                    "older messages exist: `hearth threads history {key} --limit N` with a larger N \
                     (or GET /v1/threads/{{key}}/history?before={before})"
                );
            }
        }
    }
    Ok(())
}
