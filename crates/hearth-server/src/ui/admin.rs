//! The operator's pages: budget, router, jobs, channels (pairings, outbox),
//! MCP servers, skills and the effective settings. Each
//! reads the `/v1` handler of the same name and shows its answer.

use axum::Extension;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect};
use maud::{Markup, html};
use serde_json::Value;

use super::layout::{self, PageResult, button_form, empty, fail, page, usd};
use super::session::{Viewer, encode};
use crate::AppState;
use crate::extract::{ApiPath, ApiQuery};
use crate::routes::channels::{ChannelsHandle, OutboxParams};
use crate::routes::{
    budget as v1_budget, channels as v1_channels, config, jobs as v1_jobs, mcp as v1_mcp,
    router as v1_router, skills as v1_skills,
};

/// One cell of a JSON value.
fn cell(v: &Value) -> Markup {
    html! {
        @match v {
            Value::Null => "–",
            Value::String(s) => (s),
            Value::Bool(b) => @if *b { "yes" } @else { "no" },
            Value::Number(n) => (n),
            other => code { (other) },
        }
    }
}

/// A table of `items` (objects) with `columns` (field, heading), and an
/// optional last column of actions per item.
pub fn json_table(
    id: &str,
    items: &[Value],
    columns: &[(&str, &str)],
    actions: Option<&dyn Fn(&Value) -> Markup>,
) -> Markup {
    html! {
        @if items.is_empty() { (empty("Nothing here yet.")) } @else {
            div.scroll { table id=(id) {
                thead { tr { @for (_, h) in columns { th { (h) } } @if actions.is_some() { th { "Actions" } } } }
                tbody { @for it in items { tr {
                    @for (k, _) in columns { td { (cell(it.get(*k).unwrap_or(&Value::Null))) } }
                    @if let Some(a) = actions { td { (a(it)) } }
                } } }
            } }
        }
    }
}

pub fn values<T: serde::Serialize>(items: &[T]) -> Vec<Value> {
    items
        .iter()
        .filter_map(|i| serde_json::to_value(i).ok())
        .collect()
}

/// `/ui/budget`: each pool with its limit, use, reservations and reset.
pub async fn budget(
    State(st): State<AppState>,
    Extension(viewer): Extension<Viewer>,
) -> PageResult {
    let pools = v1_budget::budget(State(st)).await.0.pools;
    let body = html! {
        @if pools.is_empty() { (empty("No budget pools are configured ([budget] in hearth.toml).")) }
        @else { ul.cards { @for p in &pools { li.card {
            h2 { (p.name) } p.meta { (p.kind) " · " (p.scope) @if let Some(s) = &p.subject { " · " (s) } }
            @let unit = |x: f64| if p.kind.contains("usd") || p.kind.contains("cost") { usd(x) } else { format!("{x}") };
            meter min="0" max=(p.limit) value=(p.used + p.reserved) high=(p.limit * 0.8) aria-label={ (p.name) " used" } {}
            p { (unit(p.used)) " used + " (unit(p.reserved)) " reserved of " (unit(p.limit)) " · resets " (layout::time_str(&p.resets_at)) }
        } } } }
    };
    Ok(page(&viewer, "/ui/budget", "Budget", None, body).into_response())
}

