//! Memory that finds by meaning: with `[memory] embeddings` set, each saved
//! memory is embedded by that model and searches merge the full-text
//! ranking with a cosine ranking (reciprocal-rank fusion), scored here in
//! Rust by brute force over the user's vectors (see `docs/scaling.md`).
//!
//! A memory is embedded as it is saved; when that fails (or a budget pool
//! refuses it) it stays stored without a vector, and a background pass
//! embeds what is missing: once at start and after each save, a bounded
//! number of batches per pass. Embedding calls are ordinary model calls:
//! they hold and settle budget like a run's, and each is a usage row with
//! purpose `embedding`. Incognito threads write no memory, so none is
//! embedded; their searches go by meaning only when the model is local.

mod fusion;
mod reembed;

use std::sync::{Arc, OnceLock, Weak};
use std::time::Instant;

use hearth_agent::budget::{Estimate, Payer};
use hearth_core::{ModelRef, now_ms};
use hearth_llm::Provider;
use hearth_llm::prices::Tokens;
use hearth_store::{MemoryHit, MemoryRecord, MemoryScope, ModelCall, Store, StoreError};
use tokio::sync::Notify;
use tracing::{debug, warn};

pub use fusion::{FoundMemory, Matched};
pub use reembed::{ReembedError, for_command};

use crate::runtime::Inner;

/// Memories embedded per call of the background pass.
const PASS_BATCH: u32 = 32;
/// Batches per pass at most, so one pass cannot hold the provider forever;
/// the next save (or start) resumes where it stopped.
const PASS_BATCHES: usize = 50;
/// Candidates taken from each ranking before fusion.
const CANDIDATES: u32 = 100;
/// Results when the caller asks for 0, and at most.
const DEFAULT_LIMIT: u32 = 10;
const MAX_LIMIT: u32 = 100;

/// How a search finds memories.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchMode {
    /// Words and meaning, fused.
    Hybrid,
    /// Words only (full text).
    Text,
    /// Meaning only (cosine of embeddings).
    Vector,
}

impl SearchMode {
    /// `hybrid`, `text` or `vector`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "hybrid" => Some(Self::Hybrid),
            "text" => Some(Self::Text),
            "vector" => Some(Self::Vector),
            _ => None,
        }
    }
}

/// Why a search failed.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A mode that needs embeddings was asked while they are off.
    #[error(
        "search by meaning needs [memory] embeddings = \"<provider>/<model>\" in hearth.toml; \
         use mode=text"
    )]
    EmbeddingsOff,
    /// The query could not be embedded (vector mode only; hybrid falls back
    /// to words).
    #[error("could not embed the query: {0}")]
    Embed(String),
}

/// The embedding model in use.
struct Embedder {
    model: ModelRef,
    /// `<provider>/<model>`, what vectors are stored under.
    key: String,
    provider: Arc<dyn Provider>,
    /// Runs on this machine or a private network: may see incognito text.
    local: bool,
}

/// Memory search by words and meaning, and the embedding of saved memories.
pub struct SemanticMemory {
    store: Arc<dyn Store>,
    embedder: Option<Embedder>,
    /// Wakes the background pass.
    wake: Arc<Notify>,
    /// The runtime, for the budget in force (set once it exists).
    runtime: OnceLock<Weak<Inner>>,
}

impl SemanticMemory {
    /// Search by words only: embeddings are off.
    pub(crate) fn text_only(store: Arc<dyn Store>) -> Self {
        Self {
            store,
            embedder: None,
            wake: Arc::new(Notify::new()),
            runtime: OnceLock::new(),
        }
    }

    /// Embeds with `model` through `provider`.
    pub(crate) fn with_embeddings(
        store: Arc<dyn Store>,
        model: ModelRef,
        provider: Arc<dyn Provider>,
        local: bool,
    ) -> Self {
        Self {
            embedder: Some(Embedder {
                key: model.to_string(),
                model,
                provider,
                local,
            }),
            ..Self::text_only(store)
        }
    }

