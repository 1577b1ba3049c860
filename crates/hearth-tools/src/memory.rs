//! Memory tools: `memory_save`, `memory_search`, `memory_list` and
//! `memory_forget`, over a `MemoryStore`.
//!
//! Every call is scoped to the run's user (`ToolContext::user_key`), and a
//! thread-only memory to the run's thread, so the model can never read or
//! erase another user's memories whatever ids or words it passes. Nothing is
//! written for an incognito thread.

use std::sync::Arc;

use hearth_core::{ToolSpec, now_ms, rfc3339};
use hearth_store::{MemoryHit, MemoryRecord, MemoryScope, MemoryStore, NewMemory, StoreError};
use serde_json::{Value, json};

use crate::{Tool, ToolClass, ToolContext, ToolError};

/// The longest memory, in characters: a memory is a fact, not a document.
pub const MAX_MEMORY_CHARS: usize = 2000;
/// Search results when the model does not say, and at most.
const DEFAULT_SEARCH_LIMIT: u64 = 5;
const MAX_SEARCH_LIMIT: u64 = 20;
/// Listed memories when the model does not say, and at most.
const DEFAULT_LIST_LIMIT: u64 = 20;
const MAX_LIST_LIMIT: u64 = 100;
/// Told to the model with every memory it reads, so answers say where a
/// remembered fact came from.
const CITE: &str = "When you use a memory in your answer, cite it as [memory:<id>].";

/// The four memory tools over `store`, ready to register; search is by
/// words only.
pub fn tools(store: Arc<dyn MemoryStore>) -> Vec<Arc<dyn Tool>> {
    let index: Arc<dyn MemoryIndex> = Arc::new(FullText(Arc::clone(&store)));
    tools_with_index(store, index)
}

/// The four memory tools over `store`, with `index` finding memories for
/// `memory_search` and hearing of each new one `memory_save` stores (to
/// embed it, say).
pub fn tools_with_index(
    store: Arc<dyn MemoryStore>,
    index: Arc<dyn MemoryIndex>,
) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(MemorySave::new(Arc::clone(&store)).with_index(Arc::clone(&index))),
        Arc::new(MemorySearch::new(Arc::clone(&store)).with_index(index)),
        Arc::new(MemoryList::new(Arc::clone(&store))),
        Arc::new(MemoryForget::new(store)),
    ]
}

/// How memories are found beyond the store's own full-text search (by
/// meaning, say), and told of new ones.
#[async_trait::async_trait]
pub trait MemoryIndex: Send + Sync + 'static {
    /// The memories `scope` sees that best match `query`, best first, at
    /// most `limit`. `private`: the query comes from an incognito thread
    /// and must not leave the machine.
    async fn find(
        &self,
        scope: &MemoryScope,
        query: &str,
        limit: u32,
        private: bool,
    ) -> Result<Vec<MemoryHit>, StoreError>;

    /// A memory was just stored (not found already saved).
    async fn saved(&self, memory: &MemoryRecord);
}

/// The store's full-text search, and nothing to do on a save.
struct FullText(Arc<dyn MemoryStore>);

#[async_trait::async_trait]
impl MemoryIndex for FullText {
    async fn find(
        &self,
        scope: &MemoryScope,
        query: &str,
        limit: u32,
        _private: bool,
    ) -> Result<Vec<MemoryHit>, StoreError> {
        self.0.search_memories(scope, query, limit).await
    }

    async fn saved(&self, _memory: &MemoryRecord) {}
}

fn store_error(e: StoreError) -> ToolError {
    ToolError(format!("the memory store failed: {e}"))
}

/// The run's user, which every memory call needs.
fn user(ctx: &ToolContext) -> Result<&str, ToolError> {
    if ctx.user_key.is_empty() {
        return Err(ToolError("memory is only available to a known user".into()));
    }
    Ok(&ctx.user_key)
}

/// What the run may see: the user's user-wide memories and this thread's.
fn scope(ctx: &ToolContext) -> Result<MemoryScope, ToolError> {
    Ok(MemoryScope {
        user_key: user(ctx)?.to_owned(),
        thread_key: (!ctx.thread_key.is_empty()).then(|| ctx.thread_key.clone()),
    })
}

