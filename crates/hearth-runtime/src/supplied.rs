//! What a surface supplies for one run beyond its message: a history of its
//! own (OpenAI clients resend the whole conversation with every request) and
//! a model for this run only.
//!
//! Kept in memory from ingest until the run starts: the client that supplied
//! them holds its request open for the answer. A run recovered after a
//! restart has lost them and runs as an ordinary message of its thread (its
//! client's connection died with the process, so nobody reads that answer).
//! On a shared store, a run stored queued may be claimed by another replica:
//! its model and history are stored with it then (`RunOverrides::carried`),
//! and the claim brings them to that replica.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use hearth_agent::firewall::SecretScanner;
use hearth_core::{Content, Inbound, Message, RunEnvelope};

use crate::error::Result;
use crate::runtime::Runtime;

/// Per-run settings that replace the thread's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunOverrides {
    /// The conversation before the message, in place of the thread's stored
    /// history.
    pub history: Option<Vec<Message>>,
    /// `<provider>/<model>` for this run, in place of the thread's model.
    pub model: Option<String>,
    /// The message is not its sender's turn in the conversation (a client's
    /// background task: a title, tags, follow-up suggestions): it neither
    /// answers nor denies the confirmations the thread waits for. Read at
    /// ingest, not kept for the run.
    pub background: bool,
    /// For a sub-agent: the only tools it is offered (of those its user may
    /// use, read-class only). Read again from the parent's journal when the
    /// child is recovered after a restart.
    pub tools: Option<Vec<String>>,
    /// For a sub-agent: the steps its parent allowed it (at most `[agent]
    /// max_steps`); read again from the parent's journal like `tools`.
    pub max_steps: Option<u32>,
    /// For a sub-agent: the run whose `delegate` call starts it, stored
    /// with the run. Read at ingest, not kept for the run.
    pub parent_run_id: Option<String>,
    /// For a sub-agent: the permission mode it runs in (its parent's), in
    /// place of its thread's. Recorded on its run when it is stored, so a
    /// child recovered after a restart keeps it. Only `delegate` sets it.
    pub mode: Option<String>,
}

impl RunOverrides {
    fn is_empty(&self) -> bool {
        self.history.is_none()
            && self.model.is_none()
            && self.tools.is_none()
            && self.max_steps.is_none()
            && self.mode.is_none()
    }
}

impl RunOverrides {
    /// What another replica needs to run this message as asked, when there
    /// is anything: the model and the conversation a client sent (JSON,
    /// `{"model"?, "history"?}`), for a run stored queued on a shared store
    /// (`Store::create_run_supplied`). The rest is a sub-agent's, whose run
    /// its parent's replica stores claimed, and which is read again from the
    /// parent's journal when the child is recovered.
    pub(crate) fn carried(&self) -> Option<String> {
        if self.model.is_none() && self.history.is_none() {
            return None;
        }
        let mut carried = serde_json::Map::new();
        if let Some(model) = &self.model {
            carried.insert("model".into(), model.clone().into());
        }
        if let Some(history) = &self.history {
            match serde_json::to_value(history) {
                Ok(h) => {
                    carried.insert("history".into(), h);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "could not write a run's supplied history for the other replicas; only this one runs it as asked");
                    return None;
                }
            }
        }
        Some(serde_json::Value::Object(carried).to_string())
    }

    /// The overrides another replica stored with a run ([`Self::carried`]).
    pub(crate) fn from_carried(json: &str) -> std::result::Result<Self, serde_json::Error> {
        let mut carried: serde_json::Map<String, serde_json::Value> = serde_json::from_str(json)?;
        let model = carried
            .remove("model")
            .map(serde_json::from_value)
            .transpose()?;
        let history = carried
            .remove("history")
            .map(serde_json::from_value)
            .transpose()?;
        Ok(RunOverrides {
            model,
            history,
            ..RunOverrides::default()
        })
    }
}

/// Overrides of runs accepted here and not started yet, by run id.
#[derive(Default)]
pub(crate) struct Supplied(Mutex<HashMap<String, RunOverrides>>);

impl Supplied {
    pub(crate) fn put(&self, run_id: &str, overrides: RunOverrides) {
        if overrides.is_empty() {
            return;
        }
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        map.insert(run_id.to_owned(), overrides);
    }