/// `/ui/router`: each arm's posterior mean and 90 % interval per task.
pub async fn router(
    State(st): State<AppState>,
    Extension(viewer): Extension<Viewer>,
) -> PageResult {
    let view = v1_router::get_router(State(st)).await.0;
    let body = html! {
        p { "Strategy: " strong { (view.strategy) } }
        @if view.arms.is_empty() { (empty("The router has not learnt anything yet (or is off).")) } @else {
            div.scroll { table #arms {
                thead { tr { th { "Task" } th { "Model" } th { "Mean" } th { "Interval (approx. 90 %)" } th { "Runs" } th { "Failure rate" } } }
                tbody { @for a in &view.arms {
                    @let n = a.alpha + a.beta;
                    @let mean = a.alpha / n;
                    @let sd = (a.alpha * a.beta / (n * n * (n + 1.0))).sqrt();
                    tr { td { (a.task) } td { (a.model) } td.num { (format!("{mean:.2}")) }
                        td.num { (format!("{:.2} – {:.2}", (mean - 1.645 * sd).max(0.0), (mean + 1.645 * sd).min(1.0))) }
                        td.num { (a.runs) } td.num { (format!("{:.0} %", (1.0 - mean) * 100.0)) } }
                } }
            } }
        }
    };
    Ok(page(&viewer, "/ui/router", "Router", None, body).into_response())
}

/// `/ui/jobs`: schedules, next and last firing, Run now, Enable/Disable.
pub async fn jobs(State(st): State<AppState>, Extension(viewer): Extension<Viewer>) -> PageResult {
    let jobs = v1_jobs::list_jobs(State(st)).await.map_err(fail)?.0.jobs;
    let actions = |j: &Value| {
        let id = encode(j.get("id").and_then(Value::as_str).unwrap_or(""));
        let enabled = j.get("enabled").and_then(Value::as_bool).unwrap_or(false);
        html! {
            (button_form(&viewer, &format!("/ui/jobs/{id}/run"), "Run now", ""))
            " "
            @if enabled { (button_form(&viewer, &format!("/ui/jobs/{id}/disable"), "Disable", "danger")) }
            @else { (button_form(&viewer, &format!("/ui/jobs/{id}/enable"), "Enable", "")) }
        }
    };
    let body = json_table(
        "jobs",
        &values(&jobs),
        &[
            ("name", "Name"),
            ("schedule", "Schedule"),
            ("timezone", "Zone"),
            ("thread_key", "Thread"),
            ("next_run_at", "Next"),
            ("last_run_at", "Last"),
            ("last_run_id", "Last run"),
            ("enabled", "Enabled"),
        ],
        Some(&actions),
    );
    Ok(page(&viewer, "/ui/jobs", "Jobs", None, body).into_response())
}

/// Fires a job now.
pub async fn run_job(State(st): State<AppState>, ApiPath(id): ApiPath<String>) -> PageResult {
    let (_, env) = v1_jobs::run_job(State(st), ApiPath(id))
        .await
        .map_err(fail)?;
    Ok(Redirect::to(&format!("/ui/runs/{}", encode(&env.run_id))).into_response())
}

/// Enables (`enable`) or disables (`disable`) a job, then shows the jobs.
pub async fn toggle_job(
    State(st): State<AppState>,
    ApiPath((id, action)): ApiPath<(String, String)>,
) -> PageResult {
    let enabled = match action.as_str() {
        "enable" => true,
        "disable" => false,
        _ => {
            return Err(layout::status_page(
                StatusCode::NOT_FOUND,
                "Not found",
                "Enable or disable a job.",
            ));
        }
    };
    let _ = v1_jobs::patch_job(
        State(st),
        ApiPath(id),
        crate::extract::ApiJson(v1_jobs::JobPatch { enabled }),
    )
    .await
    .map_err(fail)?;
    Ok(Redirect::to("/ui/jobs").into_response())
}

