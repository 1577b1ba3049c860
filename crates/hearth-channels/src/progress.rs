//! Best-effort progress while a run works: a typing indicator after a
//! moment, and,
//! if the run takes longer than a moment, one progress message edited as
//! events arrive (at most one edit per second). Nothing here is journaled:
//! the durable answer supersedes it, and the answer's outbox items include
//! the clean-up of the progress message. Only the ids of the progress
//! messages shown are kept in the store (the channel's `progress` cursor),
//! so the answer of a run recovered after a restart still cleans up the
//! message the dead process posted.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use hearth_core::{RunEvent, RunEventKind};
use hearth_runtime::surfaces::OutboxStore;
use hearth_runtime::{RunEvents, Runtime};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use tracing::warn;

/// How long a run works before a progress message is posted; quicker
/// answers arrive without one.
pub const SHOW_AFTER: Duration = Duration::from_millis(1500);
/// Edits of one progress message are at least this far apart.
pub const EDIT_EVERY: Duration = Duration::from_secs(1);
/// Typing indicators expire on the platforms after about five seconds.
const TYPING_EVERY: Duration = Duration::from_secs(4);
/// How long a run works before the first typing indicator: an answer that
/// comes sooner would only make it flicker, and skipping it spares every
/// quick answer a platform request.
pub const TYPING_AFTER: Duration = Duration::from_millis(300);
/// The tail of the partial answer shown in the progress message.
const PARTIAL_CHARS: usize = 600;

/// What a platform does for progress (every call best-effort).
#[async_trait::async_trait]
pub trait ProgressSink: Send + Sync + 'static {
    /// Shows "typing…" in `target`.
    async fn typing(&self, target: &str);
    /// Posts a progress message; its id.
    async fn post(&self, target: &str, text: &str) -> Option<String>;
    /// Edits a progress message.
    async fn edit(&self, target: &str, message_id: &str, text: &str);
    /// Deletes a progress message posted after its run's answer was queued.
    async fn delete(&self, target: &str, message_id: &str);
}

/// The name of the channel cursor that holds the shown progress messages.
const CURSOR: &str = "progress";

#[derive(Default)]
struct Entry {
    message_id: Option<String>,
    target: String,
    taken: bool,
}

/// A shown progress message, as stored: `{run_id: {target, message_id}}`.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
struct Shown {
    target: String,
    message_id: String,
}

/// Where the shown progress messages are kept.
struct Saved {
    store: Arc<dyn OutboxStore>,
    channel: &'static str,
    /// One write at a time, each of the state when it starts, so an older
    /// state never overwrites a newer one.
    turn: tokio::sync::Mutex<()>,
}

/// The progress messages of one channel's running runs.
#[derive(Default)]
pub struct Progress {
    runs: Mutex<HashMap<String, Entry>>,
    saved: Option<Saved>,
}

