//! `hearth memory reembed`: after `[memory] embeddings` names another
//! model, every memory is embedded again by it, now and to the end, instead
//! of a bounded number of batches per background pass.
//!
//! Only stored memories are embedded, and incognito threads store none, so
//! no incognito text reaches the provider.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use hearth_config::Config;
use hearth_store::{Store, StoreError};

use super::{PASS_BATCH, SemanticMemory};
use crate::builder::BuildError;
use crate::catalog::Catalog;

/// Why a re-embedding stopped.
#[derive(Debug, thiserror::Error)]
pub enum ReembedError {
    /// `[memory] embeddings` is not set.
    #[error(
        "search by meaning is off: set [memory] embeddings = \"<provider>/<model>\" in \
         hearth.toml to the model that should embed memories, then run this again"
    )]
    EmbeddingsOff,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The embeddings call failed; what was embedded before stays.
    #[error(
        "embedding with {model} failed after {done} memories: {reason}; run this again to go on \
         where it stopped"
    )]
    Embed {
        /// `<provider>/<model>`.
        model: String,
        /// Memories embedded before the failure.
        done: u64,
        /// Why.
        reason: String,
    },
    /// The provider answered with fewer vectors than texts sent.
    #[error("{model} answered {got} vectors for {sent} texts; nothing more was embedded")]
    Short {
        /// `<provider>/<model>`.
        model: String,
        /// Texts sent.
        sent: usize,
        /// Vectors received.
        got: usize,
    },
}

/// The memory search `[memory] embeddings` configures, on `store`, for a
/// command that works on the home's database without a running server (the
/// provider's key is read as `serve` reads it). Calls are recorded in usage;
/// with no runtime, no budget pool holds them.
pub async fn for_command(
    config: &Config,
    store: Arc<dyn Store>,
) -> Result<SemanticMemory, BuildError> {
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let secrets = crate::builder::open_secrets(config, &env, store.as_ref()).await?;
    let http = hearth_http::client_builder()
        .connect_timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| BuildError::Failed {
            what: "building the HTTP client",
            source: Box::new(e),
        })?;
    let catalog = Catalog::from_config(config, &env, &secrets, http)
        .map_err(|e| BuildError::Config(e.to_string()))?;
    crate::builder::semantic_memory(config, &catalog, &store)
}

impl SemanticMemory {
    /// Embeds every memory that has no vector by the configured model (after
    /// a change of model: all of them), a batch per call, until none is
    /// left; `progress(done, total)` after each batch. Returns how many were
    /// embedded.
    pub async fn reembed(
        &self,
        progress: &mut (dyn FnMut(u64, u64) + Send),
    ) -> Result<u64, ReembedError> {
        let Some(e) = &self.embedder else {
            return Err(ReembedError::EmbeddingsOff);
        };
        let total = self.store.count_memories_to_embed(&e.key).await?;
        progress(0, total);
        let mut done = 0u64;
        loop {
            let due = self.store.memories_to_embed(&e.key, PASS_BATCH).await?;
            if due.is_empty() {
                return Ok(done);
            }
            let payer = due.first().map(|m| m.user_key.clone());
            let texts: Vec<String> = due.iter().map(|m| m.text.clone()).collect();
            let vectors = self
                .embed(e, payer.as_deref(), None, &texts)
                .await
                .map_err(|reason| ReembedError::Embed {
                    model: e.key.clone(),
                    done,
                    reason,
                })?;
            // Fewer vectors would leave a memory due forever: stop instead
            // of asking again.
            if vectors.len() < due.len() {
                return Err(ReembedError::Short {
                    model: e.key.clone(),
                    sent: due.len(),
                    got: vectors.len(),
                });
            }
            for (m, v) in due.iter().zip(vectors) {
                // False: forgotten meanwhile, nothing to embed.
                self.store.set_memory_embedding(m.id, &e.key, &v).await?;
                done += 1;
            }
            progress(done, total.max(done));
        }
    }
}