/// `/ui/channels`: status, pending pairings, and the outbox's failures.
pub async fn channels(
    State(_st): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    Extension(ch): Extension<ChannelsHandle>,
) -> PageResult {
    let list = v1_channels::list_channels(Extension(ch.clone()))
        .await
        .map_err(fail)?
        .0
        .channels;
    let pairings = v1_channels::list_pairings(Extension(ch.clone()))
        .await
        .map_err(fail)?
        .0
        .pairings;
    // The deliveries not done yet, one page of each state, by conversation.
    let mut outbox = Vec::new();
    for status in ["failed", "pending"] {
        if let Ok(o) = v1_channels::list_outbox(
            Extension(ch.clone()),
            ApiQuery(OutboxParams {
                status: Some(status.into()),
                limit: Some(OUTBOX_PAGE),
            }),
        )
        .await
        {
            outbox.extend(o.0.items);
        }
    }
    let conversations = by_conversation(values(&outbox));
    let mut allowed = Vec::new();
    for c in list.iter().filter(|c| c.enabled) {
        if let Ok(a) =
            v1_channels::list_allowed(Extension(ch.clone()), ApiPath(c.name.clone())).await
        {
            for u in a.0.users {
                let mut v = serde_json::to_value(&u).unwrap_or(Value::Null);
                v["channel"] = Value::String(c.name.clone());
                allowed.push(v);
            }
        }
    }
    let pair_actions = |p: &Value| {
        let code = encode(p.get("code").and_then(Value::as_str).unwrap_or(""));
        html! { (button_form(&viewer, &format!("/ui/pairings/{code}/approve"), "Approve", "")) " " (button_form(&viewer, &format!("/ui/pairings/{code}/deny"), "Deny", "danger")) }
    };
    let retry = |o: &Value| {
        let id = o.get("id").and_then(Value::as_i64).unwrap_or(0);
        html! {
            @if o.get("status").and_then(Value::as_str) == Some("failed") {
                (button_form(&viewer, &format!("/ui/outbox/{id}/retry"), "Retry", ""))
            }
        }
    };
    let body = html! {
        (json_table("channels", &values(&list), &[("name", "Channel"), ("enabled", "Enabled"), ("state", "State"), ("last_event_at", "Last event"), ("last_error", "Last error"), ("outbox_pending", "Outbox pending")], None))
        h2 { "Pairing requests" }
        (json_table("pairings", &values(&pairings), &[("code", "Code"), ("channel", "Channel"), ("user_key", "User"), ("display_name", "Name"), ("expires_at", "Expires")], Some(&pair_actions)))
        h2 { "Allowed users" }
        (json_table("allowed", &allowed, &[("channel", "Channel"), ("user_key", "User"), ("via", "Via"), ("added_at", "Added")], None))
        h2 { "Outbox by conversation" }
        p.hint { "Deliveries not done yet: failed ones (Retry queues one again) and pending ones." }
        @if conversations.is_empty() { (empty("Every reply has been delivered.")) }
        @for (i, ((channel, target), items)) in conversations.iter().enumerate() {
            section.conversation data-target=(target) {
                h3 { (channel) " · " (target) }
                (json_table(&format!("outbox-{i}"), items, &[("id", "Id"), ("status", "Status"), ("kind", "Kind"), ("run_id", "Run"), ("attempts", "Attempts"), ("next_attempt_at", "Next attempt"), ("last_error", "Last error")], Some(&retry)))
            }
        }
    };
    Ok(page(&viewer, "/ui/channels", "Channels", None, body).into_response())
}

/// Outbox items read per state for the channels page.
const OUTBOX_PAGE: u32 = 100;

/// Outbox items grouped by conversation (channel and target), the
/// conversations in order of their first item, each's items oldest first.
fn by_conversation(items: Vec<Value>) -> Vec<((String, String), Vec<Value>)> {
    let mut out: Vec<((String, String), Vec<Value>)> = Vec::new();
    for it in items {
        let field = |k: &str| it.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        let key = (field("channel"), field("target"));
        match out.iter_mut().find(|(k, _)| *k == key) {
            Some((_, list)) => list.push(it),
            None => out.push((key, vec![it])),
        }
    }
    for (_, list) in &mut out {
        list.sort_by_key(|i| i.get("id").and_then(Value::as_i64).unwrap_or(0));
    }
    out
}

