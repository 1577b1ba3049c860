//! What a run brings to the engine and what it gets back.

use std::sync::Arc;

use hearth_core::{Message, ModelRef, RunError, ThinkingLevel};
use hearth_llm::Provider;
use hearth_store::{StepKind, StepRecord, Store};
use hearth_tools::ToolContext;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// What one run needs besides the engine's shared parts.
pub struct RunInput {
    /// The run.
    pub run_id: String,
    /// Its thread.
    pub thread_key: String,
    /// The user's message.
    pub text: String,
    /// Who sent it: tool permissions are theirs.
    pub user_key: String,
    /// Where permissions are looked up: `global` or a channel's space.
    pub scope: String,
    /// The user's platform role ids: grants to `role:<id>` apply.
    pub roles: Vec<String>,
    /// The run's model first, then the models to fail over to, in order.
    pub candidates: Vec<Candidate>,
    /// Requested reasoning (clamped per candidate).
    pub thinking: ThinkingLevel,
    /// Cancels the run.
    pub cancel: CancellationToken,
    /// Messages steered into the run (`(id, text)`, already stored); read
    /// before each model call.
    pub steer: Option<mpsc::Receiver<(i64, String)>>,
    /// True when nothing of the thread may be written to disk.
    pub incognito: bool,
    /// Where this run's journal and its thread's new messages live, when not
    /// in the engine's store (incognito runs: a store in memory).
    pub journal: Option<Arc<dyn Store>>,
    /// Decides the chat prompt a confirmation owes (queued with it), when a
    /// channel owns the thread.
    pub replies: Option<Arc<dyn hearth_store::ReplyRouter>>,
    /// The run's model was chosen explicitly (the thread's `model set`, or
    /// given with the message): a budget refusal fails the run instead of
    /// moving to another candidate.
    pub pinned: bool,
    /// The first step index the engine may use: the ones below are the
    /// caller's (a routed run's `route` step at 0), journaled by it and
    /// perhaps not committed yet when the engine reads the journal.
    pub first_step: u32,
    /// The permission mode the run started with: which tools are offered
    /// and which allowed calls ask first.
    pub mode: hearth_core::PermissionMode,
    /// For a sub-agent: the tools its parent chose for it (`None`: every
    /// tool it may use). Never adds a tool the user could not call.
    pub tools: Option<Vec<String>>,
    /// For a sub-agent: the steps its parent allowed it, when fewer than
    /// `[agent] max_steps` (`None`: the configured limit).
    pub max_steps: Option<u32>,
    /// For a sub-agent: who asks its confirmations, in its parent's
    /// conversation (`sub-agent 2 of run <id> (model <m>)`).
    pub asker: Option<String>,
    /// The limits this run shares with its parent and its sub-agents
    /// (`None`: it is held to its own alone).
    pub family: Option<Arc<crate::subagents::Family>>,
    /// Stored by this process and never run before: its journal holds
    /// nothing the engine wrote, and every steer reaches it through `steer`
    /// (a steer is only stored for the thread's active run), so the engine
    /// reads neither its journal nor its stored steers. A run resumed after
    /// a restart, claimed from the store or resumed after a confirmation is
    /// not fresh.
    pub fresh: bool,
    /// What the run's insert saw of its thread's stored history, for a run
    /// stored claimed (only a thread's runs write it, and no other run of
    /// the thread is unfinished, so it holds until the run ends): `Empty`,
    /// the engine reads none; `Newest`, the store may answer from the
    /// context it holds (`HistoryStore::thread_context_seen`). Set only
    /// from the store's answer at the run's insert
    /// (`RunStore::create_claimed_run_seeing_history`); `None` otherwise.
    pub history_seen: Option<hearth_store::HistorySeen>,
}

impl RunInput {
    /// The store that holds this run.
    pub(super) fn journal<'a>(&'a self, engine_store: &'a Arc<dyn Store>) -> &'a Arc<dyn Store> {
        self.journal.as_ref().unwrap_or(engine_store)
    }