    /// Keeps `overrides` for `run_id` unless this process holds some
    /// already (it took the message: what it holds is the same).
    pub(crate) fn put_if_absent(&self, run_id: &str, overrides: RunOverrides) {
        if overrides.is_empty() {
            return;
        }
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        map.entry(run_id.to_owned()).or_insert(overrides);
    }

    /// The run's overrides (empty when it has none), removed: a run uses them once.
    pub(crate) fn take(&self, run_id: &str) -> RunOverrides {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        map.remove(run_id).unwrap_or_default()
    }
}

impl Runtime {
    /// Accepts a message as `ingest` does, with `overrides` for its run. The
    /// model is checked now (`UnknownModel`), and secrets in a supplied
    /// history are redacted as in the message itself. A message with
    /// overrides is never steered into an active run: it makes its own run.
    pub async fn ingest_with(
        &self,
        mut inbound: Inbound,
        mut overrides: RunOverrides,
    ) -> Result<RunEnvelope> {
        crate::ingest::refuse_delegate_source(&inbound)?;
        // Only the `delegate` tool starts a sub-agent, and only it gives a
        // run a permission mode other than its thread's.
        overrides.parent_run_id = None;
        overrides.mode = None;
        if let Some(model) = &overrides.model {
            self.inner.live().catalog.resolve(model)?;
        }
        if let Some(history) = overrides.history.as_mut() {
            redact_history(history);
        }
        if !overrides.is_empty() {
            inbound.delivery_mode = hearth_core::DeliveryMode::FollowUp;
        }
        self.ingest_inner(inbound, overrides).await
    }
}

fn redact_history(history: &mut [Message]) {
    let scanner = SecretScanner::new();
    for m in history {
        for c in &mut m.content {
            if let Content::Text { text } = c {
                let redacted = scanner.redact(text);
                if !redacted.findings.is_empty() {
                    *text = redacted.text.into_owned();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use hearth_core::Role;

    use super::*;

    #[test]
    fn overrides_are_taken_once_and_empty_ones_are_not_kept() {
        let s = Supplied::default();
        s.put("r1", RunOverrides::default());
        assert!(s.0.lock().unwrap().is_empty());
        let o = RunOverrides {
            history: Some(vec![Message::text(Role::User, "hi")]),
            model: Some("echo/echo".into()),
            background: false,
            tools: None,
            max_steps: None,
            parent_run_id: None,
            mode: None,
        };
        s.put("r2", o.clone());
        assert_eq!(s.take("r2"), o);
        assert_eq!(s.take("r2"), RunOverrides::default());
    }

    #[test]
    fn a_model_and_a_history_travel_and_nothing_else_does() {
        let o = RunOverrides {
            history: Some(vec![Message::text(Role::User, "where did I park")]),
            model: Some("fake/other".into()),
            background: true,
            tools: Some(vec!["web_fetch".into()]),
            max_steps: Some(3),
            parent_run_id: Some("run_p".into()),
            mode: Some("plan".into()),
        };
        let json = o.carried().unwrap();
        let back = RunOverrides::from_carried(&json).unwrap();
        assert_eq!(back.model, o.model);
        assert_eq!(back.history, o.history);
        assert_eq!(back.tools, None);
        assert_eq!(back.max_steps, None);
        assert_eq!(back.mode, None);
        assert!(!back.background);
        let plain = RunOverrides {
            background: true,
            ..RunOverrides::default()
        };
        assert_eq!(plain.carried(), None);
        assert!(RunOverrides::from_carried("not json").is_err());
    }

    #[test]
    fn what_this_process_holds_is_kept_over_what_the_store_returns() {
        let s = Supplied::default();
        let mine = RunOverrides {
            model: Some("fake/a".into()),
            ..RunOverrides::default()
        };
        s.put("r1", mine.clone());
        s.put_if_absent(
            "r1",
            RunOverrides {
                model: Some("fake/b".into()),
                ..RunOverrides::default()
            },
        );
        assert_eq!(s.take("r1"), mine);
        s.put_if_absent("r2", mine.clone());
        assert_eq!(s.take("r2"), mine);
    }

    #[test]
    fn secrets_in_a_supplied_history_are_redacted() {
        let key = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJ";
        let mut h = vec![Message::text(Role::User, format!("my key is {key}"))];
        redact_history(&mut h);
        let text = h[0].joined_text();
        assert!(!text.contains(key), "{text}");
        assert!(text.starts_with("my key is "), "{text}");
    }
}