/// Retries a failed delivery.
pub async fn retry_outbox(
    Extension(ch): Extension<ChannelsHandle>,
    ApiPath(id): ApiPath<i64>,
) -> PageResult {
    let _ = v1_channels::retry_outbox(Extension(ch), ApiPath(id))
        .await
        .map_err(fail)?;
    Ok(Redirect::to("/ui/channels").into_response())
}

/// Approves or denies a pairing code.
pub async fn answer_pairing(
    Extension(ch): Extension<ChannelsHandle>,
    ApiPath((code, verdict)): ApiPath<(String, String)>,
) -> PageResult {
    match verdict.as_str() {
        "approve" => {
            let _ = v1_channels::approve_pairing(Extension(ch), ApiPath(code))
                .await
                .map_err(fail)?;
        }
        "deny" => {
            let _ = v1_channels::deny_pairing(Extension(ch), ApiPath(code))
                .await
                .map_err(fail)?;
        }
        _ => {
            return Err(layout::status_page(
                StatusCode::NOT_FOUND,
                "Not found",
                "Approve or deny a pairing.",
            ));
        }
    }
    Ok(Redirect::to("/ui/channels").into_response())
}

/// `/ui/mcp`: the MCP servers, each with Reload (a new connection and
/// tool list at once).
pub async fn mcp(State(st): State<AppState>, Extension(viewer): Extension<Viewer>) -> PageResult {
    let servers = v1_mcp::servers(State(st)).await.0.servers;
    let reload = |s: &Value| {
        let name = encode(s.get("name").and_then(Value::as_str).unwrap_or(""));
        button_form(&viewer, &format!("/ui/mcp/{name}/reload"), "Reload", "")
    };
    let body = json_table(
        "mcp",
        &values(&servers),
        &[
            ("name", "Server"),
            ("transport", "Transport"),
            ("state", "State"),
            ("tools", "Tools"),
            ("last_error", "Last error"),
        ],
        Some(&reload),
    );
    Ok(page(&viewer, "/ui/mcp", "MCP servers", None, body).into_response())
}

/// Restarts one MCP server, then shows the servers.
pub async fn reload_mcp(State(st): State<AppState>, ApiPath(name): ApiPath<String>) -> PageResult {
    let _ = v1_mcp::restart(State(st), ApiPath(name))
        .await
        .map_err(fail)?;
    Ok(Redirect::to("/ui/mcp").into_response())
}

/// `/ui/skills`: the skills and why any is not eligible; Reload.
pub async fn skills(
    State(st): State<AppState>,
    Extension(viewer): Extension<Viewer>,
) -> PageResult {
    let skills = v1_skills::skills(State(st)).await.0.skills;
    let body = html! {
        (button_form(&viewer, "/ui/skills/reload", "Reload skills", ""))
        (json_table("skills", &values(&skills), &[("name", "Skill"), ("description", "Description"), ("source", "Source"), ("eligible", "Eligible"), ("reason", "Why not"), ("signed", "Signed")], None))
    };
    Ok(page(&viewer, "/ui/skills", "Skills", None, body).into_response())
}

/// Reads the skills again.
pub async fn reload_skills(State(st): State<AppState>) -> PageResult {
    let _ = v1_skills::reload(State(st)).await.map_err(fail)?;
    Ok(Redirect::to("/ui/skills").into_response())
}

/// `/ui/settings`: the effective configuration, secrets as `<set>`/`<unset>`.
pub async fn settings(
    State(st): State<AppState>,
    Extension(viewer): Extension<Viewer>,
) -> PageResult {
    let shown = config::show_config(State(st)).await.0;
    let body = html! {
        p { "Loaded " (layout::time_str(&shown.loaded_at)) ". Read-only: change hearth.toml and reload." }
        @for (name, section) in &shown.sections {
            section {
                h2 { "[" (name) "]" }
                pre.config { (serde_json::to_string_pretty(section).unwrap_or_default()) }
            }
        }
    };
    Ok(page(&viewer, "/ui/settings", "Settings", None, body).into_response())
}