impl Progress {
    /// Progress whose shown messages are kept in `store` as a cursor of
    /// `channel`, for [`Progress::restore`] after a restart.
    pub fn durable(store: Arc<dyn OutboxStore>, channel: &'static str) -> Self {
        Self {
            runs: Mutex::default(),
            saved: Some(Saved {
                store,
                channel,
                turn: tokio::sync::Mutex::new(()),
            }),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut HashMap<String, Entry>) -> T) -> T {
        f(&mut self.runs.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Stops progress for `run_id` and gives the id of its progress message
    /// (to clean up with the answer).
    pub fn take(self: &Arc<Self>, run_id: &str) -> Option<String> {
        let taken = self.with(|runs| {
            let entry = runs.get_mut(run_id)?;
            entry.taken = true;
            entry.message_id.take()
        });
        // Called while the answer is being committed (synchronously): the
        // stored list follows in the background. Should the process die in
        // between, the message is cleaned up by the run's next answer.
        if taken.is_some() && self.saved.is_some() {
            let this = self.clone();
            tokio::spawn(async move { this.save().await });
        }
        taken
    }

    /// Takes back the progress messages a previous process showed for runs
    /// that are still unfinished (a recovered run's answer then cleans its
    /// message up); called before recovered runs execute.
    pub async fn restore(&self, runtime: &Runtime) {
        let Some(saved) = &self.saved else { return };
        let stored = match saved.store.cursor(saved.channel, CURSOR).await {
            Ok(v) => v,
            Err(e) => {
                warn!(channel = saved.channel, error = %e, "could not read the progress messages of the previous process");
                return;
            }
        };
        let Some(stored) = stored else { return };
        let shown: BTreeMap<String, Shown> = match serde_json::from_str(&stored) {
            Ok(v) => v,
            Err(e) => {
                warn!(channel = saved.channel, error = %e, "ignoring malformed stored progress messages");
                BTreeMap::new()
            }
        };
        for (run_id, s) in shown {
            // Finished runs queued the clean-up with their answer already.
            let unfinished = runtime
                .get_run(&run_id)
                .await
                .is_ok_and(|env| !env.status.is_terminal());
            if unfinished {
                self.with(|runs| {
                    runs.entry(run_id).or_insert(Entry {
                        message_id: Some(s.message_id),
                        target: s.target,
                        taken: false,
                    });
                });
            }
        }
        self.save().await;
    }

    /// Stores the progress messages shown now.
    async fn save(&self) {
        let Some(saved) = &self.saved else { return };
        let _turn = saved.turn.lock().await;
        let shown: BTreeMap<String, Shown> = self.with(|runs| {
            runs.iter()
                .filter_map(|(run_id, e)| {
                    let message_id = e.message_id.clone()?;
                    let shown = Shown {
                        target: e.target.clone(),
                        message_id,
                    };
                    Some((run_id.clone(), shown))
                })
                .collect()
        });
        let value = match serde_json::to_string(&shown) {
            Ok(v) => v,
            Err(e) => {
                warn!(channel = saved.channel, error = %e, "could not encode the progress messages");
                return;
            }
        };
        if let Err(e) = saved.store.set_cursor(saved.channel, CURSOR, &value).await {
            warn!(channel = saved.channel, error = %e, "could not store the progress messages");
        }
    }

    /// Shows the progress of `run_id` in `target` until the run ends or its
    /// answer is queued.
    pub fn follow(
        self: &Arc<Self>,
        runtime: Runtime,
        run_id: String,
        target: String,
        sink: Arc<dyn ProgressSink>,
    ) {
        // Registered before the task starts, so an answer queued at once
        // still finds (and stops) it.
        self.with(|runs| {
            runs.entry(run_id.clone()).or_insert_with(|| Entry {
                target: target.clone(),
                ..Entry::default()
            });
        });
        let this = self.clone();
        tokio::spawn(async move {
            this.show(runtime, &run_id, &target, sink.as_ref()).await;
            let dropped = this.with(|runs| runs.remove(&run_id));
            // A message nobody took (the run's events ended otherwise) is
            // no longer followed; the stored list forgets it too.
            if dropped.is_some_and(|e| e.message_id.is_some()) {
                this.save().await;
            }
        });
    }

    async fn show(&self, runtime: Runtime, run_id: &str, target: &str, sink: &dyn ProgressSink) {
        let Ok(RunEvents::Live(log)) = runtime.events(run_id).await else {
            return;
        };
        let mut changes = log.subscribe();
        let started = Instant::now();
        let mut seen = 0u64;
        let mut view = View::default();
        let mut shown = String::new();
        let mut last_edit: Option<Instant> = None;
        let mut last_typing: Option<Instant> = None;
        loop {
            if self.with(|runs| runs.get(run_id).is_none_or(|e| e.taken)) {
                return;
            }
            let events = log.since(seen);
            if let Some(last) = events.last() {
                seen = last.seq;
            }
            for ev in &events {
                if view.apply(ev) {
                    return;
                }
            }
            let now = Instant::now();
            if now - started >= TYPING_AFTER && last_typing.is_none_or(|t| now - t >= TYPING_EVERY)
            {
                sink.typing(target).await;
                last_typing = Some(now);
            }
            let text = view.render();
            if now - started >= SHOW_AFTER
                && text != shown
                && last_edit.is_none_or(|t| now - t >= EDIT_EVERY)
            {
                self.publish(run_id, target, &text, sink).await;
                shown = text;
                last_edit = Some(Instant::now());
            }
            let wake = [
                last_edit.map_or(started + SHOW_AFTER, |t| t + EDIT_EVERY),
                last_typing.map_or(started + TYPING_AFTER, |t| t + TYPING_EVERY),
            ]
            .into_iter()
            .min()
            .unwrap_or(now + EDIT_EVERY);
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return },
                () = tokio::time::sleep_until(wake.max(Instant::now() + Duration::from_millis(50))) => {}
            }
        }
    }

    async fn publish(&self, run_id: &str, target: &str, text: &str, sink: &dyn ProgressSink) {
        let existing = self.with(|runs| runs.get(run_id).and_then(|e| e.message_id.clone()));
        match existing {
            Some(id) => sink.edit(target, &id, text).await,
            None => {
                let Some(id) = sink.post(target, text).await else {
                    return;
                };
                let orphan = self.with(|runs| match runs.get_mut(run_id) {
                    Some(e) if !e.taken => {
                        e.message_id = Some(id.clone());
                        false
                    }
                    _ => true,
                });
                // The answer was queued while this was being posted: nobody
                // will clean it up, so remove it now.
                if orphan {
                    sink.delete(target, &id).await;
                } else {
                    self.save().await;
                }
            }
        }
    }
}

