//! A thread's settings: model, thinking level, incognito, new session.

use hearth_core::ThinkingLevel;
use hearth_server::dto::{Capabilities, Models, ThreadRuntime, UsageRow, UsageRows};
use reqwest::Method;
use serde::Serialize;
use serde_json::json;

use super::{Api, enc};
use crate::Exit;
use crate::cli::{ModelCommand, ThinkingCommand};
use crate::output::print_json;

fn thread_path(thread: &str, what: &str) -> String {
    format!("/v1/threads/{}/{what}", enc(thread))
}

/// `hearth model status --json`.
#[derive(Serialize)]
struct ModelStatus {
    thread_key: String,
    model: String,
    thinking: String,
    capabilities: Option<Capabilities>,
    today: Option<UsageRow>,
}

/// `hearth model ...`
pub(super) async fn model(api: &Api, command: ModelCommand, json_out: bool) -> Result<(), Exit> {
    match command {
        ModelCommand::List => {
            let models: Models = api.get("/v1/models").await?;
            if json_out {
                print_json(&models);
            } else {
                for m in &models.models {
                    let mark = if m.id == models.default { "*" } else { " " };
                    println!("{mark} {}", m.id);
                }
            }
            Ok(())
        }
        ModelCommand::Get { thread } => {
            let rt: ThreadRuntime = api.get(&thread_path(&thread, "runtime")).await?;
            print_or_json(&rt, &rt.model, json_out);
            Ok(())
        }
        ModelCommand::Status { thread } => status(api, thread, json_out).await,
        ModelCommand::Set { model, thread } => {
            let rt: ThreadRuntime = api
                .put(&thread_path(&thread, "model"), &json!({ "model": model }))
                .await?;
            print_or_json(&rt, &rt.model, json_out);
            Ok(())
        }
    }
}

/// The thread's model, its capabilities and today's usage.
async fn status(api: &Api, thread: String, json_out: bool) -> Result<(), Exit> {
    let rt: ThreadRuntime = api.get(&thread_path(&thread, "runtime")).await?;
    let models: Models = api.get("/v1/models").await?;
    let usage: UsageRows = api.get("/v1/usage?group_by=model&since=today").await?;
    let s = ModelStatus {
        capabilities: models
            .models
            .into_iter()
            .find(|m| m.id == rt.model)
            .map(|m| m.capabilities),
        today: usage.rows.into_iter().find(|r| r.key == rt.model),
        thread_key: thread,
        model: rt.model,
        thinking: rt.thinking,
    };
    if json_out {
        print_json(&s);
        return Ok(());
    }
    println!("thread        {}", s.thread_key);
    println!("model         {}", s.model);
    println!("thinking      {}", s.thinking);
    let on: Vec<&str> = s
        .capabilities
        .as_ref()
        .map(|c| {
            [
                ("tools", c.tools),
                ("parallel_tool_calls", c.parallel_tool_calls),
                ("streaming", c.streaming),
                ("usage_metrics", c.usage_metrics),
                ("json_mode", c.json_mode),
                ("thinking", c.thinking),
            ]
            .into_iter()
            .filter(|(_, on)| *on)
            .map(|(name, _)| name)
            .collect()
        })
        .unwrap_or_default();
    let caps = if on.is_empty() {
        "none".to_owned()
    } else {
        on.join(", ")
    };
    println!("capabilities  {caps}");
    if let Some(c) = &s.capabilities {
        if c.context_window_assumed {
            println!(
                "context       {} tokens (assumed: [agent] default_context_tokens; this model's \
                 window is not known, set it with model_capabilities.\"<model>\" = \
                 {{ context_window = N }} on its provider)",
                c.context_window
            );
        } else {
            println!("context       {} tokens", c.context_window);
        }
    }
    match &s.today {
        None => println!("today         no calls"),
        Some(r) => println!(
            "today         {} calls, {} in / {} out tokens, cost {}",
            r.calls,
            r.input_tokens,
            r.output_tokens,
            super::usage::cost_text(r)
        ),
    }
    Ok(())
}

/// `hearth thinking ...`; setting a level the thread's model cannot use
/// says so (the model runs with thinking off; the level is kept for a model
/// that has reasoning control).
pub(super) async fn thinking(
    api: &Api,
    command: ThinkingCommand,
    json_out: bool,
) -> Result<(), Exit> {
    match command {
        ThinkingCommand::Get { thread } => {
            let rt: ThreadRuntime = api.get(&thread_path(&thread, "runtime")).await?;
            print_or_json(&rt, &rt.thinking, json_out);
        }
        ThinkingCommand::Set { level, thread } => {
            let rt: ThreadRuntime = api
                .put(
                    &thread_path(&thread, "thinking"),
                    &json!({ "level": level }),
                )
                .await?;
            let asked = ThinkingLevel::parse(&level).map(ThinkingLevel::as_str);
            if let Some(asked) = asked.filter(|a| *a != rt.thinking) {
                eprintln!("{}", clamp_note(&rt, asked));
            }
            print_or_json(&rt, &rt.thinking, json_out);
        }
    }
    Ok(())
}

/// Why the effective level differs from the one asked for.
fn clamp_note(rt: &ThreadRuntime, asked: &str) -> String {
    format!(
        "note: {model} has no reasoning control, so it runs with thinking {now}; \
         `{asked}` is kept for when thread {thread} uses a model that has it \
         (`hearth model list`, `hearth model status`)",
        model = rt.model,
        now = rt.thinking,
        thread = rt.thread_key,
    )
}

/// `hearth incognito on|off|status`.
pub(super) async fn incognito(
    api: &Api,
    state: &str,
    thread: &str,
    json_out: bool,
) -> Result<(), Exit> {
    let rt: ThreadRuntime = match state {
        "status" => api.get(&thread_path(thread, "runtime")).await?,
        s => {
            api.put(
                &thread_path(thread, "incognito"),
                &json!({ "enabled": s == "on" }),
            )
            .await?
        }
    };
    let text = format!("incognito {}", if rt.incognito { "on" } else { "off" });
    print_or_json(&rt, &text, json_out);
    Ok(())
}

/// `hearth new`: cancels the thread's run and clears its history.
pub(super) async fn new_session(api: &Api, thread: &str, json_out: bool) -> Result<(), Exit> {
    let rt: ThreadRuntime = api
        .call(api.request(Method::DELETE, &thread_path(thread, "session")))
        .await?;
    let text = format!(
        "new session on {}: its run cancelled, its history cleared ({} messages left)",
        rt.thread_key, rt.message_count
    );
    print_or_json(&rt, &text, json_out);
    Ok(())
}

fn print_or_json(rt: &ThreadRuntime, text: &str, json_out: bool) {
    if json_out {
        print_json(rt);
    } else {
        println!("{text}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clamp_note_names_the_model_both_levels_and_where_to_look() {
        let rt = ThreadRuntime {
            thread_key: "cli:local".into(),
            model: "echo/echo".into(),
            thinking: "off".into(),
            incognito: false,
            message_count: 0,
            mode: hearth_server::dto::Mode::Ask,
            mode_expires_at: None,
        };
        let note = clamp_note(&rt, "high");
        for part in ["echo/echo", "thinking off", "`high` is kept", "cli:local"] {
            assert!(note.contains(part), "{part}: {note}");
        }
    }
}
