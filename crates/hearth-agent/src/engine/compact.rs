//! Loading a run's history, and compacting it when the context would pass
//! `context_fraction` of the model's window (decisions in `crate::compaction`).
//!
//! A run that fits pays one estimate per model call, from sizes kept in
//! `Progress`: no store read and no model call beyond the usual ones.

use futures_util::StreamExt;
use hearth_core::{Message, Role, now_ms};
use hearth_llm::{Accumulator, AssistantTurn, LlmError, Provider};
use hearth_store::{StepKind, StepRecord, StepStatus};
use serde_json::json;

use super::call::{answer_bytes, reported};
use super::run_io::{InFlight, call_ended, call_sent};
use super::supplied::Prefixes;
use super::{Candidate, Engine, Progress, RunInput, Stop};
use crate::budget::Reservation;
use crate::compaction::{
    SUMMARY_INSTRUCTIONS, estimate_messages, estimate_text, plan, summary_request,
};
use crate::context::trim_history;

/// Compactions one model call may wait for: a thread far over its window
/// (one grown before compaction existed) shrinks over a few calls, each a
/// request that fits; past this the call goes out as it is.
const MAX_ROUNDS: u32 = 8;

/// Tokens kept free for the summary the summarizing call writes.
const SUMMARY_OUTPUT_RESERVE: usize = 2048;

/// The history a run starts from.
pub(super) struct Loaded {
    pub(super) history: Vec<Message>,
    /// Store ids of `history`, when a summary of it may be stored.
    pub(super) ids: Vec<i64>,
    pub(super) summary: Option<String>,
    /// For a supplied history, the hashes its summaries are cached under.
    pub(super) supplied: Option<Prefixes>,
    /// True when `history` and `ids` are the thread's context as the store
    /// read it (nothing trimmed or added), so they can be handed back.
    pub(super) as_read: bool,
}

impl Engine {
    /// The thread's history (or the one the run brings). With compaction on,
    /// the newest summary and everything after it, in one read (or `read`,
    /// the thread's context read already); with it off, the last
    /// `history_messages` messages.
    pub(super) async fn load_history(
        &self,
        input: &RunInput,
        supplied: Option<Vec<Message>>,
        read: Option<hearth_store::ThreadContext>,
    ) -> Result<Loaded, Stop> {
        let from_thread = supplied.is_none();
        // A new thread's history is known to be empty: nothing to read.
        let empty = from_thread
            && input.history_seen == Some(hearth_store::HistorySeen::Empty)
            && input.journal.is_none();
        let read = if empty {
            Some(hearth_store::ThreadContext::default())
        } else {
            read
        };
        if !self.compaction.enabled {
            let window = usize::try_from(self.limits.history_messages).unwrap_or(usize::MAX);
            let mut history = match supplied {
                Some(mut h) => {
                    h.drain(..h.len().saturating_sub(window));
                    h
                }
                None if empty => Vec::new(),
                None => {
                    self.store
                        .thread_history(&input.thread_key, self.limits.history_messages)
                        .await?
                }
            };
            if let Some(journal) = &input.journal
                && from_thread
            {
                // An incognito thread continues from what it said before going
                // incognito, then what it said since (kept only in memory).
                history.extend(
                    journal
                        .thread_history(&input.thread_key, self.limits.history_messages)
                        .await?,
                );
            }
            return Ok(Loaded {
                history: trim_history(history),
                ids: Vec::new(),
                summary: None,
                supplied: None,
                as_read: false,
            });
        }
        let mut as_read = from_thread && input.journal.is_none();
        let (mut history, mut ids, summary) = match supplied {
            Some(h) => (h, Vec::new(), None),
            None => {
                let ctx = match (read, input.history_seen) {
                    (Some(ctx), _) => ctx,
                    (None, Some(hearth_store::HistorySeen::Newest(newest)))
                        if input.journal.is_none() =>
                    {
                        self.store
                            .thread_context_seen(&input.thread_key, newest)
                            .await?
                    }
                    (None, _) => self.store.thread_context(&input.thread_key).await?,
                };
                (ctx.messages, ctx.ids, ctx.summary.map(|s| s.text))
            }
        };
        if let Some(journal) = &input.journal
            && from_thread
        {
            history.extend(journal.thread_history(&input.thread_key, u32::MAX).await?);
            // Incognito: what it compacts must not reach the disk.
            ids.clear();
        }
        let first_user = history
            .iter()
            .position(|m| m.role == Role::User)
            .unwrap_or(history.len());
        history.drain(..first_user);
        if !ids.is_empty() {
            ids.drain(..first_user);
        }
        as_read &= first_user == 0;
        if from_thread {
            return Ok(Loaded {
                history,
                ids,
                summary,
                supplied: None,
                as_read,
            });
        }
        // A supplied history: its oldest turns may have been summarized for
        // an earlier request that carried them.
        let model = input
            .candidates
            .first()
            .map(|c| c.model.to_string())
            .unwrap_or_default();
        let mut prefixes = Prefixes::of(&input.user_key, &model, &history);
        let summary = self.summaries.longest(&prefixes).map(|(summary, covered)| {
            history.drain(..covered);
            prefixes.covered = covered;
            tracing::debug!(run_id = %input.run_id, replaced_messages = covered,
                "a summary of this supplied history was made before; reusing it");
            summary
        });
        Ok(Loaded {
            history,
            ids,
            summary,
            supplied: Some(prefixes),
            as_read: false,
        })
    }

