//! `hearth mode show|set`: a thread's permission mode, and running the plan
//! a `plan`-mode answer made.

use hearth_server::dto::{History, ModeSet, ThreadRuntime};
use serde_json::json;

use super::{Api, enc, runs};
use crate::Exit;
use crate::cli::ModeCommand;
use crate::output::print_json;

pub(crate) use hearth_core::mode::RUN_PLAN_PREFIX;

/// `hearth mode ...`
pub(super) async fn mode(api: &Api, command: ModeCommand, json_out: bool) -> Result<(), Exit> {
    match command {
        ModeCommand::Show { thread } => {
            let rt: ThreadRuntime = api.get(&format!("/v1/threads/{}", enc(&thread))).await?;
            if json_out {
                print_json(&rt);
            } else {
                println!("{}", line(&rt.mode_name(), rt.mode_expires_at.as_deref()));
            }
            Ok(())
        }
        ModeCommand::Set {
            mode,
            thread,
            expires_in,
            run_plan,
        } => {
            // Read before the mode changes, so a failure to find it leaves
            // the mode as it was.
            let plan = match run_plan {
                true => Some(last_plan(api, &thread).await?),
                false => None,
            };
            let mut body = json!({ "mode": mode });
            if let Some(secs) = expires_in {
                body["expires_in_secs"] = json!(secs);
            }
            let set: ModeSet = api
                .put(&format!("/v1/threads/{}/mode", enc(&thread)), &body)
                .await?;
            if json_out && plan.is_none() {
                print_json(&set);
            } else if !json_out {
                let name = serde_json::to_value(set.mode)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default();
                println!("{}", line(&name, set.expires_at.as_deref()));
            }
            let Some(plan) = plan else {
                return Ok(());
            };
            let msg = runs::Message {
                text: format!("{RUN_PLAN_PREFIX}{plan}"),
                thread_key: thread,
                user_key: "cli:user:local".into(),
                wait: true,
                timeout: 600,
                idempotency_key: None,
                stream: !json_out && std::io::IsTerminal::is_terminal(&std::io::stdout()),
                cancel_on_interrupt: false,
            };
            runs::message(api, msg, json_out).await
        }
    }
}

/// The text of the thread's last answer: the plan a `plan`-mode run gave.
async fn last_plan(api: &Api, thread: &str) -> Result<String, Exit> {
    let page: History = api
        .get(&format!("/v1/threads/{}/history?limit=50", enc(thread)))
        .await?;
    page.messages
        .into_iter()
        .find(|m| m.role == "assistant" && m.text.as_deref().is_some_and(|t| !t.trim().is_empty()))
        .and_then(|m| m.text)
        .ok_or_else(|| {
            Exit::config(anyhow::anyhow!(
                "thread {thread} has no answer to run as a plan; set `hearth mode set plan \
                 --thread {thread}`, ask for a plan, then run it with --run-plan"
            ))
        })
}

fn line(mode: &str, expires_at: Option<&str>) -> String {
    match expires_at {
        Some(at) => format!("mode {mode} (until {at})"),
        None => format!("mode {mode}"),
    }
}

trait ModeName {
    fn mode_name(&self) -> String;
}

impl ModeName for ThreadRuntime {
    fn mode_name(&self) -> String {
        serde_json::to_value(self.mode)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default()
    }
}
