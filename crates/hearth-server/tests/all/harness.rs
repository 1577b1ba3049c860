//! A server over a temp store with the offline echo provider.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use axum::Router;
use hearth_runtime::{Runtime, RuntimeBuilder};
use hearth_server::{AppState, Auth, ServeLimits};
use hearth_store::Store;
use hearth_tools::ToolRegistry;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A running server; stops when dropped.
pub struct Server {
    pub addr: SocketAddr,
    pub store: Arc<dyn Store>,
    pub http: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    pub task: Option<JoinHandle<std::io::Result<()>>>,
    _dir: tempfile::TempDir,
}

impl Server {
    /// The real API with a body limit of `max_body_bytes`.
    pub async fn start(limits: ServeLimits, max_body_bytes: usize) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let store = hearth_runtime::testing::store(dir.path());
        let runtime = runtime(dir.path(), "", &store, |b| b).await;
        let app = hearth_server::router(state(runtime), max_body_bytes);
        Self::serve(app, limits, store, dir).await
    }

    /// Any router, served the same way.
    pub async fn serve(
        app: Router,
        limits: ServeLimits,
        store: Arc<dyn Store>,
        dir: tempfile::TempDir,
    ) -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(hearth_server::serve(listener, app, limits, async move {
            let _ = rx.await;
        }));
        Server {
            addr,
            store,
            http: reqwest::Client::new(),
            stop: Some(tx),
            task: Some(task),
            _dir: dir,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Status, headers and the body as JSON (panics when it is not JSON).
    pub async fn send(
        &self,
        req: reqwest::RequestBuilder,
    ) -> (u16, reqwest::header::HeaderMap, serde_json::Value) {
        let r = req.send().await.unwrap();
        let status = r.status().as_u16();
        let headers = r.headers().clone();
        let text = r.text().await.unwrap();
        let v = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("status {status}: not JSON ({e}): {text:?}"));
        (status, headers, v)
    }

    /// Stops accepting and waits for the accept loop to end.
    pub async fn stop(mut self) -> std::io::Result<()> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        self.task.take().unwrap().await.unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
}

/// A started runtime over `home` and its `store`, configured by `toml`,
/// offering the built-in tools, with the builder adjusted by `adjust`.
pub async fn runtime(
    home: &Path,
    toml: &str,
    store: &Arc<dyn Store>,
    adjust: impl FnOnce(RuntimeBuilder) -> RuntimeBuilder,
) -> Runtime {
    let builder = hearth_runtime::testing::builder(home, toml, store.clone())
        .tools(ToolRegistry::with_builtins())
        .system_prompt("be brief");
    let runtime = hearth_runtime::testing::build(adjust(builder)).await;
    runtime.start().await.unwrap();
    runtime
}

/// What the handlers of a loopback server over `runtime` reach.
pub fn state(runtime: Runtime) -> AppState {
    AppState {
        runtime: runtime.clone(),
        auth: Arc::new(Auth::new(runtime, true)),
        metrics: None,
    }
}

pub fn code(v: &serde_json::Value) -> &str {
    v["error"]["code"].as_str().unwrap_or("")
}
