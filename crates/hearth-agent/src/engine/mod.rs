//! The bounded agent loop.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use hearth_core::{Message, Role, RunError, RunEventKind, now_ms};
use hearth_llm::LlmError;
use hearth_llm::retry::RetryPolicy;
use hearth_store::{StepKind, StepRecord, StepStatus, Store, StoreError};
use hearth_tools::ToolRegistry;
use serde_json::{Value, json};

use crate::compaction::CompactionConfig;
use crate::confirm::{CONFIRMATION_TTL, ConfirmationHub};
mod bounded;
mod call;
mod compact;
mod confirm_gate;
mod direct;
mod offered;
mod run_io;
mod supplied;
mod tools;

pub use direct::{DIRECT_CALL_ID, DirectCall};
pub use run_io::{Candidate, ModelCall, Outcome, RunInput, RunResult, ToolMode};
use run_io::{ModelCalls, record_call, take_calls};

use self::tools::{ToolCall, push_tool_result};
use crate::budget::{Budget, Refusal};
use crate::context::{PromptHook, unanswered_calls};
use crate::firewall::SecretScanner;
use crate::limits::Limits;
use crate::policy::PolicyConfig;
use crate::wall::WallClock;

/// Where the engine publishes progress (`text.delta`, `tool.started`, ...).
pub trait EventSink: Send + Sync {
    /// Publishes one event of the run.
    fn emit(&self, kind: RunEventKind, data: Value);
}

/// Added to the system prompt in `plan` mode.
const PLAN_NOTE: &str = "\n\nThis thread is in plan mode: you may only read and look things up. \
Investigate what you need with the tools offered, change nothing, and answer with a numbered plan \
of the steps you would take. The user approves the plan before anything is done.";

/// Added to the system prompt in `deny` mode.
const DENY_NOTE: &str = "\n\nThis thread's permission mode offers no tools: answer from what you \
know and the conversation, and say what you would need to do something.";

/// Added to the system prompt when a model gets no tools.
const PROMPT_ONLY_NOTE: &str = "\n\nNo tools are available with this model: answer from what you \
know, and say so when something would need checking.";

/// The engine: shared by every run of the process.
pub struct Engine {
    store: Arc<dyn Store>,
    tools: ToolRegistry,
    limits: Limits,
    retry: RetryPolicy,
    system_prompt: String,
    /// Redacts secrets from everything that enters a request.
    scanner: SecretScanner,
    /// Who may use which tools.
    policy: PolicyConfig,
    /// Models whose server rejected tool definitions (model-dependent tools).
    no_tools: std::sync::Mutex<std::collections::HashSet<String>>,
    /// Sizes of the tools offered, for estimates.
    tool_sizes: crate::json_len::ToolSizes,
    /// Which write-class tools ask the user first.
    confirm: ConfirmPolicy,
    /// Runs waiting for an answer.
    hub: Arc<ConfirmationHub>,
    /// Adds the skill list (and an invoked skill) to the system prompt.
    prompt_hook: Option<PromptHook>,
    /// The hook's last text and its redacted form: the list is the same
    /// `Arc` until a reload, so it is scanned once per reload, not per call.
    redacted_section: std::sync::Mutex<(Arc<str>, Arc<str>)>,
    /// When and how the oldest turns are summarized.
    compaction: CompactionConfig,
    /// Limit pools every model call reserves from first.
    budget: Option<Arc<Budget>>,
    /// Summaries of client-supplied history, so the same history is
    /// summarized once.
    summaries: supplied::SummaryCache,
    /// Sent as each call's max tokens; `None` leaves the provider's default.
    max_output_tokens: Option<u32>,
    /// Tool lists offered lately, shared by the runs that offer the same.
    offered: offered::OfferedLists,
}

/// Which write-class calls need the user's confirmation.
#[derive(Debug, Clone)]
pub struct ConfirmPolicy {
    /// False: no call asks.
    pub confirm_writes: bool,
    /// Write-class tools that never ask.
    pub exempt: Vec<String>,
    /// How long a question stays answerable (5 minutes; shorter in tests).
    pub ttl: Duration,
    /// Globs over tool names: the writes `accept_edits` runs without asking.
    pub edit_tools: Vec<String>,
    /// Globs over tool names: writes that ask in `accept_edits` and `auto`.
    pub always_ask: Vec<String>,
}