    /// `<provider>/<model>` of the embeddings, when on.
    pub fn embeddings(&self) -> Option<&str> {
        self.embedder.as_ref().map(|e| e.key.as_str())
    }

    /// Lets budget holds find the runtime's budget in force.
    pub(crate) fn attach(&self, inner: Weak<Inner>) {
        let _ = self.runtime.set(inner);
    }

    /// Starts the background pass (nothing when embeddings are off): one
    /// pass now, then one after each wake.
    pub(crate) fn start(self: &Arc<Self>) {
        if self.embedder.is_none() {
            return;
        }
        let weak = Arc::downgrade(self);
        let wake = Arc::clone(&self.wake);
        tokio::spawn(async move {
            loop {
                let Some(this) = weak.upgrade() else { return };
                this.pass().await;
                drop(this);
                wake.notified().await;
            }
        });
    }

    /// Embeds memories that have no vector by the current model, a batch at
    /// a time, stopping at the first failure (the next wake retries).
    /// Returns how many were embedded.
    pub(crate) async fn pass(&self) -> usize {
        let Some(e) = &self.embedder else { return 0 };
        let mut done = 0;
        for _ in 0..PASS_BATCHES {
            let due = match self.store.memories_to_embed(&e.key, PASS_BATCH).await {
                Ok(due) if due.is_empty() => return done,
                Ok(due) => due,
                Err(err) => {
                    warn!(error = %err, "could not list memories to embed");
                    return done;
                }
            };
            // The batch is charged to the first memory's user: a batch is
            // one call, and most passes embed one user's fresh saves.
            let payer = due.first().map(|m| m.user_key.clone());
            let texts: Vec<String> = due.iter().map(|m| m.text.clone()).collect();
            let vectors = match self.embed(e, payer.as_deref(), None, &texts).await {
                Ok(v) => v,
                Err(why) => {
                    warn!(model = %e.key, memories = due.len(), error = %why,
                        "embedding memories failed; they are found by words until a later pass");
                    return done;
                }
            };
            for (m, v) in due.iter().zip(vectors) {
                if let Err(err) = self.store.set_memory_embedding(m.id, &e.key, &v).await {
                    warn!(error = %err, "could not store a memory's embedding");
                    return done;
                }
                done += 1;
            }
            debug!(model = %e.key, memories = due.len(), "embedded memories");
        }
        done
    }

    /// One embeddings call: held and settled in the budget, counted in usage.
    async fn embed(
        &self,
        e: &Embedder,
        user_key: Option<&str>,
        thread_key: Option<&str>,
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>, String> {
        let budget = self
            .runtime
            .get()
            .and_then(Weak::upgrade)
            .and_then(|inner| inner.live().engine.budget().cloned());
        let bytes: usize = texts.iter().map(String::len).sum();
        let hold = match &budget {
            Some(b) => Some(
                b.reserve(
                    &e.key,
                    Payer {
                        user_key: user_key.unwrap_or_default(),
                        thread_key: thread_key.unwrap_or_default(),
                    },
                    Estimate {
                        input_tokens: (bytes as u64).div_ceil(4),
                        output_tokens: 0,
                    },
                )
                .await
                .map_err(|r| format!("a budget pool refused the call: {r}"))?,
            ),
            None => None,
        };
        let (at, started) = (now_ms(), Instant::now());
        let result = e.provider.embed(&e.model.model, texts).await;
        let tokens = result.as_ref().ok().and_then(|r| r.usage.input_tokens);
        if let Some(hold) = hold {
            hold.settle(tokens.map(|input| Tokens {
                input,
                ..Tokens::default()
            }))
            .await;
        }
        let call = ModelCall {
            call_id: format!("emb_{}", uuid::Uuid::now_v7().simple()),
            at,
            provider: e.model.provider.clone(),
            model: e.model.model.clone(),
            purpose: "embedding".to_owned(),
            user_key: user_key.map(str::to_owned),
            thread_key: thread_key.map(str::to_owned),
            input_tokens: tokens,
            latency_ms: i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX),
            error_kind: result.as_ref().err().map(|err| format!("{:?}", err.kind)),
        };
        if let Err(err) = self.store.record_model_call(call).await {
            warn!(error = %err, "could not record an embedding call's usage");
        }
        result.map(|r| r.vectors).map_err(|err| err.to_string())
    }

