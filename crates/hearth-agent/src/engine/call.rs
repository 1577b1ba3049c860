//! One model turn: the candidates in order, each with bounded retries, every
//! attempt reserved from the budget first and settled after.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use hearth_core::{ChatRequest, ModelRef, RunEventKind, StreamEvent, ThinkingLevel, now_ms};
use hearth_llm::retry::jitter;
use hearth_llm::{Accumulator, AssistantTurn, ErrorKind, LlmError, Provider};
use hearth_store::{StepKind, StepRecord, StepStatus};
use serde_json::json;

use super::run_io::{InFlight, call_ended, call_sent, record_call};
use super::{
    Engine, EventSink, PROMPT_ONLY_NOTE, Progress, RunInput, Stop, ToolMode, budget_exceeded,
    llm_failure,
};
use crate::budget::{Payer, Refusal, Reservation, tokens_of};
use crate::context::append_section;
use hearth_llm::prices::Tokens;

impl Engine {
    /// One model turn: the run's model with bounded retries, then each
    /// fallback in order. Every failed attempt is journaled as a failed step.
    pub(super) async fn call_model(
        &self,
        input: &RunInput,
        sink: &dyn EventSink,
        p: &mut Progress,
    ) -> Result<(AssistantTurn, ModelRef), Stop> {
        // The history is lent to the request and taken back after the call,
        // rather than copied for every call: a long thread's history is most
        // of what a request holds.
        let history_len = p.history.len();
        let mut messages = std::mem::take(&mut p.history);
        messages.extend_from_slice(&p.scratch);
        let mut request = ChatRequest {
            model: String::new(),
            system: String::new(),
            messages,
            tools: std::sync::Arc::default(),
            thinking: ThinkingLevel::Off,
            max_output_tokens: self.max_output_tokens,
        };
        let outcome = self.call_candidates(input, sink, p, &mut request).await;
        let mut history = std::mem::take(&mut request.messages);
        history.truncate(history_len);
        p.history = history;
        outcome
    }

