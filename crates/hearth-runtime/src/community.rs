//! Keys that belong to a community: a Discord guild, a Slack workspace or
//! a Telegram group may give hearth its own key for a provider, so its
//! members' runs are paid for by the community. The key is sealed like
//! other secrets (under `HEARTH_SECRET_KEY`, the scope and provider bound
//! in as associated data), audited when set or removed, never shown again,
//! and used only by runs asked in exactly that scope (a DM or another
//! community never uses it). A key grants no capability.
//!
//! A community that removed its key fails its runs on that provider with a
//! message saying so, unless `[llm] community_fallback = true` lets them
//! use the operator's key again; a community that never set one uses the
//! operator's, as before.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use hearth_core::records::{AuditEvent, ModelUsage, RunFilter, ScopeCredentialInfo, UsageRow};
use hearth_core::{ModelRef, now_ms};
use hearth_llm::Provider;
use hearth_store::secrets::{Sealer, SecretString};

use crate::builder::KEY_VAR;
use crate::error::{Result, RuntimeError};
use crate::live::Live;
use crate::runtime::Runtime;
use crate::usage::UsageReport;

/// Longest key accepted (provider keys are far shorter).
const MAX_KEY_BYTES: usize = 4096;

/// The kinds of scope a community key may belong to, by prefix.
const COMMUNITY_SCOPES: [&str; 3] = ["discord:guild:", "slack:team:", "telegram:chat:"];

/// Checks `scope` is a community's: `discord:guild:<id>`,
/// `slack:team:<id>` or `telegram:chat:<id>` (a group: a negative id).
pub fn check_scope(scope: &str) -> Result<()> {
    let id = COMMUNITY_SCOPES
        .iter()
        .find_map(|p| scope.strip_prefix(p).map(|id| (*p, id)));
    let ok = match id {
        Some(("discord:guild:", id)) => !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()),
        Some(("slack:team:", id)) => {
            !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric())
        }
        Some((_, id)) => id
            .strip_prefix('-')
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())),
        None => false,
    };
    if ok {
        return Ok(());
    }
    Err(RuntimeError::InvalidInput(format!(
        "{scope:?} is not a community scope: use discord:guild:<id>, slack:team:<id> or \
         telegram:chat:<group id> (negative)"
    )))
}

/// The name a community key is sealed under (its associated data): a key
/// copied to another scope or provider does not open.
fn sealed_name(scope: &str, provider: &str) -> String {
    format!("scope-credential:{scope}:{provider}")
}

/// The sealer of `live`'s environment, or what to do without one.
fn sealer(live: &Live) -> Result<Sealer> {
    let key = live.env.get(KEY_VAR).ok_or_else(|| {
        RuntimeError::InvalidConfig(format!(
            "community keys are sealed with {KEY_VAR}, which this hearth was started without: \
             generate one with `hearth secrets keygen`, export it and restart"
        ))
    })?;
    Sealer::from_base64(key).map_err(|e| RuntimeError::InvalidConfig(e.to_string()))
}

/// What a run in a community uses for one provider.
enum Choice {
    /// The community's own key.
    Own(SecretString),
    /// The operator's (the community never set one, or fallback is on).
    Operator,
    /// None: the community removed its key and fallback is off.
    Removed,
}

impl Runtime {
    fn checked_provider(&self, provider: &str) -> Result<()> {
        if self.inner.live().catalog.takes_key(provider) {
            return Ok(());
        }
        Err(RuntimeError::InvalidInput(format!(
            "{provider:?} is not a configured provider that takes a key; see [llm.providers]"
        )))
    }

    async fn audit_key(&self, actor: &str, action: &str, scope: &str, provider: &str) {
        let event = AuditEvent {
            at: now_ms(),
            actor: actor.to_owned(),
            action: action.to_owned(),
            target: provider.to_owned(),
            outcome: "ok".into(),
            capability: None,
            scope: Some(scope.to_owned()),
        };
        if let Err(e) = self.inner.store.append_audit(event).await {
            tracing::warn!(error = %e, action, "could not write a community key change to the audit log");
        }
    }