    /// Tokens of the next call besides the history.
    fn fixed_tokens(&self, input: &RunInput, p: &mut Progress) -> usize {
        let tools = self.tools_size(p).json.div_ceil(4);
        estimate_text(&self.system_prompt)
            + estimate_text(&self.prompt_section(&input.text))
            + tools
            + p.summary.as_deref().map_or(0, estimate_text)
            + estimate_messages(&p.scratch)
    }

    /// Summarizes the oldest turns while the next call's context would pass
    /// the threshold of the run's model.
    pub(super) async fn compact_if_needed(
        &self,
        input: &RunInput,
        p: &mut Progress,
    ) -> Result<(), Stop> {
        if !self.compaction.enabled {
            return Ok(());
        }
        let Some(first) = input.candidates.first() else {
            return Ok(());
        };
        let threshold = self.compaction.threshold(first.context_window);
        for _ in 0..MAX_ROUNDS {
            let fixed = self.fixed_tokens(input, p);
            if fixed + p.history_tokens <= threshold {
                return Ok(());
            }
            // The summarizing call must fit the same threshold.
            let chunk = threshold
                .saturating_sub(estimate_text(SUMMARY_INSTRUCTIONS))
                .saturating_sub(p.summary.as_deref().map_or(0, estimate_text))
                .saturating_sub(SUMMARY_OUTPUT_RESERVE)
                .max(256);
            let Some(n) = plan(&p.history, fixed, threshold, chunk) else {
                return Ok(());
            };
            if !self
                .summarize(input, p, n, fixed + p.history_tokens, chunk)
                .await?
            {
                return Ok(());
            }
        }
        Ok(())
    }