impl Default for ConfirmPolicy {
    fn default() -> Self {
        Self {
            confirm_writes: true,
            exempt: Vec::new(),
            ttl: CONFIRMATION_TTL,
            edit_tools: [
                "*__write_file",
                "*__edit_file",
                "*__create_directory",
                "*__move_file",
            ]
            .map(String::from)
            .to_vec(),
            always_ask: ["memory_forget", "cancel_job"].map(String::from).to_vec(),
        }
    }
}

/// What a configuration reload may change in an engine
/// ([`Engine::reconfigured`]).
pub struct EngineSettings {
    /// The tools, with the channel profiles.
    pub tools: ToolRegistry,
    /// `[agent]` limits.
    pub limits: Limits,
    /// `[permissions]`.
    pub policy: PolicyConfig,
    /// `[tools] confirm_writes` and `no_confirm` (the lifetime is kept).
    pub confirm: ConfirmPolicy,
    /// `[agent]` compaction.
    pub compaction: CompactionConfig,
    /// `[llm.retry]`.
    pub retry: RetryPolicy,
    /// `[budget]` pools.
    pub budget: Option<Arc<Budget>>,
    /// `[agent] max_output_tokens`.
    pub max_output_tokens: Option<u32>,
}

/// An early end of the loop.
enum Stop {
    Failed(RunError),
    Cancelled,
}

impl From<StoreError> for Stop {
    fn from(e: StoreError) -> Self {
        Stop::Failed(RunError {
            code: "store_error".into(),
            message: format!("could not journal the run: {e}"),
        })
    }
}

fn limit(message: String) -> Stop {
    Stop::Failed(RunError {
        code: "limit_exceeded".into(),
        message,
    })
}

fn budget_exceeded(refusal: &Refusal) -> Stop {
    Stop::Failed(RunError {
        code: "budget_exceeded".into(),
        message: refusal.to_string(),
    })
}

fn llm_failure(e: &LlmError) -> Stop {
    Stop::Failed(RunError {
        code: format!("provider_{}", e.kind.as_str()),
        message: e.to_string(),
    })
}

/// The state of one run in progress.
struct Progress {
    /// Tools the run's user may use (channel and capabilities).
    allowed: Arc<[hearth_core::ToolSpec]>,
    /// Of those, the ones the run's permission mode offers to the model.
    offered: Arc<[hearth_core::ToolSpec]>,
    /// Stored steers not shown to the model yet (after a crash), by id.
    pending_steer: Vec<(i64, String)>,
    /// Steer ids already shown to the model.
    seen_steer: HashSet<i64>,
    history: Vec<Message>,
    /// Store ids of `history` (empty when its summaries are not stored:
    /// incognito or supplied history).
    history_ids: Vec<i64>,
    /// Estimated tokens of `history`, kept current as it is compacted.
    history_tokens: usize,
    /// `history` is the store's context of the thread as read (see
    /// `Loaded::as_read`): it is handed back to the store at the end.
    history_as_read: bool,
    /// The summary that replaces the turns before `history`, if any.
    summary: Option<String>,
    /// For a history the client supplied: its prefixes' hashes, under which
    /// the summaries made of it are cached.
    supplied: Option<supplied::Prefixes>,
    /// Sizes of `offered`, once an estimate needed them.
    tools_size: Option<crate::json_len::ListSize>,
    /// The run's model calls so far.
    calls: ModelCalls,
    scratch: Vec<Message>,
    next_index: u32,
    llm_calls: u32,
    tool_calls: u32,
    /// How each call of this process's part of the run ended, by call id.
    ends: Vec<(String, tools::CallEnd)>,
    /// A person called the tool directly (no model reads the result).
    direct: bool,
}

impl Engine {
    /// An engine over `store` and `tools`, with `system_prompt` sent first on every call.
    pub fn new(
        store: Arc<dyn Store>,
        tools: ToolRegistry,
        limits: Limits,
        system_prompt: String,
    ) -> Self {
        let scanner = SecretScanner::new();
        Self {
            store,
            tools,
            limits,
            retry: RetryPolicy::default(),
            // SYSTEM.md and AGENTS.md are the user's files; a key pasted into
            // them must not be sent either.
            system_prompt: scanner.redact(&system_prompt).text.into_owned(),
            scanner,
            policy: PolicyConfig::default(),
            no_tools: std::sync::Mutex::new(std::collections::HashSet::new()),
            tool_sizes: crate::json_len::ToolSizes::default(),
            confirm: ConfirmPolicy::default(),
            hub: Arc::new(ConfirmationHub::default()),
            prompt_hook: None,
            redacted_section: std::sync::Mutex::new((Arc::from(""), Arc::from(""))),
            compaction: CompactionConfig::default(),
            budget: None,
            summaries: supplied::SummaryCache::default(),
            max_output_tokens: None,
            offered: offered::OfferedLists::default(),
        }
    }