    /// What the run's tool calls see of it.
    pub(super) fn tool_context(&self) -> ToolContext {
        ToolContext {
            run_id: self.run_id.clone(),
            thread_key: self.thread_key.clone(),
            user_key: self.user_key.clone(),
            scope: self.scope.clone(),
            incognito: self.incognito,
            call_id: String::new(),
        }
    }
}

/// A model the run may call, with what it can take.
#[derive(Clone)]
pub struct Candidate {
    /// `<provider>/<model>`.
    pub model: ModelRef,
    /// Its provider.
    pub provider: Arc<dyn Provider>,
    /// Whether tool definitions are sent.
    pub tools: ToolMode,
    /// Whether the model takes a reasoning level (else `off` is sent).
    pub thinking: bool,
    /// Its context window in tokens; `None` when not known (compaction then
    /// assumes `default_context_tokens`).
    pub context_window: Option<u32>,
}

/// Whether a model gets the tool definitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolMode {
    /// Always.
    Send,
    /// Never: prompt-only mode, said in the system prompt.
    Omit,
    /// Sent until the server rejects them for this model; then omitted.
    TryThenOmit,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The answer.
    Succeeded(String),
    /// What went wrong.
    Failed(RunError),
    Cancelled,
}

/// The end of a run, for the runtime to commit in one transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct RunResult {
    /// How it ended.
    pub outcome: Outcome,
    /// Messages to append to the thread (empty unless it succeeded).
    pub messages: Vec<Message>,
    /// Steps not yet journaled (the final model call).
    pub steps: Vec<StepRecord>,
    /// Messages steered into the run that it did not get to see; the caller
    /// must deliver them another way (as follow-ups).
    pub unseen_steer: Vec<String>,
    /// Every model call of the run, in order, those journaled before a
    /// resume included: what the router learns from, without reading the
    /// journal back.
    pub model_calls: Vec<ModelCall>,
}

/// One model call of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelCall {
    /// `provider/model`.
    pub model: String,
    /// It answered (false: it failed and the run retried or failed over).
    pub answered: bool,
}

/// The model calls of a run, kept outside its future: a cancel or the wall
/// limit drops the future mid-call, and what it called still counts.
#[derive(Default)]
pub(super) struct CallLog {
    /// Every finished model call, in order.
    pub(super) calls: Vec<ModelCall>,
    /// The model call on the wire: when the run's future is dropped
    /// mid-call, the engine journals it (failed, of kind `cancelled`) so
    /// usage counts a call the provider bills.
    pub(super) in_flight: Option<InFlight>,
}

/// A model call sent and not ended yet.
pub(super) struct InFlight {
    /// Its step index.
    pub(super) index: u32,
    /// A chat or a summarizing call.
    pub(super) kind: StepKind,
    /// `<provider>/<model>`.
    pub(super) model: String,
    /// When it was sent.
    pub(super) started_at: hearth_core::Timestamp,
}

/// Shared between a run's future and the engine that may drop it.
pub(super) type ModelCalls = Arc<std::sync::Mutex<CallLog>>;

fn lock(calls: &ModelCalls) -> std::sync::MutexGuard<'_, CallLog> {
    calls
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub(super) fn record_call(calls: &ModelCalls, model: &str, answered: bool) {
    lock(calls).calls.push(ModelCall {
        model: model.to_owned(),
        answered,
    });
}

/// Marks a model call as sent: until [`call_ended`], a drop of the run's
/// future leaves it to journal.
pub(super) fn call_sent(calls: &ModelCalls, call: InFlight) {
    lock(calls).in_flight = Some(call);
}

/// The model call sent last has ended (it journals itself).
pub(super) fn call_ended(calls: &ModelCalls) {
    lock(calls).in_flight = None;
}

/// The call cut off mid-way, if the run's future was dropped during one;
/// and every call the run made.
pub(super) fn take_calls(calls: &ModelCalls) -> (Option<InFlight>, Vec<ModelCall>) {
    let mut log = lock(calls);
    (log.in_flight.take(), std::mem::take(&mut log.calls))
}
