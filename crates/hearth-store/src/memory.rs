//! What the model was asked to remember: records and the `MemoryStore` trait.
//!
//! Work in progress: the operations are added with the memory tools.

/// Saved memories of users, searchable by full text.
#[async_trait::async_trait]
pub trait MemoryStore: Send + Sync + 'static {}