    /// Compacts per `compaction` instead of the default (on, at 0.75 of the
    /// window, 32k tokens for unknown windows).
    pub fn with_compaction(mut self, compaction: CompactionConfig) -> Self {
        self.compaction = compaction;
        self
    }

    /// Asks every model call for at most `max` answer tokens
    /// (`[agent] max_output_tokens`).
    pub fn with_max_output_tokens(mut self, max: u32) -> Self {
        self.max_output_tokens = Some(max);
        self
    }

    /// Makes every model call reserve from `budget`'s pools first.
    pub fn with_budget(mut self, budget: Arc<Budget>) -> Self {
        self.budget = Some(budget);
        self
    }

    /// The limit pools, when any are configured.
    pub fn budget(&self) -> Option<&Arc<Budget>> {
        self.budget.as_ref()
    }

    /// Adds `hook`'s text to the system prompt of every model call.
    pub fn with_prompt_hook(mut self, hook: PromptHook) -> Self {
        self.prompt_hook = Some(hook);
        self
    }

    /// The hook's text for `user_text`, with secrets redacted.
    fn prompt_section(&self, user_text: &str) -> Arc<str> {
        let Some(hook) = &self.prompt_hook else {
            return Arc::from("");
        };
        let raw = hook(user_text);
        let mut cache = self
            .redacted_section
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !Arc::ptr_eq(&cache.0, &raw) {
            let redacted: Arc<str> = Arc::from(self.scanner.redact(&raw).text.as_ref());
            *cache = (raw, redacted);
        }
        cache.1.clone()
    }

    /// Asks for confirmation per `confirm` instead of the default (every
    /// write-class tool asks).
    pub fn with_confirmations(mut self, confirm: ConfirmPolicy) -> Self {
        self.confirm = confirm;
        self
    }

    /// The runs of this engine waiting for a confirmation.
    pub fn confirmations(&self) -> &Arc<ConfirmationHub> {
        &self.hub
    }

    /// When and how the oldest turns are summarized.
    pub fn compaction(&self) -> &CompactionConfig {
        &self.compaction
    }

    /// The permission policy.
    pub fn policy(&self) -> &PolicyConfig {
        &self.policy
    }

    /// Decides tool permissions with `policy` instead of the default
    /// (`member` for everyone, no admins).
    pub fn with_policy(mut self, policy: PolicyConfig) -> Self {
        self.policy = policy;
        self
    }

    /// Uses `retry` for failed model calls instead of the default policy.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// The tool registry.
    pub fn tools(&self) -> &ToolRegistry {
        &self.tools
    }

    /// A new engine with `settings` in place of this one's, sharing what
    /// must outlive a configuration reload: the store, the system prompt and
    /// its hook, and the runs waiting for a confirmation (an answer given
    /// after the reload still reaches a run that asked before it). Runs in
    /// flight keep the engine they started with.
    pub fn reconfigured(&self, settings: EngineSettings) -> Self {
        let EngineSettings {
            tools,
            limits,
            policy,
            confirm,
            compaction,
            retry,
            budget,
            max_output_tokens,
        } = settings;
        Self {
            store: self.store.clone(),
            tools,
            limits,
            retry,
            system_prompt: self.system_prompt.clone(),
            scanner: self.scanner,
            policy,
            no_tools: std::sync::Mutex::new(std::collections::HashSet::new()),
            tool_sizes: crate::json_len::ToolSizes::default(),
            // A question's lifetime is the process's, not the file's.
            confirm: ConfirmPolicy {
                ttl: self.confirm.ttl,
                ..confirm
            },
            hub: self.hub.clone(),
            prompt_hook: self.prompt_hook.clone(),
            redacted_section: std::sync::Mutex::new((Arc::from(""), Arc::from(""))),
            compaction,
            budget,
            summaries: supplied::SummaryCache::default(),
            max_output_tokens,
            offered: offered::OfferedLists::default(),
        }
    }

