//! The operations a surface needs besides messages and runs: readiness, API
//! tokens, permissions, the audit log, the model list and the tool list.
//!
//! Surfaces call these instead of reaching into the store, the catalog or the
//! engine, so a second store backend or a new surface changes one place.

use std::collections::BTreeMap;

use hearth_agent::confirm::hash_token;
use hearth_agent::policy::{
    PolicyError, Preset, decide, decide_extra, parse_grantable, scope_chain, subjects,
};
use hearth_core::ModelRef;
use hearth_store::{AuditEvent, Grant, MemoryHit, MemoryScope};

use crate::catalog::Capabilities;
use crate::error::{Result, RuntimeError};
use crate::memory::{FoundMemory, SearchError, SearchMode};
use crate::runtime::Runtime;

/// One model a surface can offer, with what it can do.
#[derive(Debug, Clone)]
pub struct ModelInfo {
    /// `<provider>/<model>`.
    pub model: ModelRef,
    /// Its capabilities as the catalog knows them.
    pub capabilities: Capabilities,
}

/// The configured models and the default one.
#[derive(Debug, Clone)]
pub struct ModelList {
    /// The model threads use unless they choose another.
    pub default: ModelRef,
    /// Every configured model, by provider then model.
    pub models: Vec<ModelInfo>,
    /// The window assumed for a model whose `context_window` is `None`.
    pub default_context_tokens: u32,
}

/// One tool the model can be offered.
#[derive(Debug, Clone)]
pub struct ToolInfo {
    /// Wire name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// `read` or `write`.
    pub class: &'static str,
    /// The capability a user needs, if any.
    pub capability: Option<&'static str>,
    /// `builtin`, `mcp:<server>` or `skill:<name>`.
    pub source: String,
    /// False while it cannot run (its MCP server is down).
    pub available: bool,
}

/// Whether a user holds a capability, and through what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionCheck {
    /// Whether the user holds it.
    pub allowed: bool,
    /// `admin`, `preset` or `grant`; `None` when not allowed.
    pub via: Option<&'static str>,
}

impl Runtime {
    /// Ok when the store answers (readiness).
    pub async fn store_ready(&self) -> Result<()> {
        Ok(self.inner.store.ping().await?)
    }

    /// Whether `token` (as the client sent it) is an unrevoked API token.
    /// The store keeps only its hash. Asks the store every time: a token
    /// revoked by `hearth token revoke` (another process) stops working at
    /// once.
    pub async fn api_token_valid(&self, token: &str) -> Result<bool> {
        Ok(self
            .inner
            .store
            .token_hash_valid(&hash_token(token))
            .await?)
    }

    /// The name of the unrevoked API token `token`, if it is one. Asks the
    /// store every time, as `api_token_valid` does.
    pub async fn api_token_name(&self, token: &str) -> Result<Option<String>> {
        Ok(self.inner.store.token_name(&hash_token(token)).await?)
    }

    /// Stores a dashboard session (see `hearth_store::TokenStore`): in the
    /// store, so every replica sharing it knows the login.
    pub async fn open_ui_session(&self, session: hearth_core::records::UiSession) -> Result<()> {
        Ok(self.inner.store.create_ui_session(session).await?)
    }

    /// The dashboard session whose id hashes to `id_hash`, with its token's
    /// holder, while it lasts and its token is unrevoked (asked each time).
    pub async fn ui_session(
        &self,
        id_hash: &str,
    ) -> Result<
        Option<(
            hearth_core::records::UiSession,
            hearth_core::records::TokenHolder,
        )>,
    > {
        Ok(self
            .inner
            .store
            .ui_session(id_hash, hearth_core::now_ms())
            .await?)
    }

    /// Ends a dashboard session; whether it existed.
    pub async fn end_ui_session(&self, id_hash: &str) -> Result<bool> {
        Ok(self.inner.store.end_ui_session(id_hash).await?)
    }

    /// Who holds the unrevoked API token `token` (as the client sent it):
    /// its name, and the user it acts as when it is bound to one. Asks the
    /// store every time, as `api_token_valid` does.
    pub async fn api_token_holder(
        &self,
        token: &str,
    ) -> Result<Option<hearth_core::records::TokenHolder>> {
        Ok(self.inner.store.token_holder(&hash_token(token)).await?)
    }

    /// Stores a new API token (by its hash; the caller shows the secret once).
    pub async fn create_api_token(&self, token: hearth_core::records::NewToken) -> Result<()> {
        Ok(self.inner.store.create_token(token).await?)
    }