    /// The models that may write a summary, in order. The run's own today;
    /// this is where a router sends purpose `compaction` to a cheaper arm.
    fn compaction_candidates<'a>(&self, input: &'a RunInput) -> &'a [Candidate] {
        &input.candidates
    }

    /// Replaces the first `n` messages of the history with a summary of them
    /// (and of the previous summary). False when no model could write one:
    /// the call then goes out uncompacted, which is better than no answer.
    ///
    /// Each summarizing call is reserved from the budget and settled like
    /// any model call. One the budget refuses is not sent: the next model
    /// is tried, and when none can be afforded the run's own call goes out
    /// uncompacted, where the budget refuses it in turn (the run fails with
    /// `budget_exceeded` naming the pool) unless it can afford it.
    async fn summarize(
        &self,
        input: &RunInput,
        p: &mut Progress,
        n: usize,
        tokens_before: usize,
        chunk: usize,
    ) -> Result<bool, Stop> {
        let journal = input.journal(&self.store);
        let mut refused = false;
        for c in self.compaction_candidates(input) {
            let request = summary_request(
                &c.model.model,
                p.summary.as_deref(),
                &p.history[..n],
                chunk.saturating_mul(4),
            );
            let hold = match self.reserve(input, &c.model, &request, 0).await {
                Ok(hold) => hold,
                Err(refusal) => {
                    tracing::info!(run_id = %input.run_id, model = %c.model, pool = %refusal.pool,
                        "budget pool cannot afford a summarizing call to this model");
                    refused = true;
                    continue;
                }
            };
            let started = now_ms();
            call_sent(
                &p.calls,
                InFlight {
                    index: p.next_index,
                    kind: StepKind::Compaction,
                    model: c.model.to_string(),
                    started_at: started,
                },
            );
            let outcome = collect(
                c.provider.as_ref(),
                &request,
                &c.model.provider,
                hold.as_ref(),
            )
            .await;
            call_ended(&p.calls);
            if let Some(hold) = hold {
                hold.settle(reported(&outcome)).await;
            }
            let outcome = outcome.and_then(|turn| {
                if turn.message.joined_text().trim().is_empty() {
                    Err(LlmError::new(
                        &c.model.provider,
                        hearth_llm::ErrorKind::MalformedResponse,
                        "the summary came back empty",
                    ))
                } else {
                    Ok(turn)
                }
            });
            let turn = match outcome {
                Ok(turn) => turn,
                Err(e) => {
                    tracing::warn!(run_id = %input.run_id, model = %c.model,
                        error_kind = e.kind.as_str(), "a compaction call failed");
                    let step = self.failed_compaction(input, p, c, started, &e);
                    journal.put_step(step).await?;
                    continue;
                }
            };
            let text = turn.message.joined_text().trim().to_owned();
            let covers_to = p.history_ids.get(n - 1).copied();
            let replaced = estimate_messages(&p.history[..n]);
            p.history.drain(..n);
            if !p.history_ids.is_empty() {
                p.history_ids.drain(..n);
            }
            p.history_tokens = p.history_tokens.saturating_sub(replaced);
            if let Some(prefixes) = &mut p.supplied {
                prefixes.covered += n;
                self.summaries.remember(prefixes, prefixes.covered, &text);
            }
            p.summary = Some(text);
            let tokens_after = self.fixed_tokens(input, p) + p.history_tokens;
            if let (Some(covers_to), Some(summary)) = (covers_to, &p.summary) {
                self.store
                    .append_summary(
                        &input.thread_key,
                        &input.run_id,
                        summary,
                        covers_to,
                        now_ms(),
                    )
                    .await?;
            }
            let step = StepRecord {
                run_id: input.run_id.clone(),
                index: p.next_index,
                kind: StepKind::Compaction,
                name: c.model.to_string(),
                status: StepStatus::Succeeded,
                started_at: started,
                finished_at: Some(now_ms()),
                tokens: serde_json::to_value(turn.usage).ok(),
                payload: json!({
                    "detail": { "tokens_before": tokens_before, "tokens_after": tokens_after },
                    "replaced_messages": n,
                    "covers_to": covers_to,
                }),
            };
            p.next_index += 1;
            journal.put_step(step).await?;
            metrics::counter!("hearth_compactions_total").increment(1);
            tracing::info!(run_id = %input.run_id, thread_key = %input.thread_key,
                model = %c.model, replaced_messages = n, tokens_before, tokens_after,
                stored = covers_to.is_some(), "compacted the oldest turns of a thread");
            return Ok(true);
        }
        if refused {
            tracing::info!(run_id = %input.run_id, tokens_before,
                "no budget could afford a summarizing call; the context goes out uncompacted, \
                 if the budget affords that");
        } else {
            tracing::warn!(run_id = %input.run_id, tokens_before,
                "no model could summarize the oldest turns; sending the context uncompacted");
        }
        Ok(false)
    }

    /// The journal step of a compaction call that failed (usage counts it).
    fn failed_compaction(
        &self,
        input: &RunInput,
        p: &mut Progress,
        c: &Candidate,
        started: hearth_core::Timestamp,
        err: &LlmError,
    ) -> StepRecord {
        let step = StepRecord {
            run_id: input.run_id.clone(),
            index: p.next_index,
            kind: StepKind::Compaction,
            name: c.model.to_string(),
            status: StepStatus::Failed,
            started_at: started,
            finished_at: Some(now_ms()),
            tokens: None,
            payload: json!({ "error": { "kind": err.kind.as_str(), "message": err.message } }),
        };
        p.next_index += 1;
        step
    }
}

/// One summarizing call, collected; nothing reaches the run's followers.
/// What streams is noted on `hold`, so a call cut off is charged it.
async fn collect(
    provider: &dyn Provider,
    request: &hearth_core::ChatRequest,
    provider_name: &str,
    hold: Option<&Reservation>,
) -> Result<AssistantTurn, LlmError> {
    let mut stream = provider.stream(request).await?;
    let mut acc = Accumulator::new();
    while let Some(item) = stream.next().await {
        let ev = item?;
        if let Some(hold) = hold {
            hold.streamed(answer_bytes(&ev));
        }
        acc.push(&ev);
    }
    acc.finish(provider_name)
}