    /// The memories `scope` sees that best match `query` by `mode`, best
    /// first, at most `limit` (0 means 10; at most 100). `private`: the query
    /// is incognito and may only go to a local model (else words only).
    pub async fn search(
        &self,
        scope: &MemoryScope,
        query: &str,
        mode: SearchMode,
        limit: u32,
        private: bool,
    ) -> Result<Vec<FoundMemory>, SearchError> {
        let limit = match limit {
            0 => DEFAULT_LIMIT,
            n => n.min(MAX_LIMIT),
        } as usize;
        let embedder = match (mode, &self.embedder) {
            (SearchMode::Text, _) => None,
            (_, None) => return Err(SearchError::EmbeddingsOff),
            (SearchMode::Hybrid, Some(e)) if private && !e.local => None,
            (SearchMode::Vector, Some(e)) if private && !e.local => {
                return Err(SearchError::Embed(
                    "the query is incognito and the embeddings model is not local".into(),
                ));
            }
            (_, Some(e)) => Some(e),
        };
        // The two rankings are independent: both at once (on SQLite, on two
        // reader threads).
        let by_words = async {
            if mode == SearchMode::Vector {
                return Ok(Vec::new());
            }
            Ok::<_, SearchError>(
                self.store
                    .search_memories(scope, query, CANDIDATES)
                    .await?
                    .into_iter()
                    .map(|h| h.memory)
                    .collect(),
            )
        };
        let by_meaning = async {
            match embedder {
                None => Ok(Vec::new()),
                Some(e) => match self.by_meaning(e, scope, query).await {
                    Ok(v) => Ok(v),
                    Err(SearchError::Embed(why)) if mode == SearchMode::Hybrid => {
                        warn!(model = %e.key, error = %why,
                            "could not embed a memory search; searching by words only");
                        Ok(Vec::new())
                    }
                    Err(err) => Err(err),
                },
            }
        };
        let (text, vector) = tokio::try_join!(by_words, by_meaning)?;
        Ok(fusion::fuse(text, vector, limit))
    }

    /// The memories of `scope` closest in meaning to `query`, best first.
    async fn by_meaning(
        &self,
        e: &Embedder,
        scope: &MemoryScope,
        query: &str,
    ) -> Result<Vec<MemoryRecord>, SearchError> {
        if query.trim().is_empty() {
            return Ok(Vec::new());
        }
        let q = self
            .embed(
                e,
                Some(&scope.user_key),
                scope.thread_key.as_deref(),
                &[query.to_owned()],
            )
            .await
            .map_err(SearchError::Embed)?;
        let Some(q) = q.into_iter().next() else {
            return Ok(Vec::new());
        };
        Ok(self
            .store
            .nearest_memories(scope, &e.key, &q, CANDIDATES as usize)
            .await?
            .into_iter()
            .map(|n| n.memory)
            .collect())
    }

    /// Embeds a just-saved memory now; when that fails it stays stored
    /// without a vector and the background pass is woken to try again.
    async fn embed_saved(&self, memory: &MemoryRecord) {
        let Some(e) = &self.embedder else { return };
        match self
            .embed(
                e,
                Some(&memory.user_key),
                memory.thread_key.as_deref(),
                std::slice::from_ref(&memory.text),
            )
            .await
        {
            Ok(v) => match v.into_iter().next() {
                Some(v) => match self.store.set_memory_embedding(memory.id, &e.key, &v).await {
                    Ok(_) => return,
                    Err(err) => warn!(error = %err, "could not store a memory's embedding"),
                },
                None => warn!("the embeddings answer held no vector"),
            },
            Err(why) => {
                warn!(model = %e.key, error = %why,
                    "could not embed a saved memory; a background pass will");
            }
        }
        self.wake.notify_one();
    }
}

