//! Channel profiles and `web_search`, through the real binary: what
//! `GET /v1/tools` lists per channel, a search the model makes against a
//! fake SearXNG on loopback, and the start-up errors of a bad `[tools]`.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{RawQuery, State};
use axum::routing::get;
use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::harness::{Hearth, command, fake_config};

/// A SearXNG stand-in: `/search` answers one fixed result and keeps the
/// query strings it was sent.
struct FakeSearxng {
    base_url: String,
    queries: Arc<Mutex<Vec<String>>>,
    task: JoinHandle<()>,
}

impl Drop for FakeSearxng {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeSearxng {
    async fn start() -> FakeSearxng {
        async fn search(
            State(queries): State<Arc<Mutex<Vec<String>>>>,
            RawQuery(q): RawQuery,
        ) -> axum::Json<Value> {
            queries.lock().unwrap().push(q.unwrap_or_default());
            axum::Json(json!({
                "query": "hearth",
                "results": [{
                    "title": "Hearth, the agent gateway",
                    "url": "https://hearth.example/",
                    "content": "A self-hosted AI agent gateway."
                }]
            }))
        }
        let queries = Arc::new(Mutex::new(Vec::new()));
        let app = Router::new()
            .route("/search", get(search))
            .with_state(queries.clone());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeSearxng {
            base_url: format!("http://{addr}"),
            queries,
            task,
        }
    }

    fn config(&self) -> String {
        format!(
            "[tools.web_search]\nbackend = \"searxng\"\nbase_url = \"{}\"\n",
            self.base_url
        )
    }
}

async fn tool_names(h: &Hearth, path: &str) -> Vec<String> {
    let (s, v) = h.get(path).await;
    assert_eq!(s, 200, "{v}");
    v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn profiles_decide_what_each_channel_lists() {
    let searxng = FakeSearxng::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "[tools.profiles.api]\nexclude = [\"web_*\"]\n{}",
        searxng.config()
    );
    let h = Hearth::start(dir.path(), Some(&config)).await;

    let all = tool_names(&h, "/v1/tools").await;
    assert!(all.iter().any(|n| n == "web_search"), "{all:?}");
    assert!(all.iter().any(|n| n == "web_fetch"), "{all:?}");
    let (_, v) = h.get("/v1/tools").await;
    let search = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "web_search")
        .unwrap();
    assert_eq!(
        (&search["class"], &search["capability"]),
        (&json!("read"), &json!("web.search"))
    );

    let api = tool_names(&h, "/v1/tools?channel=api").await;
    assert!(!api.iter().any(|n| n.starts_with("web_")), "{api:?}");
    assert!(api.iter().any(|n| n == "current_time"), "{api:?}");

    // A channel without a profile offers everything.
    let telegram = tool_names(&h, "/v1/tools?channel=telegram").await;
    assert_eq!(telegram, all);
    assert!(searxng.queries.lock().unwrap().is_empty());
}

#[tokio::test]
async fn web_search_is_absent_unless_configured() {
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), None).await;
    for path in ["/v1/tools", "/v1/tools?channel=api"] {
        let names = tool_names(&h, path).await;
        assert!(!names.iter().any(|n| n == "web_search"), "{names:?}");
        assert!(names.iter().any(|n| n == "web_fetch"), "{names:?}");
    }
}

#[tokio::test]
async fn the_model_searches_through_the_configured_backend() {
    let searxng = FakeSearxng::start().await;
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "call_search",
        "web_search",
        r#"{"query":"hearth gateway","count":3}"#,
    )]));
    fake.push(Reply::text("Found it."));
    let dir = tempfile::tempdir().unwrap();
    let config = format!("{}{}", fake_config(&fake.base_url()), searxng.config());
    let h = Hearth::start(dir.path(), Some(&config)).await;

    let v = h.ask("api:search", "search for hearth").await;
    assert_eq!(v["status"], "succeeded", "{v}");
    assert_eq!(
        *searxng.queries.lock().unwrap(),
        ["q=hearth+gateway&format=json"]
    );
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 2);
    let offered: Vec<&str> = reqs[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(offered.contains(&"web_search"), "{offered:?}");
    let result = reqs[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    let content = result["content"].as_str().unwrap();
    assert!(content.contains("untrusted-content"), "{content}");
    assert!(content.contains("https://hearth.example/"), "{content}");
}

#[tokio::test]
async fn a_bad_tools_section_stops_the_start_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "[tools.profiles.api]\nexclude = [\"web.*\"]\n",
            "tools.profiles.api.exclude",
        ),
        (
            "[tools.web_search]\nbackend = \"searxng\"\n",
            "needs `base_url`",
        ),
        ("[tools.web_search]\nbackend = \"brave\"\n", "needs a key"),
        (
            "[tools.web_search]\nbackend = \"brave\"\napi_key_env = \"HEARTH_TEST_NO_SUCH_KEY\"\n",
            "HEARTH_TEST_NO_SUCH_KEY",
        ),
        (
            "[tools.web_search]\nbackend = \"brave\"\napi_key_secret = \"brave\"\n",
            "HEARTH_SECRET_KEY",
        ),
    ];
    for (toml, says) in cases {
        std::fs::write(dir.path().join("hearth.toml"), toml).unwrap();
        let out = command(dir.path())
            .args(["serve", "--bind", "127.0.0.1:0"])
            .output()
            .await
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{toml}: {err}");
        assert!(err.contains(says), "{says}: {err}");
    }
}