    /// The steps `input` may take: `[agent] max_steps`, or fewer when its
    /// parent asked for fewer (a sub-agent).
    fn max_steps(&self, input: &RunInput) -> u32 {
        input
            .max_steps
            .map_or(self.limits.max_steps, |m| m.min(self.limits.max_steps))
    }

    /// Fails the run when it and the rest of its family (the run that
    /// started it, the sub-agents it started) have spent together what one
    /// run may: they share the `[agent]` limits. `tool` checks before a tool
    /// call, else before a model call.
    fn check_family(&self, input: &RunInput, p: &Progress, tool: bool) -> Result<(), Stop> {
        let Some(family) = &input.family else {
            return Ok(());
        };
        let own = crate::subagents::Spent {
            steps: p.next_index,
            tool_calls: p.tool_calls,
            llm_calls: p.llm_calls,
        };
        family.report(&input.run_id, own);
        let others = family.others(&input.run_id);
        if others == crate::subagents::Spent::default() {
            // Alone so far: its own limits are checked already.
            return Ok(());
        }
        let who = if crate::subagents::is_subagent(&input.thread_key) {
            "this sub-agent, the agent that started it and its other sub-agents"
        } else {
            "this run and its sub-agents"
        };
        let l = &self.limits;
        let (spent, cap, what) = if tool {
            (
                own.tool_calls + others.tool_calls,
                l.max_tool_calls,
                "max_tool_calls",
            )
        } else {
            (
                own.llm_calls + others.llm_calls,
                l.max_llm_calls,
                "max_llm_calls",
            )
        };
        if spent >= cap {
            return Err(limit(format!(
                "{who} together reached {what} = {cap} (they share the run's [agent] limits)"
            )));
        }
        if own.steps + others.steps >= l.max_steps {
            return Err(limit(format!(
                "{who} together reached max_steps = {} (they share the run's [agent] limits)",
                l.max_steps
            )));
        }
        Ok(())
    }

    /// The limits each run is held to.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Runs (or resumes) one run to its end. Never panics on provider or tool
    /// output; every failure becomes `Outcome::Failed` with a code and message.
    pub async fn run(&self, input: RunInput, sink: &dyn EventSink) -> RunResult {
        self.run_with_history(input, None, sink).await
    }

    /// As `run`, with `history` (when given) in place of the thread's stored
    /// history: for clients that resend the whole conversation with each
    /// message (the OpenAI-compatible surface). The same window and trimming
    /// apply to it as to a stored history.
    pub async fn run_with_history(
        &self,
        mut input: RunInput,
        history: Option<Vec<Message>>,
        sink: &dyn EventSink,
    ) -> RunResult {
        let cancel = input.cancel.clone();
        let max_wall = self.limits.max_wall;
        // A sub-agent spends its family's wall time, not a budget of its own.
        let family = input.family.clone();
        let own;
        let clock = match family.as_deref() {
            Some(f) => f.clock(),
            None => {
                own = WallClock::new(max_wall);
                &own
            }
        };
        let shared = family.is_some() && crate::subagents::is_subagent(&input.thread_key);
        let calls = ModelCalls::default();
        let body = self.drive(&mut input, history, sink, clock, &calls);
        let bounded::Bounded { result, cut } = bounded::bounded(body, &cancel, clock, || {
            let who = if shared {
                "the run and the agent that started it"
            } else {
                "the run"
            };
            format!(
                "{who} took longer than max_wall_secs = {} s and was stopped",
                max_wall.as_secs()
            )
        })
        .await;
        let (cut_off, model_calls) = take_calls(&calls);
        if let Some(step) = cut_off {
            self.journal_cut_off(&input, step).await;
        }
        if cut {
            self.mark_cut_calls(&input).await;
        }
        // Closing first makes later steer attempts fail (the runtime then
        // queues them as follow-ups); draining returns the ones that got in.
        // A steer the run showed the model (read from the store when it
        // resumed) may also sit in the inbox: it is answered, not unseen.
        let (result, seen) = match result {
            Ok((text, messages, steps, seen)) => (Ok((text, messages, steps)), seen),
            Err(e) => (Err(e), HashSet::new()),
        };
        let mut unseen_steer = Vec::new();
        if let Some(rx) = input.steer.as_mut() {
            rx.close();
            while let Ok((id, t)) = rx.try_recv() {
                if !seen.contains(&id) {
                    unseen_steer.push(t);
                }
            }
        }
        let (outcome, messages, steps) = match result {
            Ok((text, messages, steps)) => (Outcome::Succeeded(text), messages, steps),
            Err(Stop::Failed(e)) => (Outcome::Failed(e), Vec::new(), Vec::new()),
            Err(Stop::Cancelled) => (Outcome::Cancelled, Vec::new(), Vec::new()),
        };
        RunResult {
            outcome,
            messages,
            steps,
            unseen_steer,
            model_calls,
        }
    }