#[async_trait::async_trait]
impl hearth_tools::memory::MemoryIndex for SemanticMemory {
    async fn find(
        &self,
        scope: &MemoryScope,
        query: &str,
        limit: u32,
        private: bool,
    ) -> Result<Vec<MemoryHit>, StoreError> {
        let mode = if self.embedder.is_some() {
            SearchMode::Hybrid
        } else {
            SearchMode::Text
        };
        match self.search(scope, query, mode, limit, private).await {
            Ok(found) => Ok(found
                .into_iter()
                .map(|f| MemoryHit {
                    memory: f.memory,
                    score: f.score,
                })
                .collect()),
            Err(SearchError::Store(e)) => Err(e),
            // Hybrid falls back to words on its own; nothing else reaches here.
            Err(other) => {
                warn!(error = %other, "memory search by meaning failed; searching by words");
                self.store.search_memories(scope, query, limit).await
            }
        }
    }

    async fn saved(&self, memory: &MemoryRecord) {
        self.embed_saved(memory).await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use hearth_core::ChatRequest;
    use hearth_llm::embeddings::Embeddings;
    use hearth_llm::{EventStream, LlmError};
    use hearth_store::{NewMemory, SqliteStore};

    use super::*;

    /// A remote embeddings provider that counts the texts it is sent.
    #[derive(Default)]
    struct Counting(AtomicUsize);

    #[async_trait::async_trait]
    impl Provider for Counting {
        async fn stream(&self, _request: &ChatRequest) -> Result<EventStream, LlmError> {
            Err(LlmError::new(
                "remote",
                hearth_llm::ErrorKind::InvalidRequest,
                "chat is not used here",
            ))
        }

        fn embeds(&self) -> bool {
            true
        }

        async fn embed(&self, _model: &str, inputs: &[String]) -> Result<Embeddings, LlmError> {
            self.0.fetch_add(inputs.len(), Ordering::SeqCst);
            Ok(Embeddings {
                vectors: inputs.iter().map(|_| vec![1.0, 0.0]).collect(),
                usage: hearth_core::Usage::default(),
            })
        }
    }

    #[tokio::test]
    async fn an_incognito_query_never_reaches_a_remote_embeddings_model() {
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open_in_memory().unwrap());
        store
            .save_memory(NewMemory {
                user_key: "u".into(),
                thread_key: None,
                text: "parked in spot B7".into(),
                run_id: None,
                at: 1,
            })
            .await
            .unwrap();
        let provider = Arc::new(Counting::default());
        let model = ModelRef::parse("remote/embed").unwrap();
        let memory = SemanticMemory::with_embeddings(store, model, provider.clone(), false);
        assert_eq!(memory.pass().await, 1);
        let sent = provider.0.load(Ordering::SeqCst);
        let scope = MemoryScope {
            user_key: "u".into(),
            thread_key: None,
        };

        // Incognito: hybrid goes by words only, vector is refused; nothing is sent.
        let found = memory
            .search(&scope, "spot", SearchMode::Hybrid, 10, true)
            .await
            .unwrap();
        assert_eq!(found[0].matched, Matched::Text);
        let err = memory
            .search(&scope, "spot", SearchMode::Vector, 10, true)
            .await
            .unwrap_err();
        assert!(matches!(err, SearchError::Embed(_)), "{err}");
        assert_eq!(provider.0.load(Ordering::SeqCst), sent);

        // Not incognito: the query is embedded and both rankings agree.
        let found = memory
            .search(&scope, "spot", SearchMode::Hybrid, 10, false)
            .await
            .unwrap();
        assert_eq!(found[0].matched, Matched::Both);
        assert_eq!(provider.0.load(Ordering::SeqCst), sent + 1);
    }
}