/// The `limit` argument within `1..=max`, `default` when absent.
fn limit(args: &Value, default: u64, max: u64) -> u32 {
    let n = args
        .get("limit")
        .and_then(Value::as_u64)
        .unwrap_or(default)
        .clamp(1, max);
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Where a memory came from, for citations.
fn source(m: &MemoryRecord) -> Value {
    json!({
        "memory_id": m.id,
        "thread_key": m.thread_key,
        "run_id": m.run_id,
        "saved_at": rfc3339(m.created_at),
    })
}

/// `memory_save`: remembers a fact for the user.
pub struct MemorySave {
    spec: ToolSpec,
    store: Arc<dyn MemoryStore>,
    index: Option<Arc<dyn MemoryIndex>>,
}

impl MemorySave {
    /// Tells `index` of each memory stored.
    #[must_use]
    pub fn with_index(mut self, index: Arc<dyn MemoryIndex>) -> Self {
        self.index = Some(index);
        self
    }

    /// The tool over `store`.
    pub fn new(store: Arc<dyn MemoryStore>) -> Self {
        Self {
            spec: ToolSpec {
                name: "memory_save".into(),
                description: "Remember a fact about the user for later conversations: a \
                              preference, a name, a date, a standing instruction. Use it when \
                              the user asks you to remember something, or states something \
                              durable about themselves that will matter later. Save one short, \
                              self-contained fact per call, written so it makes sense on its \
                              own. Set thread_only when it matters only in this conversation."
                    .into(),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "text": {
                            "type": "string",
                            "minLength": 1,
                            "maxLength": MAX_MEMORY_CHARS,
                            "description": "The fact, e.g. \"The user's dog is called Rex.\""
                        },
                        "thread_only": {
                            "type": "boolean",
                            "description": "Only remember it in this conversation (default false)"
                        }
                    },
                    "required": ["text"],
                    "additionalProperties": false
                }),
            },
            store,
            index: None,
        }
    }
}

#[async_trait::async_trait]
impl Tool for MemorySave {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    // Read-class although it writes: saving is idempotent (the same text in
    // the same scope returns the memory already saved), so redoing a call
    // after a crash, or running it beside others, cannot do harm, and asking
    // the user to confirm every save would make memory useless.
    fn class(&self) -> ToolClass {
        ToolClass::Read
    }

    fn capability(&self) -> Option<&'static str> {
        Some("memory.write")
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<Value, ToolError> {
        if ctx.incognito {
            return Err(ToolError(
                "memory is not written in incognito threads; nothing was saved".into(),
            ));
        }
        let user_key = user(ctx)?;
        let text = args
            .get("text")
            .and_then(Value::as_str)
            .map(str::trim)
            .unwrap_or_default();
        if text.is_empty() {
            return Err(ToolError("text must not be empty".into()));
        }
        if text.chars().count() > MAX_MEMORY_CHARS {
            return Err(ToolError(format!(
                "text is too long: a memory holds at most {MAX_MEMORY_CHARS} characters; \
                 save a shorter fact"
            )));
        }
        let thread_only = args
            .get("thread_only")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if thread_only && ctx.thread_key.is_empty() {
            return Err(ToolError(
                "there is no thread to bind this memory to".into(),
            ));
        }
        let saved = self
            .store
            .save_memory(NewMemory {
                user_key: user_key.to_owned(),
                thread_key: thread_only.then(|| ctx.thread_key.clone()),
                text: text.to_owned(),
                run_id: (!ctx.run_id.is_empty()).then(|| ctx.run_id.clone()),
                at: now_ms(),
            })
            .await
            .map_err(store_error)?;
        if saved.created
            && let Some(index) = &self.index
        {
            index.saved(&saved.memory).await;
        }
        Ok(json!({
            "id": saved.memory.id,
            "saved": true,
            "already_known": !saved.created,
            "scope": if thread_only { "thread" } else { "user" },
        }))
    }
}

/// `memory_search`: finds the user's memories by words (and by meaning,
/// with an index that can), best first.
pub struct MemorySearch {
    spec: ToolSpec,
    store: Arc<dyn MemoryStore>,
    index: Option<Arc<dyn MemoryIndex>>,
}

impl MemorySearch {
    /// Finds memories through `index` instead of the store's full-text search.
    #[must_use]
    pub fn with_index(mut self, index: Arc<dyn MemoryIndex>) -> Self {
        self.index = Some(index);
        self
    }