    /// `call_model` with the request holding the run's messages.
    async fn call_candidates(
        &self,
        input: &RunInput,
        sink: &dyn EventSink,
        p: &mut Progress,
        request: &mut ChatRequest,
    ) -> Result<(AssistantTurn, ModelRef), Stop> {
        let section = self.prompt_section(&input.text);
        // Worked out once per run, and only when a budget needs it.
        let tools_bytes = match &self.budget {
            Some(_) => self.tools_size(p).text_bytes,
            None => 0,
        };
        let mut last = None;
        // The first refusal, reported when no candidate could be afforded.
        let mut refused: Option<Refusal> = None;
        'candidates: for c in &input.candidates {
            let model = &c.model;
            request.model.clone_from(&model.model);
            request.thinking = if c.thinking {
                input.thinking
            } else {
                ThinkingLevel::Off
            };
            let mut with_tools = match c.tools {
                ToolMode::Send => true,
                ToolMode::Omit => false,
                ToolMode::TryThenOmit => !self.rejected_tools(model),
            };
            let mut attempt = 0;
            let mut waited = Duration::ZERO;
            loop {
                self.shape_request(request, with_tools, &p.offered, &section);
                match input.mode {
                    hearth_core::PermissionMode::Plan => request.system.push_str(super::PLAN_NOTE),
                    hearth_core::PermissionMode::Deny => request.system.push_str(super::DENY_NOTE),
                    _ => {}
                }
                if let Some(summary) = &p.summary {
                    append_section(
                        &mut request.system,
                        &crate::compaction::summary_section(summary),
                    );
                }
                let hold = match self.reserve(input, model, request, tools_bytes).await {
                    Ok(hold) => hold,
                    Err(refusal) if input.pinned => return Err(budget_exceeded(&refusal)),
                    Err(refusal) => {
                        tracing::info!(run_id = %input.run_id, model = %model, pool = %refusal.pool, "budget pool cannot afford this model; trying the next one");
                        refused.get_or_insert(refusal);
                        continue 'candidates;
                    }
                };
                attempt += 1;
                let started = now_ms();
                call_sent(
                    &p.calls,
                    InFlight {
                        index: p.next_index,
                        kind: StepKind::Llm,
                        model: model.to_string(),
                        started_at: started,
                    },
                );
                let (outcome, emitted) = self
                    .attempt(model, c.provider.as_ref(), request, sink, hold.as_ref())
                    .await;
                call_ended(&p.calls);
                if let Some(hold) = hold {
                    hold.settle(reported(&outcome)).await;
                }
                let err = match outcome {
                    Ok(turn) => return Ok((turn, model.clone())),
                    Err(e) => e,
                };
                self.journal_failed_attempt(input, p, model, started, &err)
                    .await?;
                if emitted {
                    // Text already went out to followers; a retry would repeat it.
                    return Err(llm_failure(&err));
                }
                if with_tools && c.tools == ToolMode::TryThenOmit && rejects_tools(&err) {
                    // This model takes no tools: remember it and go prompt-only.
                    self.remember_rejected_tools(model);
                    with_tools = false;
                    continue;
                }
                if err.is_retryable()
                    && let Some(delay) =
                        self.retry
                            .next_delay(attempt, err.retry_after, waited, jitter())
                {
                    tokio::time::sleep(delay).await;
                    waited += delay;
                    continue;
                }
                let fail_over = err.is_retryable()
                    || matches!(
                        err.kind,
                        ErrorKind::Auth | ErrorKind::NotFound | ErrorKind::MalformedResponse
                    );
                if !fail_over {
                    return Err(llm_failure(&err));
                }
                last = Some(err);
                break;
            }
        }
        match (last, refused) {
            (Some(err), _) => Err(llm_failure(&err)),
            (None, Some(refusal)) => Err(budget_exceeded(&refusal)),
            (None, None) => Err(llm_failure(&LlmError::new(
                "hearth",
                ErrorKind::InvalidRequest,
                "no model to call",
            ))),
        }
    }

    /// Journals a model call the run's end (a cancel, the wall limit) cut
    /// off, as failed with kind `cancelled`, so usage counts it; the budget
    /// charged it when its reservation was dropped.
    pub(super) async fn journal_cut_off(&self, input: &RunInput, call: InFlight) {
        let step = StepRecord {
            run_id: input.run_id.clone(),
            index: call.index,
            kind: call.kind,
            name: call.model,
            status: StepStatus::Failed,
            started_at: call.started_at,
            finished_at: Some(now_ms()),
            tokens: None,
            payload: json!({ "error": {
                "kind": "cancelled",
                "message": "the run ended while this call was streaming; it was cut off",
            } }),
        };
        tracing::info!(run_id = %input.run_id, model = %step.name,
            "a model call was cut off by the run's end; counted in usage");
        if let Err(e) = input.journal(&self.store).put_step(step).await {
            tracing::warn!(run_id = %input.run_id, error = %e,
                "could not journal a cut-off model call; usage misses it");
        }
    }

    /// Holds the call's estimate in the budget's pools (nothing without a
    /// budget). Dropped with the call when the run is cancelled, it charges
    /// the prompt estimate and what streamed.
    pub(super) async fn reserve(
        &self,
        input: &RunInput,
        model: &ModelRef,
        request: &ChatRequest,
        tools_bytes: usize,
    ) -> Result<Option<Reservation>, Refusal> {
        let Some(budget) = &self.budget else {
            return Ok(None);
        };
        let payer = Payer {
            user_key: &input.user_key,
            // A sub-agent spends from its root conversation's pools.
            thread_key: crate::subagents::root_thread(&input.thread_key),
        };
        budget
            .reserve(
                &model.to_string(),
                payer,
                budget.estimate(request, tools_bytes),
            )
            .await
            .map(Some)
    }

    /// Tools and the system prompt for a call with or without tools.
    fn shape_request(
        &self,
        request: &mut ChatRequest,
        with_tools: bool,
        offered: &std::sync::Arc<[hearth_core::ToolSpec]>,
        section: &str,
    ) {
        request.system.clear();
        request.system.push_str(&self.system_prompt);
        append_section(&mut request.system, section);
        if with_tools {
            request.tools = std::sync::Arc::clone(offered);
        } else {
            request.tools = std::sync::Arc::default();
            request.system.push_str(PROMPT_ONLY_NOTE);
        }
    }

    /// The sizes of the run's offered tools (measured once per run, and
    /// per tool once per process).
    pub(super) fn tools_size(&self, p: &mut Progress) -> crate::json_len::ListSize {
        *p.tools_size
            .get_or_insert_with(|| self.tool_sizes.measure(&p.offered))
    }

    fn rejected_tools(&self, model: &ModelRef) -> bool {
        self.no_tools
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(&model.to_string())
    }

    fn remember_rejected_tools(&self, model: &ModelRef) {
        tracing::info!(model = %model, "model rejected tool definitions; using it prompt-only");
        self.no_tools
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(model.to_string());
    }

    /// One streamed call; also says whether any delta reached followers.
    /// What streams is noted on `hold`, so a call cut off is charged it.
    async fn attempt(
        &self,
        model: &ModelRef,
        provider: &dyn Provider,
        request: &ChatRequest,
        sink: &dyn EventSink,
        hold: Option<&Reservation>,
    ) -> (Result<AssistantTurn, LlmError>, bool) {
        let t0 = Instant::now();
        let mut emitted = false;
        let outcome = async {
            let mut stream = provider.stream(request).await?;
            let mut acc = Accumulator::new();
            while let Some(item) = stream.next().await {
                let ev = item?;
                if let Some(hold) = hold {
                    hold.streamed(answer_bytes(&ev));
                }
                match &ev {
                    hearth_core::StreamEvent::TextDelta(t) if !t.is_empty() => {
                        emitted = true;
                        sink.emit(RunEventKind::TextDelta, json!({ "text": t }));
                    }
                    hearth_core::StreamEvent::ThinkingDelta { text, .. } if !text.is_empty() => {
                        emitted = true;
                        sink.emit(RunEventKind::ThinkingDelta, json!({ "text": text }));
                    }
                    _ => {}
                }
                acc.push(&ev);
            }
            acc.finish(&model.provider)
        }
        .await;
        let status = match &outcome {
            Ok(_) => "ok",
            Err(e) => e.kind.as_str(),
        };
        metrics::histogram!("hearth_llm_call_duration_seconds",
            "provider" => model.provider.clone(), "status" => status)
        .record(t0.elapsed().as_secs_f64());
        (outcome, emitted)
    }

    async fn journal_failed_attempt(
        &self,
        input: &RunInput,
        p: &mut Progress,
        model: &ModelRef,
        started_at: hearth_core::Timestamp,
        err: &LlmError,
    ) -> Result<(), Stop> {
        let step = StepRecord {
            run_id: input.run_id.clone(),
            index: p.next_index,
            kind: StepKind::Llm,
            name: model.to_string(),
            status: StepStatus::Failed,
            started_at,
            finished_at: Some(now_ms()),
            tokens: None,
            // Shown by the run's trace: a provider that echoes a key back in
            // its error must not have it stored or shown.
            payload: json!({ "error": {
                "kind": err.kind.as_str(),
                "message": self.scanner.redact(&err.message).text,
            } }),
        };
        record_call(&p.calls, &step.name, false);
        p.next_index += 1;
        input.journal(&self.store).put_step(step).await?;
        Ok(())
    }
}

/// The server refused the tool definitions: hearth-llm classifies the
/// wordings of Ollama, vLLM, OpenRouter, Gemini and others as one kind.
fn rejects_tools(err: &LlmError) -> bool {
    err.kind == ErrorKind::ToolsUnsupported
}

/// The usage a finished call's provider reported, if it reported any: a
/// failed call or a stream without usage is charged its estimate instead.
pub(super) fn reported(outcome: &Result<AssistantTurn, LlmError>) -> Option<Tokens> {
    outcome
        .as_ref()
        .ok()
        .filter(|t| !t.usage.is_untracked())
        .map(|t| tokens_of(&t.usage))
}

/// Bytes of answer an event carries (text, reasoning, tool calls).
pub(super) fn answer_bytes(ev: &StreamEvent) -> usize {
    match ev {
        StreamEvent::TextDelta(t) => t.len(),
        StreamEvent::ThinkingDelta { text, .. } => text.len(),
        StreamEvent::ToolCallDelta {
            id,
            name,
            arguments,
            ..
        } => {
            id.as_ref().map_or(0, String::len)
                + name.as_ref().map_or(0, String::len)
                + arguments.len()
        }
        StreamEvent::Usage(_) | StreamEvent::Finish(_) => 0,
    }
}