    /// Sets `scope`'s own key for `provider`, by `actor` (audited; the key
    /// is sealed and never shown again).
    pub async fn set_scope_credential(
        &self,
        scope: &str,
        provider: &str,
        key: SecretString,
        actor: &str,
    ) -> Result<()> {
        check_scope(scope)?;
        self.checked_provider(provider)?;
        let k = key.expose().trim();
        if k.is_empty() || k.len() > MAX_KEY_BYTES || k.chars().any(|c| c.is_control() || c == ' ')
        {
            return Err(RuntimeError::InvalidInput(format!(
                "the key must be 1 to {MAX_KEY_BYTES} bytes of printable text without spaces"
            )));
        }
        let live = self.inner.live();
        let sealed = sealer(&live)?
            .seal(&sealed_name(scope, provider), k.as_bytes())
            .map_err(|e| RuntimeError::Internal(e.to_string()))?;
        self.inner
            .store
            .put_scope_credential(scope, provider, sealed, now_ms())
            .await?;
        tracing::info!(scope, provider, "a community key was set");
        self.audit_key(actor, "credential.set", scope, provider)
            .await;
        Ok(())
    }

    /// Removes `scope`'s key for `provider`, by `actor`; false when none
    /// was set.
    pub async fn remove_scope_credential(
        &self,
        scope: &str,
        provider: &str,
        actor: &str,
    ) -> Result<bool> {
        check_scope(scope)?;
        let removed = self
            .inner
            .store
            .remove_scope_credential(scope, provider, now_ms())
            .await?;
        if removed {
            tracing::info!(scope, provider, "a community key was removed");
            self.audit_key(actor, "credential.remove", scope, provider)
                .await;
        }
        Ok(removed)
    }

    /// The providers `scope` has its own key for, with when each was set.
    pub async fn scope_credentials(&self, scope: &str) -> Result<Vec<ScopeCredentialInfo>> {
        check_scope(scope)?;
        Ok(self.inner.store.list_scope_credentials(scope).await?)
    }

    /// Today's (UTC) model usage of the runs asked in `scope`, all
    /// together: calls, tokens and estimated cost, never per user or per
    /// conversation. A conversation belongs to the scope its runs are asked
    /// in (a Discord channel to its server); incognito calls, kept without
    /// their conversation, are not counted.
    pub async fn scope_usage_today(&self, scope: &str) -> Result<UsageReport> {
        check_scope(scope)?;
        let now = now_ms();
        let since = now - now.rem_euclid(86_400_000);
        let calls = self.inner.store.calls_since(since).await?;
        let mut inside: HashMap<String, bool> = HashMap::new();
        let mut by_model: BTreeMap<String, ModelUsage> = BTreeMap::new();
        for c in calls {
            let Some(thread) = c.thread_key else { continue };
            let counted = match inside.get(&thread) {
                Some(known) => *known,
                None => {
                    let filter = RunFilter {
                        thread_key: Some(thread.clone()),
                        status: None,
                        limit: 1,
                        ..RunFilter::default()
                    };
                    let runs = self.inner.store.list_runs(&filter).await?;
                    let known = runs
                        .first()
                        .is_some_and(|r| r.scope.as_deref() == Some(scope));
                    inside.insert(thread, known);
                    known
                }
            };
            if !counted {
                continue;
            }
            let m = by_model
                .entry(c.model.clone())
                .or_insert_with(|| ModelUsage {
                    model: c.model.clone(),
                    ..ModelUsage::default()
                });
            m.calls += 1;
            m.input_tokens += c.input_tokens;
            m.output_tokens += c.output_tokens;
            m.cached_tokens += c.cached_tokens;
            m.cache_write_tokens += c.cache_write_tokens;
            m.reasoning_tokens += c.reasoning_tokens;
        }
        let by_model: Vec<ModelUsage> = by_model.into_values().collect();
        let row = UsageRow {
            key: scope.to_owned(),
            calls: by_model.iter().map(|m| m.calls).sum(),
            input_tokens: by_model.iter().map(|m| m.input_tokens).sum(),
            output_tokens: by_model.iter().map(|m| m.output_tokens).sum(),
            cached_tokens: by_model.iter().map(|m| m.cached_tokens).sum(),
            untracked_calls: 0,
            by_model,
        };
        Ok(crate::usage::report(
            &row,
            &self.inner.live().catalog.prices,
        ))
    }

