//! Messages, runs, and answering a run's confirmation.

use std::io::Write;
use std::time::Duration;

use hearth_core::{RunEnvelope, RunEventKind, RunStatus};
use reqwest::Method;
use serde::Serialize;
use serde_json::json;

use super::{Api, enc};
use crate::Exit;
use crate::cli::RunCommand;
use crate::output::{print_json, shown};

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
    /// Print the answer's text as it is written (implies waiting).
    pub stream: bool,
    /// Cancel the run on Ctrl+C instead of leaving it going.
    pub cancel_on_interrupt: bool,
}

/// The body of `POST /v1/messages` (the server's `MessageRequest` is
/// deserialise-only, and strict about unknown fields).
#[derive(Serialize)]
struct MessageBody<'a> {
    text: &'a str,
    thread_key: &'a str,
    user_key: &'a str,
    source: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    idempotency_key: Option<&'a str>,
}

/// Sends a message; with `--wait` or streaming, waits for the answer and
/// prints it. A run still going when the wait ends is exit 3, one that asks
/// for a confirmation exit 4, and Ctrl+C while waiting exit 130; each says
/// how to follow the run.
///
/// The message is posted without the server's own wait, so the run id is
/// known while waiting: Ctrl+C can name it, and the answer can be streamed.
pub(super) async fn message(api: &Api, m: Message, json_out: bool) -> Result<(), Exit> {
    // Listening from before the post: a Ctrl+C during it still reports the
    // run once its id is known.
    let mut interrupt = interrupt_listener()?;
    let body = MessageBody {
        text: &m.text,
        thread_key: &m.thread_key,
        user_key: &m.user_key,
        source: "cli",
        idempotency_key: m.idempotency_key.as_deref(),
    };
    let env: RunEnvelope = api.post("/v1/messages", &body).await?;
    if !(m.wait || m.stream) {
        return print_run(&env, json_out, false);
    }
    let timeout = m.timeout.min(MAX_WAIT_SECS);
    let run_id = env.run_id.clone();
    let mut out = Streamed::new(m.stream);
    let waited = tokio::select! {
        r = tokio::time::timeout(
            Duration::from_secs(timeout),
            wait_streaming(api, &run_id, None, &mut out),
        ) => r,
        Some(()) = interrupt.recv() => {
            out.end_line();
            return Err(interrupted(api, &run_id, m.cancel_on_interrupt).await);
        }
    };
    out.end_line();
    let env = match waited {
        Ok(env) => env?,
        // The wait ran out; the run may have ended just then.
        Err(_) => api.get(&run_path(&run_id)).await?,
    };
    if matches!(env.status, RunStatus::Queued | RunStatus::Running) {
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
    if out.printed && env.status == RunStatus::Succeeded && !json_out {
        // The answer is on the screen already.
        return Ok(());
    }
    print_run(&env, json_out, true)
}

/// Listens for Ctrl+C (SIGINT).
fn interrupt_listener() -> Result<tokio::sync::mpsc::Receiver<()>, Exit> {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut sig = signal(SignalKind::interrupt())
            .map_err(|e| anyhow::anyhow!("cannot listen for Ctrl+C: {e}"))?;
        tokio::spawn(async move {
            if sig.recv().await.is_some() {
                let _ = tx.send(()).await;
            }
        });
    }
    #[cfg(not(unix))]
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            let _ = tx.send(()).await;
        }
    });
    Ok(rx)
}

/// What Ctrl+C while waiting does: says how to follow or cancel the run, or
/// cancels it.
async fn interrupted(api: &Api, run_id: &str, cancel: bool) -> Exit {
    if cancel {
        let path = format!("{}/cancel", run_path(run_id));
        return match api
            .call::<RunEnvelope>(api.request(Method::POST, &path))
            .await
        {
            Ok(env) => Exit::interrupted(anyhow::anyhow!(
                "interrupted; run {} {}",
                env.run_id,
                env.status.as_str()
            )),
            Err(e) => Exit::interrupted(anyhow::anyhow!(
                "interrupted; cancelling run {run_id} failed: {:#} (try `hearth run cancel {run_id}`)",
                e.error
            )),
        };
    }
    Exit::interrupted(anyhow::anyhow!(
        "interrupted; run {run_id} goes on in hearth. Follow it with `hearth run wait {run_id}`, \
         or stop it with `hearth run cancel {run_id}`"
    ))
}

/// The answer's text as it is written, printed on stdout when streaming.
struct Streamed {
    on: bool,
    /// Deltas seen so far: a replayed stream (after a broken one) repeats
    /// them first, and they are printed once.
    seen: usize,
    printed: bool,
    /// Whether the last text printed ended a line.
    at_line_start: bool,
}

impl Streamed {
    fn new(on: bool) -> Self {
        Self {
            on,
            seen: 0,
            printed: false,
            at_line_start: true,
        }
    }

    /// Prints the `index`-th delta of the stream once.
    fn delta(&mut self, index: usize, text: &str) {
        if !self.on || index < self.seen {
            return;
        }
        self.seen = index + 1;
        if text.is_empty() {
            return;
        }
        let mut stdout = std::io::stdout().lock();
        // A closed stdout ends the process by SIGPIPE (main.rs); any other
        // write error only loses the live view, the final status stands.
        let _ = stdout
            .write_all(shown(text).as_bytes())
            .and_then(|()| stdout.flush());
        self.printed = true;
        self.at_line_start = text.ends_with('\n');
    }