    async fn drive(
        &self,
        input: &mut RunInput,
        history: Option<Vec<Message>>,
        sink: &dyn EventSink,
        clock: &WallClock,
        calls: &ModelCalls,
    ) -> Result<(String, Vec<Message>, Vec<StepRecord>, HashSet<i64>), Stop> {
        let mut p = self.resume(input, history, calls.clone()).await?;
        loop {
            // Tool calls of the last model turn that have no result yet run first
            // (also after a crash between a model call and its tools).
            if let Some(pending) = self.pending_calls(&p) {
                self.run_tools(input, sink, &mut p, pending, clock).await?;
                continue;
            }
            if p.llm_calls >= self.limits.max_llm_calls {
                return Err(limit(format!(
                    "the run made max_llm_calls = {} model calls without finishing",
                    self.limits.max_llm_calls
                )));
            }
            let max_steps = self.max_steps(input);
            if p.next_index >= max_steps {
                return Err(limit(format!(
                    "the run reached max_steps = {max_steps} without finishing"
                )));
            }
            self.check_family(input, &p, false)?;
            let mut incoming = std::mem::take(&mut p.pending_steer);
            if let Some(rx) = input.steer.as_mut() {
                while let Ok(s) = rx.try_recv() {
                    incoming.push(s);
                }
            }
            let mut steered = Vec::new();
            for (id, text) in incoming {
                if p.seen_steer.insert(id) {
                    p.scratch.push(Message::text(Role::User, text.clone()));
                    steered.push(json!({ "id": id, "text": text }));
                }
            }
            self.compact_if_needed(input, &mut p).await?;
            let step_started = now_ms();
            let (turn, answered_by) = self.call_model(input, sink, &mut p).await?;
            p.llm_calls += 1;
            let step = StepRecord {
                run_id: input.run_id.clone(),
                index: p.next_index,
                kind: StepKind::Llm,
                name: answered_by.to_string(),
                status: StepStatus::Succeeded,
                started_at: step_started,
                finished_at: Some(now_ms()),
                tokens: serde_json::to_value(turn.usage).ok(),
                payload: json!({ "message": turn.message, "steered": steered }),
            };
            record_call(&p.calls, &step.name, true);
            p.next_index += 1;
            let has_calls = turn.tool_calls().next().is_some();
            p.scratch.push(turn.message.clone());
            // A message steered in during the last model call gets its own
            // model call rather than being left unanswered. One the call
            // already showed (stored before the run resumed, then also
            // delivered to the inbox) is not new and asks for no call.
            if let Some(rx) = input.steer.as_mut() {
                while let Ok((id, text)) = rx.try_recv() {
                    if !p.seen_steer.contains(&id) {
                        p.pending_steer.push((id, text));
                    }
                }
            }
            if !has_calls && p.pending_steer.is_empty() {
                let text = turn.message.joined_text();
                if p.history_as_read && p.history.len() == p.history_ids.len() {
                    // The thread's next run starts from it instead of a copy.
                    self.store.keep_context(
                        &input.thread_key,
                        &input.run_id,
                        std::mem::take(&mut p.history),
                        std::mem::take(&mut p.history_ids),
                    );
                }
                return Ok((text, p.scratch, vec![step], p.seen_steer));
            }
            input.journal(&self.store).put_step(step).await?;
        }
    }