    async fn choice(&self, live: &Live, scope: &str, provider: &str) -> Result<Choice> {
        let Some(stored) = self.inner.store.scope_credential(scope, provider).await? else {
            return Ok(Choice::Operator);
        };
        match stored.sealed {
            Some(sealed) => {
                let key = sealer(live)?
                    .open(&sealed_name(scope, provider), &sealed)
                    .map_err(|e| RuntimeError::InvalidConfig(e.to_string()))?;
                Ok(Choice::Own(key))
            }
            None if live.config.llm.community_fallback => Ok(Choice::Operator),
            None => Ok(Choice::Removed),
        }
    }

    /// The models a run in `scope` may call, with the community's own key
    /// where it set one: a model whose provider's community key was removed
    /// (fallback off) is left out. An error (the run fails with it) when no
    /// model is left, saying why.
    pub(crate) async fn with_community_keys(
        &self,
        live: &Live,
        scope: &str,
        candidates: Vec<(ModelRef, Arc<dyn Provider>)>,
    ) -> std::result::Result<Vec<(ModelRef, Arc<dyn Provider>)>, (&'static str, String)> {
        if check_scope(scope).is_err() {
            // A DM, the API, `global`: the operator's keys, always.
            return Ok(candidates);
        }
        let mut out = Vec::with_capacity(candidates.len());
        let mut removed = Vec::new();
        for (model, provider) in candidates {
            let choice = self
                .choice(live, scope, &model.provider)
                .await
                .map_err(|e| {
                    let why = format!(
                        "this community's key for {} cannot be used: {e}",
                        model.provider
                    );
                    ("community_key_unusable", why)
                })?;
            match choice {
                Choice::Operator => out.push((model, provider)),
                Choice::Own(key) => match live.catalog.with_key(&model.provider, key.expose()) {
                    Some(Ok(own)) => out.push((model, own)),
                    Some(Err(e)) => {
                        let why = format!(
                            "this community's key for {} is unusable: {e}",
                            model.provider
                        );
                        return Err(("community_key_unusable", why));
                    }
                    None => out.push((model, provider)),
                },
                Choice::Removed => removed.push(model.provider),
            }
        }
        if out.is_empty() {
            removed.dedup();
            return Err((
                "community_key_removed",
                format!(
                    "this community's key for {} was removed, and runs here do not fall back to the \
                 operator's key: an admin of this community can set a new one (`/llm key set`, \
                 or `hearth credentials set --scope {scope} --provider {}`), or the operator can \
                 set [llm] community_fallback = true",
                    removed.join(", "),
                    removed.first().map_or("<provider>", String::as_str),
                ),
            ));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_communities_scopes_take_keys() {
        for ok in [
            "discord:guild:123",
            "slack:team:T0ABC",
            "telegram:chat:-100200",
        ] {
            assert!(check_scope(ok).is_ok(), "{ok}");
        }
        for bad in [
            "global",
            "discord:guild:",
            "discord:guild:12a",
            "telegram:chat:42",
            "slack:team:T 1",
            "sms:+15551234567",
            "discord:channel:1",
        ] {
            assert!(check_scope(bad).is_err(), "{bad}");
        }
    }
}