    /// Ends the streamed text's line, so what follows starts on its own.
    fn end_line(&mut self) {
        if self.printed && !self.at_line_start {
            println!();
            self.at_line_start = true;
        }
    }
}

/// `hearth run ...`
pub(super) async fn run(api: &Api, command: RunCommand, json_out: bool) -> Result<(), Exit> {
    match command {
        RunCommand::Get { run_id } => {
            let env: RunEnvelope = api.get(&run_path(&run_id)).await?;
            print_run(&env, json_out, false)
        }
        RunCommand::Wait { run_id } => {
            let mut interrupt = interrupt_listener()?;
            let env = wait_or_interrupt(api, &run_id, None, &mut interrupt).await?;
            print_run(&env, json_out, true)
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

/// [`wait`] until Ctrl+C arrives on `interrupt`: then exit 130 naming the
/// run and the commands to follow or cancel it (the run goes on), as
/// `hearth message` does.
async fn wait_or_interrupt(
    api: &Api,
    run_id: &str,
    answered: Option<&str>,
    interrupt: &mut tokio::sync::mpsc::Receiver<()>,
) -> Result<RunEnvelope, Exit> {
    tokio::select! {
        r = wait(api, run_id, answered) => r,
        Some(()) = interrupt.recv() => Err(interrupted(api, run_id, false).await),
    }
}

/// Waits until the run ends or asks a question other than `answered` (the
/// confirmation token just answered, whose request is replayed first).
pub(super) async fn wait(
    api: &Api,
    run_id: &str,
    answered: Option<&str>,
) -> Result<RunEnvelope, Exit> {
    wait_streaming(api, run_id, answered, &mut Streamed::new(false)).await
}

/// [`wait`], giving each text delta to `out`.
async fn wait_streaming(
    api: &Api,
    run_id: &str,
    answered: Option<&str>,
    out: &mut Streamed,
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
        let mut deltas = 0;
        api.follow(run_id, |kind, data| {
            if kind == RunEventKind::TextDelta {
                out.delta(deltas, data["text"].as_str().unwrap_or_default());
                deltas += 1;
            }
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
    // Listening from before the answer is posted (only when waiting: else
    // Ctrl+C keeps its default), so a Ctrl+C during the post still names
    // the run once it is known.
    let mut interrupt = if wait_for_answer {
        Some(interrupt_listener()?)
    } else {
        None
    };
    let env: RunEnvelope = api
        .post(
            &format!("/v1/confirmations/{}", enc(token)),
            &json!({ "user_key": user, "approve": approve }),
        )
        .await?;
    let verb = if approve { "approved" } else { "denied" };
    if let Some(interrupt) = &mut interrupt {
        if !json_out {
            eprintln!("{verb}; waiting for run {} to answer", env.run_id);
        }
        let env = wait_or_interrupt(api, &env.run_id, Some(token), interrupt).await?;
        return print_run(&env, json_out, true);
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
/// or cancelled run is an error exit, and so is one that asks for a
/// confirmation at the end of a wait (`waited`: exit 4).
pub(super) fn print_run(env: &RunEnvelope, json_out: bool, waited: bool) -> Result<(), Exit> {
    if json_out {
        print_json(env);
    }
    match env.status {
        RunStatus::Succeeded => {
            if !json_out {
                let text = env.output.as_ref().map(|o| o.text.as_str());
                println!("{}", shown(text.unwrap_or_default()));
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
                println!("run {} awaits confirmation: {}", env.run_id, shown(summary));
                match token {
                    Some(t) => {
                        println!("answer with: hearth confirm {t} --wait   (or: hearth deny {t})")
                    }
                    // After a restart only the token's hash is kept; the
                    // token shown when it was asked still works.
                    None => println!("answer with the token given when it was asked"),
                }
            }
            if waited {
                return Err(Exit::awaiting(anyhow::anyhow!(
                    "run {} stopped to ask for a confirmation; it goes on once answered \
                     (`hearth confirm <token> --wait` or `hearth deny <token>`)",
                    env.run_id
                )));
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

/// The message's text: the argument, or stdin for `-` or for no argument
/// when stdin is not a terminal (a pipe or a file: no length limit but the
/// server's).
pub(super) fn message_text(arg: Option<String>) -> Result<String, Exit> {
    use std::io::{IsTerminal, Read};
    match arg.as_deref() {
        Some("-") => {}
        Some(_) => return Ok(arg.unwrap_or_default()),
        None if std::io::stdin().is_terminal() => {
            return Err(Exit::config(anyhow::anyhow!(
                "no message text: give it as an argument (`hearth message \"hi\"`), or `-` \
                 to read it from stdin (`hearth message - < question.txt`)"
            )));
        }
        None => {}
    }
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|e| anyhow::anyhow!("cannot read the message from stdin: {e}"))?;
    // The newline a shell's echo or a file ends with is not part of it.
    let trimmed = text.trim_end_matches(['\n', '\r']).len();
    text.truncate(trimmed);
    Ok(text)
}