    /// The tool over `store`.
    pub fn new(store: Arc<dyn MemoryStore>) -> Self {
        Self {
            spec: ToolSpec {
                name: "memory_search".into(),
                description: "Search what you have saved about the user in earlier \
                              conversations. Use it before answering whenever the user refers \
                              to something they told you before, asks what you remember, or \
                              when a known preference would change your answer. Give a few \
                              keywords; results are ranked by relevance and carry their ids, \
                              which you cite as [memory:<id>]."
                    .into(),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "query": {
                            "type": "string",
                            "minLength": 1,
                            "maxLength": 500,
                            "description": "Keywords, e.g. \"dog name\""
                        },
                        "limit": {
                            "type": "integer",
                            "minimum": 1,
                            "maximum": MAX_SEARCH_LIMIT,
                            "description": "Most results to return (default 5)"
                        }
                    },
                    "required": ["query"],
                    "additionalProperties": false
                }),
            },
            store,
            index: None,
        }
    }
}

#[async_trait::async_trait]
impl Tool for MemorySearch {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn class(&self) -> ToolClass {
        ToolClass::Read
    }

    fn capability(&self) -> Option<&'static str> {
        Some("memory.read")
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<Value, ToolError> {
        let scope = scope(ctx)?;
        let query = args
            .get("query")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let limit = limit(&args, DEFAULT_SEARCH_LIMIT, MAX_SEARCH_LIMIT);
        let hits = match &self.index {
            Some(index) => index.find(&scope, query, limit, ctx.incognito).await,
            None => self.store.search_memories(&scope, query, limit).await,
        }
        .map_err(store_error)?;
        // Being found is what keeps a memory from expiring; an incognito
        // thread leaves no trace on disk, not even that.
        if !ctx.incognito {
            let ids: Vec<i64> = hits.iter().map(|h| h.memory.id).collect();
            self.store
                .touch_memories(&scope.user_key, &ids, now_ms())
                .await
                .map_err(store_error)?;
        }
        let results: Vec<Value> = hits
            .iter()
            .map(|h| {
                json!({
                    "id": h.memory.id,
                    "text": h.memory.text,
                    // Rounded: the model needs the order, not the digits.
                    "score": (h.score * 1000.0).round() / 1000.0,
                    "source": source(&h.memory),
                })
            })
            .collect();
        Ok(json!({ "results": results, "cite": CITE }))
    }
}

/// `memory_list`: the user's newest memories.
pub struct MemoryList {
    spec: ToolSpec,
    store: Arc<dyn MemoryStore>,
}

impl MemoryList {
    /// The tool over `store`.
    pub fn new(store: Arc<dyn MemoryStore>) -> Self {
        Self {
            spec: ToolSpec {
                name: "memory_list".into(),
                description: "List the newest things you have saved about the user. Use it \
                              when the user asks what you remember about them, or to find the \
                              id of a memory to forget; to look for something specific, use \
                              memory_search."
                    .into(),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "limit": {
                            "type": "integer",
                            "minimum": 1,
                            "maximum": MAX_LIST_LIMIT,
                            "description": "Most memories to return (default 20)"
                        }
                    },
                    "additionalProperties": false
                }),
            },
            store,
        }
    }
}

#[async_trait::async_trait]
impl Tool for MemoryList {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn class(&self) -> ToolClass {
        ToolClass::Read
    }

    fn capability(&self) -> Option<&'static str> {
        Some("memory.read")
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<Value, ToolError> {
        let scope = scope(ctx)?;
        let memories = self
            .store
            .list_memories(&scope, limit(&args, DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT))
            .await
            .map_err(store_error)?;
        let memories: Vec<Value> = memories
            .iter()
            .map(|m| json!({ "id": m.id, "text": m.text, "source": source(m) }))
            .collect();
        Ok(json!({ "memories": memories, "cite": CITE }))
    }
}

/// `memory_forget`: erases one of the user's memories.
pub struct MemoryForget {
    spec: ToolSpec,
    store: Arc<dyn MemoryStore>,
}

impl MemoryForget {
    /// The tool over `store`.
    pub fn new(store: Arc<dyn MemoryStore>) -> Self {
        Self {
            spec: ToolSpec {
                name: "memory_forget".into(),
                description: "Erase one saved memory by its id, when the user asks you to \
                              forget something or a memory is wrong or outdated. Find the id \
                              with memory_search or memory_list first. The user is asked to \
                              confirm before it is erased."
                    .into(),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "id": {
                            "type": "integer",
                            "minimum": 1,
                            "description": "The memory's id"
                        }
                    },
                    "required": ["id"],
                    "additionalProperties": false
                }),
            },
            store,
        }
    }
}