/// What the progress message says.
#[derive(Default)]
struct View {
    thinking: bool,
    tool: Option<String>,
    tools_done: u32,
    partial: String,
    awaiting: bool,
}

impl View {
    /// Applies an event; true when the run ended.
    fn apply(&mut self, ev: &RunEvent) -> bool {
        let name = |ev: &RunEvent| {
            ev.data
                .get("name")
                .or_else(|| ev.data.get("tool"))
                .and_then(|v| v.as_str())
                .unwrap_or("a tool")
                .to_owned()
        };
        match ev.kind {
            RunEventKind::ThinkingDelta => self.thinking = true,
            RunEventKind::TextDelta => {
                if let Some(t) = ev.data.get("text").and_then(|v| v.as_str()) {
                    self.partial.push_str(t);
                    let len = self.partial.chars().count();
                    if len > PARTIAL_CHARS * 2 {
                        self.partial = self.partial.chars().skip(len - PARTIAL_CHARS).collect();
                    }
                }
            }
            RunEventKind::ToolStarted => {
                self.tool = Some(name(ev));
                self.partial.clear();
            }
            RunEventKind::ToolFinished => {
                self.tool = None;
                self.tools_done += 1;
            }
            RunEventKind::ConfirmationRequired => self.awaiting = true,
            RunEventKind::Succeeded | RunEventKind::Failed | RunEventKind::Cancelled => {
                return true;
            }
            RunEventKind::Queued | RunEventKind::Started => {}
        }
        false
    }

    fn render(&self) -> String {
        let mut out = String::from("⏳ ");
        if self.awaiting {
            out.push_str("waiting for your confirmation");
        } else if let Some(tool) = &self.tool {
            out.push_str(&format!("using {tool}…"));
        } else if !self.partial.is_empty() {
            out.push_str("writing…");
        } else if self.thinking {
            out.push_str("thinking…");
        } else {
            out.push_str("working…");
        }
        if self.tools_done > 0 {
            out.push_str(&format!(
                " ({} tool call{} done)",
                self.tools_done,
                if self.tools_done == 1 { "" } else { "s" }
            ));
        }
        if !self.partial.is_empty() && self.tool.is_none() {
            let len = self.partial.chars().count();
            let tail: String = self
                .partial
                .chars()
                .skip(len.saturating_sub(PARTIAL_CHARS))
                .collect();
            out.push_str("\n\n");
            if len > PARTIAL_CHARS {
                out.push('…');
            }
            out.push_str(&tail);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ev(kind: RunEventKind, data: serde_json::Value) -> RunEvent {
        RunEvent { seq: 1, kind, data }
    }

    #[test]
    fn the_view_follows_the_run() {
        let mut v = View::default();
        assert_eq!(v.render(), "⏳ working…");
        assert!(!v.apply(&ev(RunEventKind::ThinkingDelta, json!({"text": "hm"}))));
        assert_eq!(v.render(), "⏳ thinking…");
        v.apply(&ev(RunEventKind::ToolStarted, json!({"name": "web_fetch"})));
        assert_eq!(v.render(), "⏳ using web_fetch…");
        v.apply(&ev(
            RunEventKind::ToolFinished,
            json!({"name": "web_fetch"}),
        ));
        v.apply(&ev(RunEventKind::TextDelta, json!({"text": "Hello"})));
        assert_eq!(v.render(), "⏳ writing… (1 tool call done)\n\nHello");
        let long = "x".repeat(3000);
        v.apply(&ev(RunEventKind::TextDelta, json!({"text": long})));
        assert!(v.render().chars().count() < PARTIAL_CHARS + 60);
        assert!(v.apply(&ev(RunEventKind::Succeeded, json!({}))));
    }

    #[test]
    fn take_stops_and_hands_over_the_message() {
        let p = Arc::new(Progress::default());
        p.with(|runs| {
            runs.insert(
                "r1".into(),
                Entry {
                    message_id: Some("42".into()),
                    target: "t".into(),
                    taken: false,
                },
            );
        });
        assert_eq!(p.take("r1").as_deref(), Some("42"));
        assert_eq!(p.take("r1"), None);
        assert!(p.with(|runs| runs.get("r1").is_some_and(|e| e.taken)));
        assert_eq!(p.take("r2"), None);
        assert!(
            p.with(|runs| runs.get("r2").is_none()),
            "nothing kept for unknown runs"
        );
    }
}
