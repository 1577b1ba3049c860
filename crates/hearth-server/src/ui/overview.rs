//! `/ui`: the overview. The live part (`/ui/live`) is redrawn when the
//! page's event stream tells of a run or a notice.

use axum::Extension;
use axum::extract::State;
use axum::response::IntoResponse;
use hearth_core::RunStatus;
use hearth_core::records::RunFilter;
use maud::{Markup, html};

use super::layout::{self, Fragment, PageResult, badge, fail, page, usd};
use super::session::Viewer;
use crate::AppState;
use crate::extract::ApiQuery;
use crate::routes::channels::{ChannelsHandle, OutboxParams};
use crate::routes::{budget, channels, cluster};

/// Runs read for the last hour's rates: one page, never more (a busier
/// hour shows "at least").
const RECENT: u32 = 200;
/// Counted at most per status (beyond it the page says "100+"): the
/// overview is redrawn on every run change, so it reads little.
const COUNT_CAP: u32 = 100;

async fn count(st: &AppState, status: RunStatus) -> Result<String, crate::ApiError> {
    let n = st
        .runtime
        .list_runs(&RunFilter {
            thread_key: None,
            status: Some(status),
            limit: COUNT_CAP,
            ..Default::default()
        })
        .await?
        .len();
    Ok(if n >= COUNT_CAP as usize {
        format!("{COUNT_CAP}+")
    } else {
        n.to_string()
    })
}