#[async_trait::async_trait]
impl Tool for MemoryForget {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    // Write-class: erasing cannot be undone, so the user confirms it.
    fn class(&self) -> ToolClass {
        ToolClass::Write
    }

    fn capability(&self) -> Option<&'static str> {
        Some("memory.write")
    }

    // Only the arguments are known here, not the memory's text; the id is
    // what the model showed the user when it cited the memory.
    fn summary(&self, args: &Value) -> String {
        match args.get("id").and_then(Value::as_i64) {
            Some(id) => format!("forget memory {id}"),
            None => "forget a memory".to_owned(),
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<Value, ToolError> {
        let user_key = user(ctx)?;
        let Some(id) = args.get("id").and_then(Value::as_i64) else {
            return Err(ToolError("id must be a memory id (an integer)".into()));
        };
        let forgotten = self
            .store
            .forget_memory(user_key, id)
            .await
            .map_err(store_error)?;
        if !forgotten {
            return Err(ToolError(format!(
                "there is no memory {id} of this user; nothing was erased"
            )));
        }
        Ok(json!({ "id": id, "forgotten": true }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolRegistry;
    use hearth_store::{Durability, SqliteStore};
    use std::time::Duration;

    struct Fixture {
        dir: tempfile::TempDir,
        registry: ToolRegistry,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("hearth.db"), Durability::Normal).unwrap();
        let mut registry = ToolRegistry::new();
        for tool in tools(Arc::new(store)) {
            registry.register(tool);
        }
        Fixture { dir, registry }
    }

    fn ctx(user: &str, thread: &str) -> ToolContext {
        ToolContext {
            run_id: "run_1".into(),
            thread_key: thread.into(),
            user_key: user.into(),
            scope: String::new(),
            incognito: false,
            call_id: String::new(),
        }
    }

    async fn call(f: &Fixture, ctx: &ToolContext, name: &str, args: Value) -> Value {
        let out = f
            .registry
            .execute(ctx, name, &args.to_string(), Duration::from_secs(10))
            .await;
        serde_json::from_str(&out.json).unwrap()
    }

    #[tokio::test]
    async fn save_then_search_cites_the_source() {
        let f = fixture();
        let me = ctx("u", "t1");
        let saved = call(
            &f,
            &me,
            "memory_save",
            json!({"text": " The dog is called Rex "}),
        )
        .await;
        assert_eq!(saved["saved"], true, "{saved}");
        assert_eq!(saved["already_known"], false);
        let id = saved["id"].as_i64().unwrap();
        let again = call(
            &f,
            &me,
            "memory_save",
            json!({"text": "The dog is called Rex"}),
        )
        .await;
        assert_eq!(
            (again["id"].as_i64(), &again["already_known"]),
            (Some(id), &json!(true))
        );

        let found = call(
            &f,
            &ctx("u", "t2"),
            "memory_search",
            json!({"query": "dog"}),
        )
        .await;
        let hit = &found["results"][0];
        assert_eq!(hit["id"], id, "{found}");
        assert_eq!(hit["text"], "The dog is called Rex");
        assert_eq!(hit["source"]["memory_id"], id);
        assert_eq!(hit["source"]["run_id"], "run_1");
        assert_eq!(hit["source"]["thread_key"], Value::Null);
        assert!(hit["source"]["saved_at"].as_str().unwrap().contains('T'));
        assert!(found["cite"].as_str().unwrap().contains("[memory:<id>]"));

        let listed = call(&f, &me, "memory_list", json!({})).await;
        assert_eq!(listed["memories"][0]["id"], id, "{listed}");
        let other = call(
            &f,
            &ctx("v", "t1"),
            "memory_search",
            json!({"query": "dog"}),
        )
        .await;
        assert_eq!(other["results"], json!([]));
    }

    #[tokio::test]
    async fn thread_only_memories_stay_in_their_thread() {
        let f = fixture();
        let saved = call(
            &f,
            &ctx("u", "t1"),
            "memory_save",
            json!({"text": "Draft title is Moonrise", "thread_only": true}),
        )
        .await;
        assert_eq!(saved["scope"], "thread", "{saved}");
        let here = call(
            &f,
            &ctx("u", "t1"),
            "memory_search",
            json!({"query": "title"}),
        )
        .await;
        assert_eq!(here["results"][0]["source"]["thread_key"], "t1", "{here}");
        let there = call(
            &f,
            &ctx("u", "t2"),
            "memory_search",
            json!({"query": "title"}),
        )
        .await;
        assert_eq!(there["results"], json!([]));
    }

    #[tokio::test]
    async fn incognito_long_and_empty_saves_are_refused() {
        let f = fixture();
        let mut incognito = ctx("u", "t1");
        incognito.incognito = true;
        let v = call(&f, &incognito, "memory_save", json!({"text": "x"})).await;
        assert!(v["error"].as_str().unwrap().contains("incognito"), "{v}");
        let long = "a".repeat(MAX_MEMORY_CHARS + 1);
        let v = call(&f, &ctx("u", "t1"), "memory_save", json!({ "text": long })).await;
        assert!(v["error"].as_str().unwrap().contains("at most 2000"), "{v}");
        let v = MemorySave::new(Arc::new(
            SqliteStore::open(&f.dir.path().join("other.db"), Durability::Normal).unwrap(),
        ))
        .call(
            &ctx("u", "t1"),
            json!({ "text": "b".repeat(MAX_MEMORY_CHARS + 1) }),
        )
        .await
        .unwrap_err();
        assert!(v.0.contains("too long"), "{v}");
        let v = call(&f, &ctx("u", "t1"), "memory_save", json!({"text": "   "})).await;
        assert!(v["error"].as_str().unwrap().contains("empty"), "{v}");
        let listed = call(&f, &ctx("u", "t1"), "memory_list", json!({})).await;
        assert_eq!(listed["memories"], json!([]));
    }

    /// The README says which tools ask first; `memory_save` is the one
    /// change that does not, and the code must agree with it.
    #[test]
    fn memory_save_runs_without_asking_as_the_readme_says() {
        let f = fixture();
        assert_eq!(
            f.registry.get("memory_save").unwrap().class(),
            ToolClass::Read,
            "read-class tools run without a confirmation"
        );
        let readme = include_str!("../../../README.md");
        let asks = readme
            .find("Tools that change something")
            .expect("the README says which tools ask first");
        let paragraph = readme[asks..].split("\n\n").next().unwrap_or_default();
        let paragraph = paragraph.replace('\n', " ");
        assert!(
            paragraph.contains("`memory_save` is the exception and runs without asking"),
            "{paragraph}"
        );
    }

    #[tokio::test]
    async fn forget_is_a_confirmed_write_on_the_users_own_memory() {
        let f = fixture();
        let forget = f.registry.get("memory_forget").unwrap();
        assert_eq!(forget.class(), ToolClass::Write);
        assert_eq!(forget.capability(), Some("memory.write"));
        assert_eq!(forget.summary(&json!({"id": 12})), "forget memory 12");
        assert_eq!(
            f.registry.get("memory_save").unwrap().class(),
            ToolClass::Read
        );
        assert_eq!(
            f.registry.get("memory_search").unwrap().capability(),
            Some("memory.read")
        );

        let saved = call(
            &f,
            &ctx("u", "t1"),
            "memory_save",
            json!({"text": "likes jazz"}),
        )
        .await;
        let id = saved["id"].clone();
        let v = call(&f, &ctx("v", "t1"), "memory_forget", json!({ "id": id })).await;
        assert!(v["error"].as_str().unwrap().contains("no memory"), "{v}");
        let v = call(&f, &ctx("u", "t9"), "memory_forget", json!({ "id": id })).await;
        assert_eq!(v, json!({ "id": id, "forgotten": true }));
        let v = call(
            &f,
            &ctx("u", "t1"),
            "memory_search",
            json!({"query": "jazz"}),
        )
        .await;
        assert_eq!(v["results"], json!([]));
    }

    #[tokio::test]
    async fn hostile_search_text_is_harmless() {
        let f = fixture();
        for q in ["\"", "NEAR(", "*", "a OR", "(((", "text:x"] {
            let v = call(&f, &ctx("u", "t1"), "memory_search", json!({ "query": q })).await;
            assert_eq!(v["results"], json!([]), "{q}: {v}");
        }
    }
}
