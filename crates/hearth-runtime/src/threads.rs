//! Per-thread settings (model, thinking, sessions) and usage reports: the
//! parts of `Runtime` that are not the life of a run.

use std::sync::Arc;

use hearth_core::{ModelRef, ThinkingLevel, ThreadKey, now_ms};
use hearth_store::UsageQuery;
use tracing::warn;

use crate::error::Result;
use crate::runtime::Runtime;
use crate::usage::{self, UsageReport};

/// A thread's runtime settings as the API shows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadRuntime {
    /// The thread.
    pub thread_key: String,
    /// Effective model, `<provider>/<model>`.
    pub model: String,
    /// Thinking level.
    pub thinking: String,
    /// Incognito flag.
    pub incognito: bool,
    /// Messages stored in its history.
    pub message_count: u64,
    /// The permission mode in force.
    pub mode: hearth_core::PermissionMode,
    /// When the mode lapses, if it does.
    pub mode_expires_at: Option<hearth_core::Timestamp>,
}

impl Runtime {
    /// A thread's runtime settings.
    pub async fn thread_runtime(&self, thread_key: &ThreadKey) -> Result<ThreadRuntime> {
        let mut st = self.inner.store.thread_state(thread_key).await?;
        if let Some(memory) = self.inner.incognito.opened() {
            st.message_count += memory.thread_state(thread_key).await?.message_count;
        }
        let mode = crate::modes::in_force(&self.inner.live(), &st, now_ms());
        let model = st
            .model
            .unwrap_or_else(|| self.inner.live().catalog.default_model().to_string());
        // The effective level: a model without reasoning control runs `off`
        // (the requested level is kept for when the thread switches back).
        let thinks = ModelRef::parse(&model)
            .map(|m| self.inner.live().catalog.capabilities(&m).thinking)
            .unwrap_or(false);
        Ok(ThreadRuntime {
            thread_key: thread_key.to_string(),
            model,
            thinking: if thinks {
                st.thinking
            } else {
                "off".to_owned()
            },
            incognito: st.incognito,
            message_count: st.message_count,
            mode: mode.mode,
            mode_expires_at: mode.expires_at,
        })
    }

    /// Sets a thread's model after checking it exists.
    pub async fn set_model(&self, thread_key: &ThreadKey, model: &str) -> Result<ThreadRuntime> {
        let (m, _) = self.inner.live().catalog.resolve(model)?;
        self.inner
            .store
            .set_thread_model(thread_key, Some(&m.to_string()))
            .await?;
        self.thread_runtime(thread_key).await
    }

    /// Sets a thread's thinking level.
    pub async fn set_thinking(
        &self,
        thread_key: &ThreadKey,
        level: ThinkingLevel,
    ) -> Result<ThreadRuntime> {
        self.inner
            .store
            .set_thread_thinking(thread_key, level.as_str())
            .await?;
        self.thread_runtime(thread_key).await
    }

    /// Cancels the thread's runs and clears its history. The active run is
    /// marked cancelled in the same transaction that clears the history, so
    /// no answer of the old session can land in the new one, and a failure
    /// leaves both as they were.
    pub async fn new_session(&self, thread_key: &ThreadKey) -> Result<ThreadRuntime> {
        let active = self.inner.scheduler.active_run(thread_key);
        for run_id in self.inner.scheduler.runs_of(thread_key) {
            if active.as_deref() != Some(run_id.as_str()) {
                self.cancel(&run_id).await?;
            }
        }
        let disk = &self.inner.store;
        let active_on_disk = active
            .as_deref()
            .is_none_or(|id| Arc::ptr_eq(&self.store_of_run(id), disk));
        let now = now_ms();
        disk.new_session(
            thread_key,
            active.as_deref().filter(|_| active_on_disk),
            now,
        )
        .await?;
        if let Some(memory) = self.inner.incognito.opened() {
            memory
                .new_session(
                    thread_key,
                    active.as_deref().filter(|_| !active_on_disk),
                    now,
                )
                .await?;
        }
        if let Some(run_id) = &active {
            // Stop its engine too; its end finds the run cancelled already.
            self.stop_active(thread_key, run_id).await;
        }
        self.thread_runtime(thread_key).await
    }

    /// Whether no run of a user other than `user_key` is on `thread_key`
    /// (a thread without runs is anyone's to start): an index seek in the
    /// store, and in this process's incognito threads.
    pub async fn thread_is_users(&self, thread_key: &str, user_key: &str) -> Result<bool> {
        if self
            .inner
            .store
            .thread_has_other_users(thread_key, user_key)
            .await?
        {
            return Ok(false);
        }
        match self.inner.incognito.opened() {
            Some(memory) => Ok(!memory.thread_has_other_users(thread_key, user_key).await?),
            None => Ok(true),
        }
    }

    /// Keys of stored threads that start with `prefix`, in byte order,
    /// after `after`, at most `limit` (incognito threads are not searched:
    /// nothing of theirs is stored).
    pub async fn find_thread_keys(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<String>> {
        Ok(self.inner.store.thread_keys(prefix, after, limit).await?)
    }

    /// Stored messages of any thread holding every word of `text`, newest
    /// first, older than message `before`, at most `limit`.
    pub async fn search_messages(
        &self,
        text: &str,
        before: Option<i64>,
        limit: u32,
    ) -> Result<Vec<hearth_core::records::MessageHit>> {
        Ok(self
            .inner
            .store
            .search_messages(text, before, limit)
            .await?)
    }

    /// Model calls grouped, with estimated cost.
    pub async fn usage(&self, query: &UsageQuery) -> Result<Vec<UsageReport>> {
        let rows = self.inner.store.usage(query).await?;
        Ok(rows
            .iter()
            .map(|r| usage::report(r, &self.inner.live().catalog.prices))
            .collect())
    }

    /// Model calls grouped, each group with its estimated cost and split
    /// by model (`<provider>/<model>`, each with its own cost): what the
    /// dashboard's chart stacks per day.
    pub async fn usage_by_model(
        &self,
        query: &UsageQuery,
    ) -> Result<Vec<(UsageReport, Vec<UsageReport>)>> {
        let rows = self.inner.store.usage(query).await?;
        let prices = &self.inner.live().catalog.prices;
        Ok(rows
            .iter()
            .map(|r| (usage::report(r, prices), usage::by_model(r, prices)))
            .collect())
    }

    /// Warns once per UTC day when today's estimated spend crosses the
    /// configured threshold (checked at most every 30 s).
    pub(crate) async fn check_spend(&self) {
        let Some(threshold) = self.inner.live().daily_spend_alert_usd else {
            return;
        };
        if !self.inner.spend_alert.due() {
            return;
        }
        let now = now_ms();
        let Ok(today) = self.usage(&usage::today(now)).await else {
            return;
        };
        let spent: f64 = today.iter().filter_map(|r| r.cost_usd).sum();
        if self
            .inner
            .spend_alert
            .crossed(now / 86_400_000, spent, threshold)
        {
            metrics::counter!("hearth_spend_alerts_total").increment(1);
            self.inner.notices.publish(crate::notices::Notice {
                event: "spend.daily_exceeded".into(),
                at: now,
                data: serde_json::json!({ "spent_usd": spent, "threshold_usd": threshold }),
            });
            warn!(
                spent_usd = spent,
                threshold_usd = threshold,
                "daily spend threshold crossed (estimated from list prices)"
            );
        }
    }
}
