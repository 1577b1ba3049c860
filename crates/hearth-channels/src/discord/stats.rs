//! `/agent stats`: run health of the guild the command is used in (the runs
//! stored with its scope) over the last hour, day and week: counts by
//! status, latency p50/p95 and the most called tools. Nothing per user.

use hearth_core::records::RunStats;
use hearth_core::{RunStatus, now_ms};

use super::interactions::{is_guild_admin, private};
use super::types::{Interaction, User};
use super::{Dc, guild_scope, is_snowflake};
use crate::error::ChannelError;

/// The windows reported, with their names.
const WINDOWS: [(&str, i64); 3] = [
    ("Last hour", 3_600_000),
    ("Last 24 hours", 86_400_000),
    ("Last 7 days", 7 * 86_400_000),
];

/// Answers `/agent stats` privately to the member who asked, when they are
/// an admin of the guild (its owner, or Administrator): the guild's run
/// health is the admins' business, not every member's.
pub(super) async fn command(dc: &Dc, i: &Interaction, actor: &User) -> Result<(), ChannelError> {
    let Some(guild) = i.guild_id.as_deref().filter(|g| is_snowflake(g)) else {
        private(dc, i, "Use this command in a server.").await;
        return Ok(());
    };
    if !is_guild_admin(dc, i, actor) {
        private(
            dc,
            i,
            "Only server admins (the owner, or members with Administrator) can see this server's run health.",
        )
        .await;
        return Ok(());
    }
    let scope = guild_scope(guild);
    let now = now_ms();
    let mut lines = vec!["Runs asked in this server:".to_owned()];
    for (name, span) in WINDOWS {
        let stats = dc.runtime.run_stats(&scope, now - span).await?;
        lines.push(format!("{name}: {}", window_text(&stats)));
    }
    private(dc, i, &lines.join("\n")).await;
    Ok(())
}

/// One window's line.
fn window_text(stats: &RunStats) -> String {
    let total = stats.total();
    if total == 0 {
        return "no runs.".to_owned();
    }
    let counts: Vec<String> = stats
        .by_status
        .iter()
        .map(|(status, n)| format!("{n} {}", status_word(*status)))
        .collect();
    let mut text = format!(
        "{total} run{} ({})",
        if total == 1 { "" } else { "s" },
        counts.join(", ")
    );
    if let (Some(p50), Some(p95)) = (stats.latency_p50_ms, stats.latency_p95_ms) {
        text.push_str(&format!(
            "; latency p50 {}, p95 {}",
            duration(p50),
            duration(p95)
        ));
    }
    if !stats.top_tools.is_empty() {
        let tools: Vec<String> = stats
            .top_tools
            .iter()
            .map(|(name, n)| format!("{name} ×{n}"))
            .collect();
        text.push_str(&format!("; top tools {}", tools.join(", ")));
    }
    text.push('.');
    text
}

fn status_word(status: RunStatus) -> &'static str {
    match status {
        RunStatus::Queued => "queued",
        RunStatus::Running => "running",
        RunStatus::AwaitingConfirmation => "awaiting confirmation",
        RunStatus::Succeeded => "succeeded",
        RunStatus::Failed => "failed",
        RunStatus::Cancelled => "cancelled",
    }
}

/// Milliseconds below a second, else seconds with one decimal.
fn duration(ms: u64) -> String {
    if ms < 1_000 {
        format!("{ms} ms")
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_reads_as_one_line_and_an_empty_one_says_so() {
        let stats = RunStats {
            by_status: vec![(RunStatus::Succeeded, 3), (RunStatus::Failed, 1)],
            latency_p50_ms: Some(850),
            latency_p95_ms: Some(2_340),
            top_tools: vec![("web_fetch".into(), 4), ("memory_search".into(), 1)],
        };
        assert_eq!(
            window_text(&stats),
            "4 runs (3 succeeded, 1 failed); latency p50 850 ms, p95 2.3 s; \
             top tools web_fetch ×4, memory_search ×1."
        );
        assert_eq!(window_text(&RunStats::default()), "no runs.");
        let one = RunStats {
            by_status: vec![(RunStatus::Queued, 1)],
            ..RunStats::default()
        };
        assert_eq!(window_text(&one), "1 run (1 queued).");
    }
}