    /// Whether any unrevoked API token exists.
    pub async fn api_tokens_exist(&self) -> Result<bool> {
        Ok(self.inner.store.active_token_count().await? > 0)
    }

    /// Search of `user_key`'s user-wide memories, plus those bound to
    /// `thread_key` when given, best first, at most `limit` (the store's
    /// bounds apply): by words and meaning when embeddings are on, else by
    /// words. For surfaces where a user searches their own memory outside a
    /// run (the MCP server's `memory_search`).
    pub async fn search_memories(
        &self,
        user_key: &str,
        thread_key: Option<&str>,
        query: &str,
        limit: u32,
    ) -> Result<Vec<MemoryHit>> {
        let found = self
            .find_memories(user_key, thread_key, query, None, limit)
            .await?;
        Ok(found
            .into_iter()
            .map(|f| MemoryHit {
                memory: f.memory,
                score: f.score,
            })
            .collect())
    }

    /// Embeds, now, memories that have no vector by the embeddings model
    /// (what the background pass does after saves and at start); returns
    /// how many. 0 when embeddings are off or the provider fails.
    pub async fn embed_pending_memories(&self) -> usize {
        self.inner.memory.pass().await
    }

    /// `<provider>/<model>` that embeds memories, when search by meaning is on.
    pub fn memory_embeddings(&self) -> Option<&str> {
        self.inner.memory.embeddings()
    }

    /// Memories of `user_key` (and `thread_key`'s) matching `query` by
    /// `mode` (`None`: hybrid when embeddings are on, else text), best first,
    /// at most `limit` (0 means 10; at most 100), each with the ranking that
    /// found it. A mode that needs embeddings while they are off is
    /// `InvalidInput`; a query that cannot be embedded in vector mode is
    /// `Internal`.
    pub async fn find_memories(
        &self,
        user_key: &str,
        thread_key: Option<&str>,
        query: &str,
        mode: Option<SearchMode>,
        limit: u32,
    ) -> Result<Vec<FoundMemory>> {
        let scope = MemoryScope {
            user_key: user_key.to_owned(),
            thread_key: thread_key.map(str::to_owned),
        };
        let memory = &self.inner.memory;
        let mode = mode.unwrap_or(if memory.embeddings().is_some() {
            SearchMode::Hybrid
        } else {
            SearchMode::Text
        });
        memory
            .search(&scope, query, mode, limit, false)
            .await
            .map_err(|e| match e {
                SearchError::Store(s) => RuntimeError::Store(s),
                SearchError::EmbeddingsOff => RuntimeError::InvalidInput(e.to_string()),
                SearchError::Embed(_) => RuntimeError::Internal(e.to_string()),
            })
    }

    /// Forgets one of `user_key`'s memories; false when they have no
    /// memory `id` (another user's is not theirs to forget).
    pub async fn forget_memory(&self, user_key: &str, id: i64) -> Result<bool> {
        crate::runtime::check_key("user_key", user_key)?;
        Ok(self.inner.store.forget_memory(user_key, id).await?)
    }

    /// Every memory of `user_key` (user-wide and per thread), oldest first:
    /// what an export hands over.
    pub async fn export_memories(&self, user_key: &str) -> Result<Vec<hearth_store::MemoryRecord>> {
        crate::runtime::check_key("user_key", user_key)?;
        Ok(self.inner.store.export_user_memories(user_key).await?)
    }

    /// The grants in `scope` (every scope when `None`).
    pub async fn list_grants(&self, scope: Option<&str>) -> Result<Vec<Grant>> {
        Ok(self.inner.store.list_grants(scope).await?)
    }

    /// Stores a grant and its audit event in one transaction; false when the
    /// grant existed (then nothing is stored).
    pub async fn add_grant(&self, grant: Grant, event: AuditEvent) -> Result<bool> {
        Ok(self.inner.store.add_grant_audited(grant, event).await?)
    }

    /// Removes a grant and stores its audit event in one transaction; false
    /// when there was no such grant (then nothing is stored).
    pub async fn remove_grant(
        &self,
        subject: &str,
        capability: &str,
        scope: &str,
        event: AuditEvent,
    ) -> Result<bool> {
        Ok(self
            .inner
            .store
            .remove_grant_audited(subject, capability, scope, event)
            .await?)
    }