async fn live_part(st: &AppState, ch: ChannelsHandle) -> Result<Markup, crate::ApiError> {
    let now = hearth_core::now_ms();
    let hour_ago = now - 3_600_000;
    let recent = st
        .runtime
        .list_runs(&RunFilter {
            thread_key: None,
            status: None,
            limit: RECENT,
            ..Default::default()
        })
        .await?;
    let last_hour: Vec<_> = recent
        .iter()
        .filter(|r| {
            r.created_at
                .parse::<jiff::Timestamp>()
                .is_ok_and(|t| t.as_millisecond() >= hour_ago)
        })
        .collect();
    let saturated = last_hour.len() >= RECENT as usize;
    // Runs and failures per five minutes over the hour, oldest first.
    let mut slots = [(0u32, 0u32); 12];
    for r in &last_hour {
        if let Ok(t) = r.created_at.parse::<jiff::Timestamp>() {
            let i = usize::try_from((t.as_millisecond() - hour_ago) / 300_000)
                .unwrap_or(0)
                .min(11);
            slots[i].0 += 1;
            if r.status == RunStatus::Failed {
                slots[i].1 += 1;
            }
        }
    }
    let ended = last_hour.iter().filter(|r| r.status.is_terminal()).count();
    let failed = last_hour
        .iter()
        .filter(|r| r.status == RunStatus::Failed)
        .count();
    let per_min = last_hour.len() as f64 / 60.0;
    let error_rate = if ended == 0 {
        0.0
    } else {
        failed as f64 * 100.0 / ended as f64
    };
    let queued = count(st, RunStatus::Queued).await?;
    let running = count(st, RunStatus::Running).await?;
    let waiting = count(st, RunStatus::AwaitingConfirmation).await?;
    let pools = budget::budget(State(st.clone())).await.0.pools;
    let chans = channels::list_channels(axum::Extension(ch.clone()))
        .await
        .map(|c| c.0.channels)
        .unwrap_or_default();
    let outbox = |status: &str| {
        let ch = ch.clone();
        let status = status.to_owned();
        async move {
            channels::list_outbox(
                axum::Extension(ch),
                ApiQuery(OutboxParams {
                    status: Some(status),
                    limit: Some(COUNT_CAP),
                }),
            )
            .await
            .map(|o| o.0.items.len())
            .unwrap_or(0)
        }
    };
    let (pending, failed_out) = (outbox("pending").await, outbox("failed").await);
    let replicas = if st.runtime.shares_store() {
        cluster::cluster(State(st.clone()))
            .await
            .ok()
            .map(|c| c.0.replicas)
    } else {
        None
    };
    Ok(html! {
        section.tiles aria-label="Runs" {
            div.tile { span.big #runs-per-min { (if per_min < 1.0 { format!("{per_min:.2}") } else { format!("{per_min:.1}") }) } span { "runs / min (last hour" @if saturated { ", at least" } ")" } }
            div.tile { span.big #error-rate { (format!("{error_rate:.0} %")) } span { "failed of those ended (last hour)" } }
            div.tile { span.big #queued { (queued) } span { "waiting" } }
            div.tile { span.big #running { (running) } span { "running" } }
            a.tile href="/ui/confirmations" { span.big #pending-confirmations { (waiting) } span { "awaiting confirmation" } }
            a.tile href="/ui/channels" { span.big #outbox-backlog { (pending) } span { "outbox pending, " (failed_out) " failed" } }
        }
        p.meta { "Runs per five minutes, last hour:" }
        (sparkline(&slots))
        h2 { "Today's spend" }
        @if pools.is_empty() { (layout::empty("No budget pools configured.")) } @else {
            ul.gauges { @for p in &pools { li {
                span { (p.name) " (" (p.scope) ")" }
                meter min="0" max=(p.limit) value=(p.used + p.reserved) high=(p.limit * 0.8) aria-label={ (p.name) " used" } {}
                span.meta { (if p.kind.contains("usd") || p.kind.contains("cost") { format!("{} of {}", usd(p.used), usd(p.limit)) } else { format!("{} of {}", p.used, p.limit) })
                    " · resets " (layout::time_str(&p.resets_at)) }
            } } }
        }
        h2 { "Channels" }
        @if chans.is_empty() { (layout::empty("No chat channel is enabled.")) } @else {
            ul.cards { @for c in &chans { li.card {
                strong { (c.name) } " " (badge(&c.state))
                p.meta { "last event " @if let Some(t) = &c.last_event_at { (layout::time_str(t)) } @else { "never" }
                    @if let Some(e) = &c.last_error { " · " (e) } }
            } } }
        }
        @if let Some(reps) = replicas {
            h2 { "Replicas" }
            ul.cards { @for r in &reps { li.card { span.mono { (r.id) } " at " (r.addr) p.meta { (r.runs_executing) " runs executing · seen " (layout::time_str(&r.last_seen)) } } } }
        }
    })
}

/// Runs (and failed ones) per five minutes over the last hour, as SVG bars.
fn sparkline(slots: &[(u32, u32); 12]) -> Markup {
    let max = slots.iter().map(|s| s.0).max().unwrap_or(0).max(1);
    let h = 40.0_f64;
    html! {
        svg.chart.spark #runs-hour viewBox="0 0 240 44" role="img" aria-labelledby="spark-title" {
            title #spark-title { "Runs per five minutes over the last hour (failed ones in red)" }
            @for (i, (n, failed)) in slots.iter().enumerate() {
                @let bh = f64::from(*n) / f64::from(max) * h;
                @let fh = f64::from(*failed) / f64::from(max) * h;
                rect.bar x=(i * 20 + 1) y=(h - bh) width="18" height=(bh) {}
                @if *failed > 0 { rect.fail x=(i * 20 + 1) y=(h - fh) width="18" height=(fh) {} }
            }
            line.axis x1="0" y1=(h + 0.5) x2="240" y2=(h + 0.5) {}
        }
    }
}

/// The overview page.
pub async fn show(
    State(st): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    Extension(ch): Extension<ChannelsHandle>,
) -> PageResult {
    let live = live_part(&st, ch).await.map_err(fail)?;
    let body = html! {
        div #live data-src="/ui/live" { (live) }
        p { a href="/ui/runs" { "All runs" } " · " a href="/ui/threads" { "Send a message" } }
    };
    Ok(page(&viewer, "/ui", "Overview", Some("overview"), body).into_response())
}

/// The overview's live part alone.
pub async fn live(
    State(st): State<AppState>,
    Extension(ch): Extension<ChannelsHandle>,
) -> PageResult {
    Ok(Fragment(live_part(&st, ch).await.map_err(fail)?).into_response())
}
