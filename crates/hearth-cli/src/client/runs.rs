//! Messages, runs, and answering a run's confirmation.

use hearth_core::{RunEnvelope, RunEventKind, RunStatus};
use reqwest::Method;
use serde::Serialize;
use serde_json::json;

use super::{Api, enc};
use crate::Exit;
use crate::cli::RunCommand;
use crate::output::print_json;

/// The longest wait the server allows for `POST /v1/messages`.
const MAX_WAIT_SECS: u64 = 600;

/// How often `wait` re-reads a run whose event stream ended early (a run
/// whose live log is gone replays only its stored lifecycle).
const FOLLOW_ATTEMPTS: usize = 3;

/// `hearth message`.
pub(super) struct Message {
    pub text: String,
    pub thread_key: String,
    pub user_key: String,
    pub wait: bool,
    pub timeout: u64,
    pub idempotency_key: Option<String>,
}

/// The body of `POST /v1/messages` (the server's `MessageRequest` is
/// deserialise-only, and strict about unknown fields).
#[derive(Serialize)]
struct MessageBody<'a> {
    text: &'a str,
    thread_key: &'a str,
    user_key: &'a str,
    source: &'static str,
    wait: bool,
    wait_timeout_secs: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    idempotency_key: Option<&'a str>,
}

/// Sends a message; with `--wait`, prints the answer, and a run still going
/// when the wait ends is an error exit (3) that says how to follow it.
pub(super) async fn message(api: &Api, m: Message, json_out: bool) -> Result<(), Exit> {
    let timeout = m.timeout.min(MAX_WAIT_SECS);
    let body = MessageBody {
        text: &m.text,
        thread_key: &m.thread_key,
        user_key: &m.user_key,
        source: "cli",
        wait: m.wait,
        wait_timeout_secs: timeout,
        idempotency_key: m.idempotency_key.as_deref(),
    };
    let env: RunEnvelope = api.post("/v1/messages", &body).await?;
    if m.wait && matches!(env.status, RunStatus::Queued | RunStatus::Running) {
        if json_out {
            print_json(&env);
        }
        return Err(Exit::pending(anyhow::anyhow!(
            "run {id} is still {status} after {timeout} s; it goes on in hearth. \
             Follow it with `hearth run wait {id}`, or stop it with `hearth run cancel {id}`",
            id = env.run_id,
            status = env.status.as_str(),
        )));
    }
    print_run(&env, json_out)
}

/// `hearth run ...`
pub(super) async fn run(api: &Api, command: RunCommand, json_out: bool) -> Result<(), Exit> {
    match command {
        RunCommand::Get { run_id } => {
            let env: RunEnvelope = api.get(&run_path(&run_id)).await?;
            print_run(&env, json_out)
        }
        RunCommand::Wait { run_id } => {
            let env = wait(api, &run_id, None).await?;
            print_run(&env, json_out)
        }
        RunCommand::Cancel { run_id } => {
            let path = format!("{}/cancel", run_path(&run_id));
            let env: RunEnvelope = api.call(api.request(Method::POST, &path)).await?;
            if json_out {
                print_json(&env);
            } else {
                println!("{} {}", env.run_id, env.status.as_str());
            }
            Ok(())
        }
    }
}

fn run_path(run_id: &str) -> String {
    format!("/v1/runs/{}", enc(run_id))
}

/// Waits until the run ends or asks a question other than `answered` (the
/// confirmation token just answered, whose request is replayed first).
pub(super) async fn wait(
    api: &Api,
    run_id: &str,
    answered: Option<&str>,
) -> Result<RunEnvelope, Exit> {
    // A question is new unless it carries the token just answered (after a
    // restart a question may carry no token: then it is new only when none
    // was answered).
    let new_question = |token: Option<&str>| answered.is_none() || token != answered;
    let settled = |env: &RunEnvelope| {
        env.status.is_terminal()
            || (env.status == RunStatus::AwaitingConfirmation
                && new_question(env.confirmation.as_ref().and_then(|c| c.token.as_deref())))
    };
    let mut env: RunEnvelope = api.get(&run_path(run_id)).await?;
    for _ in 0..FOLLOW_ATTEMPTS {
        if settled(&env) {
            break;
        }
        api.follow(run_id, |kind, data| {
            kind.is_terminal()
                || (kind == RunEventKind::ConfirmationRequired
                    && new_question(data["token"].as_str()))
        })
        .await?;
        env = api.get(&run_path(run_id)).await?;
    }
    Ok(env)
}

/// Approves or denies a confirmation as `user`; with `--wait`, waits for the
/// run to answer and prints it.
pub(super) async fn answer(
    api: &Api,
    token: &str,
    user: &str,
    approve: bool,
    wait_for_answer: bool,
    json_out: bool,
) -> Result<(), Exit> {
    let env: RunEnvelope = api
        .post(
            &format!("/v1/confirmations/{}", enc(token)),
            &json!({ "user_key": user, "approve": approve }),
        )
        .await?;
    let verb = if approve { "approved" } else { "denied" };
    if wait_for_answer {
        if !json_out {
            eprintln!("{verb}; waiting for run {} to answer", env.run_id);
        }
        let env = wait(api, &env.run_id, Some(token)).await?;
        return print_run(&env, json_out);
    }
    if json_out {
        print_json(&env);
    } else {
        println!("{verb}; run {} is {}", env.run_id, env.status.as_str());
        println!("see its answer with: hearth run wait {}", env.run_id);
    }
    Ok(())
}

/// Prints a run for people (the answer, or the status) or as JSON; a failed
/// or cancelled run is an error exit.
pub(super) fn print_run(env: &RunEnvelope, json_out: bool) -> Result<(), Exit> {
    if json_out {
        print_json(env);
    }
    match env.status {
        RunStatus::Succeeded => {
            if !json_out {
                let text = env.output.as_ref().map(|o| o.text.as_str());
                println!("{}", text.unwrap_or_default());
            }
            Ok(())
        }
        RunStatus::Failed => {
            let e = env
                .error
                .as_ref()
                .map(|e| format!("{} ({})", e.message, e.code))
                .unwrap_or_default();
            Err(anyhow::anyhow!("run {} failed: {e}", env.run_id).into())
        }
        RunStatus::Cancelled => Err(anyhow::anyhow!("run {} was cancelled", env.run_id).into()),
        RunStatus::AwaitingConfirmation => {
            if !json_out {
                let (summary, token) = env
                    .confirmation
                    .as_ref()
                    .map(|c| (c.summary.as_str(), c.token.as_deref()))
                    .unwrap_or_default();
                println!("run {} awaits confirmation: {summary}", env.run_id);
                match token {
                    Some(t) => {
                        println!("answer with: hearth confirm {t} --wait   (or: hearth deny {t})")
                    }
                    // After a restart only the token's hash is kept; the
                    // token shown when it was asked still works.
                    None => println!("answer with the token given when it was asked"),
                }
            }
            Ok(())
        }
        RunStatus::Queued | RunStatus::Running => {
            if !json_out {
                println!("{} {}", env.run_id, env.status.as_str());
            }
            Ok(())
        }
    }
}