    /// Loads history (unless the run brings its own) and rebuilds the run's
    /// own messages from its journal.
    async fn resume(
        &self,
        input: &RunInput,
        supplied: Option<Vec<Message>>,
        calls: ModelCalls,
    ) -> Result<Progress, Stop> {
        let journal = input.journal(&self.store);
        // Independent reads, so one waits for the slowest rather than the sum.
        // A run whose journal and thread context are in the engine's store,
        // and that starts from that context, reads both in one call (one
        // round trip on PostgreSQL).
        let together = self.compaction.enabled && supplied.is_none() && input.journal.is_none();
        let (loaded, (steps, stored_steers), (allowed, offered)) = if input.fresh {
            // Nothing journaled or steered before: only the history to read.
            let (loaded, offer) = futures_util::future::try_join(
                self.load_history(input, supplied, None),
                self.offered_tools(input),
            )
            .await?;
            (loaded, (Vec::new(), Vec::new()), offer)
        } else if together {
            let start = async {
                let start = self
                    .store
                    .run_start(&input.run_id, &input.thread_key)
                    .await?;
                let loaded = self.load_history(input, None, Some(start.context)).await?;
                Ok::<_, Stop>((loaded, (start.steps, start.steers)))
            };
            let ((loaded, journal), offer) =
                futures_util::future::try_join(start, self.offered_tools(input)).await?;
            (loaded, journal, offer)
        } else {
            futures_util::future::try_join3(
                self.load_history(input, supplied, None),
                async { Ok::<_, Stop>(journal.journal_of_run(&input.run_id).await?) },
                self.offered_tools(input),
            )
            .await?
        };
        let mut p = Progress {
            allowed,
            offered,
            pending_steer: Vec::new(),
            seen_steer: HashSet::new(),
            history_tokens: crate::compaction::estimate_messages(&loaded.history),
            history: loaded.history,
            history_ids: loaded.ids,
            history_as_read: loaded.as_read,
            summary: loaded.summary,
            supplied: loaded.supplied,
            tools_size: None,
            calls,
            scratch: vec![Message::text(Role::User, input.text.clone())],
            next_index: input.first_step,
            llm_calls: 0,
            tool_calls: 0,
            ends: Vec::new(),
            direct: false,
        };
        for step in steps {
            p.next_index = p.next_index.max(step.index + 1);
            match step.kind {
                StepKind::Llm => {
                    record_call(&p.calls, &step.name, step.status == StepStatus::Succeeded);
                    if step.status != StepStatus::Succeeded {
                        continue;
                    }
                    if let Some(steered) = step.payload.get("steered").and_then(Value::as_array) {
                        for s in steered {
                            if let Some(id) = s["id"].as_i64() {
                                p.seen_steer.insert(id);
                            }
                            if let Some(t) = s["text"].as_str() {
                                p.scratch.push(Message::text(Role::User, t));
                            }
                        }
                    }
                    let msg: Message = serde_json::from_value(step.payload["message"].clone())
                        .map_err(|e| {
                            Stop::from(StoreError::Corrupt(format!(
                                "journal step {} of {}: {e}",
                                step.index, input.run_id
                            )))
                        })?;
                    p.llm_calls += 1;
                    p.scratch.push(msg);
                }
                // Its summary is stored (or, incognito, made again): the
                // history loaded above already reflects it.
                StepKind::Compaction => {}
                StepKind::Tool => {
                    let call_id = step.payload["call_id"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned();
                    let output = match (step.status, step.payload["output"].as_str()) {
                        (StepStatus::Started | StepStatus::Unknown, _) | (_, None) => json!({
                            "error": "outcome unknown: hearth stopped while this action was running; \
                                      it was not repeated. Tell the user it may or may not have happened."
                        })
                        .to_string(),
                        (_, Some(out)) => out.to_owned(),
                    };
                    p.tool_calls += 1;
                    push_tool_result(&mut p.scratch, call_id, output);
                }
                // The router's record: nothing the model said or saw.
                StepKind::Route => {}
            }
        }
        self.wait_for_starting_tools(input, &mut p).await?;
        // Steers stored before a crash that no model call showed yet.
        p.pending_steer = stored_steers
            .into_iter()
            .filter(|s| !p.seen_steer.contains(&s.id))
            .map(|s| (s.id, s.text))
            .collect();
        Ok(p)
    }

    fn pending_calls(&self, p: &Progress) -> Option<Vec<ToolCall>> {
        let (assistant, results) = match p.scratch.as_slice() {
            [.., a, r] if a.role == Role::Assistant && r.role == Role::Tool => (a, Some(r)),
            [.., a] if a.role == Role::Assistant => (a, None),
            _ => return None,
        };
        let missing: Vec<_> = unanswered_calls(assistant, results)
            .into_iter()
            .map(|(id, name, arguments)| ToolCall {
                id: id.to_owned(),
                name: name.to_owned(),
                arguments: arguments.to_owned(),
            })
            .collect();
        (!missing.is_empty()).then_some(missing)
    }
}