    /// Whether `user_key`, holding `roles` (a Discord member's role ids;
    /// grants to `role:<id>` count), holds `capability` in `scope` (and its
    /// parents) under the `[permissions]` settings.
    pub async fn check_permission(
        &self,
        user_key: &str,
        roles: &[String],
        capability: &str,
        scope: &str,
    ) -> Result<PermissionCheck> {
        let chain = scope_chain(scope).map_err(|e| RuntimeError::InvalidInput(e.to_string()))?;
        let grants = self
            .inner
            .store
            .grants_for(&subjects(user_key, roles), &chain)
            .await?;
        let live = self.inner.live();
        let policy = live.engine.policy();
        let d = match self.extra_capabilities().get(capability) {
            Some(least) => decide_extra(policy, user_key, roles, capability, *least, &grants),
            None => decide(policy, user_key, roles, capability, &grants),
        };
        Ok(PermissionCheck {
            allowed: d.allowed,
            via: d.via.map(|v| v.as_str()),
        })
    }

    /// The capabilities beyond the fixed list that this hearth's tools need
    /// (each configured MCP server's `mcp.<server>`), with the least preset
    /// holding each.
    pub fn extra_capabilities(&self) -> BTreeMap<String, Preset> {
        self.inner
            .live()
            .engine
            .tools()
            .extra_capabilities()
            .into_iter()
            .filter_map(|(cap, preset)| Some((cap, Preset::parse(preset)?)))
            .collect()
    }

    /// The canonical form of a name a grant may give: a fixed capability,
    /// `preset:<name>`, or one of [`Runtime::extra_capabilities`].
    pub fn grantable(&self, name: &str) -> std::result::Result<String, PolicyError> {
        parse_grantable(name, &self.extra_capabilities())
    }

    /// The newest `limit` audit events, newest first.
    pub async fn list_audit(&self, limit: u32) -> Result<Vec<AuditEvent>> {
        Ok(self.inner.store.list_audit(limit).await?)
    }

    /// The configured models. A provider that lists no models contributes
    /// the default model when it is that model's provider.
    pub fn models(&self) -> ModelList {
        let catalog = &self.inner.live().catalog;
        let default = catalog.default_model().clone();
        let mut models = Vec::new();
        for (name, entry) in catalog.providers() {
            let mut names = entry.models.clone();
            if names.is_empty() && default.provider == *name {
                names.push(default.model.clone());
            }
            for m in names {
                let model = ModelRef {
                    provider: name.clone(),
                    model: m,
                };
                let capabilities = catalog.capabilities(&model);
                models.push(ModelInfo {
                    model,
                    capabilities,
                });
            }
        }
        ModelList {
            default,
            models,
            default_context_tokens: self.inner.live().engine.compaction().default_context_tokens,
        }
    }

    /// Every registered tool; with `channel`, the tools that channel offers.
    pub fn tools(&self, channel: Option<&str>) -> Vec<ToolInfo> {
        let live = self.inner.live();
        let registry = live.engine.tools();
        let info = |t: std::sync::Arc<dyn hearth_tools::Tool>| ToolInfo {
            name: t.spec().name.clone(),
            description: t.spec().description.clone(),
            class: t.class().as_str(),
            capability: t.capability(),
            source: t.source(),
            available: t.available(),
        };
        match channel {
            Some(channel) => registry.for_channel(channel).map(info).collect(),
            None => registry.iter().map(info).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use crate::runtime::check_key;

    proptest! {
        /// Any text is either accepted as a key or refused with an error
        /// that names the key; it never panics, and the verdict matches the
        /// documented rule (1 to 256 characters, no control characters).
        #[test]
        fn check_key_never_panics_and_follows_its_rule(s in any::<String>()) {
            let ok = check_key("thread_key", &s).is_ok();
            let rule = !s.is_empty() && s.chars().count() <= 256 && !s.chars().any(char::is_control);
            prop_assert_eq!(ok, rule);
            if let Err(e) = check_key("thread_key", &s) {
                prop_assert!(e.to_string().contains("thread_key"));
            }
        }

        /// Keys near the length bound, built from multibyte characters:
        /// characters are counted, not bytes, as the OpenAPI document's
        /// `maxLength` counts them.
        #[test]
        fn check_key_counts_characters_of_multibyte_keys(n in 0usize..300) {
            let s = "é".repeat(n);
            prop_assert_eq!(check_key("user_key", &s).is_ok(), (1..=256).contains(&n));
        }
    }
}
