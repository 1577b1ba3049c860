//! The dashboard's door: logins, sessions, CSRF, headers, over HTTP.

use hearth_store::records::NewToken;
use reqwest::header::{HeaderMap, LOCATION, SET_COOKIE};
use reqwest::redirect::Policy;

use crate::harness::Server;

async fn server() -> (Server, reqwest::Client) {
    let s = Server::start(hearth_server::ServeLimits::default(), 1 << 20).await;
    let http = reqwest::Client::builder()
        .redirect(Policy::none())
        .build()
        .unwrap();
    (s, http)
}

async fn token(s: &Server, id: &str) -> String {
    let token = hearth_server::generate_token().unwrap();
    s.store
        .create_token(NewToken {
            id: id.into(),
            name: format!("name-{id}"),
            hash_hex: hearth_server::hash_token(&token),
            created_at: 0,
            user_key: None,
        })
        .await
        .unwrap();
    token
}

/// A form post body (reqwest's `form` is not enabled in this workspace).
trait Form {
    fn form_of(self, pairs: &[(&str, &str)]) -> Self;
}

impl Form for reqwest::RequestBuilder {
    fn form_of(self, pairs: &[(&str, &str)]) -> Self {
        use hearth_server::ui::session::encode;
        let body: Vec<String> = pairs
            .iter()
            .map(|(k, v)| format!("{k}={}", encode(v)))
            .collect();
        self.header("content-type", "application/x-www-form-urlencoded")
            .body(body.join("&"))
    }
}

fn location(h: &HeaderMap) -> &str {
    h.get(LOCATION).map_or("", |v| v.to_str().unwrap())
}

/// `name=value` of the cookie `name` that `h` sets.
fn set_cookie(h: &HeaderMap, name: &str) -> Option<String> {
    h.get_all(SET_COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .find(|c| c.starts_with(&format!("{name}=")))
}

fn value_of<'a>(html: &'a str, name: &str) -> &'a str {
    let at = html
        .find(&format!("name=\"{name}\" value=\""))
        .unwrap_or_else(|| panic!("no field {name} in {html}"));
    let rest = &html[at + name.len() + 15..];
    &rest[..rest.find('"').unwrap()]
}

/// Logs in with `token`: the status and headers of the form's answer.
async fn login(s: &Server, http: &reqwest::Client, token: &str, next: &str) -> (u16, HeaderMap) {
    let r = http
        .get(s.url(&format!("/ui/login?next={next}")))
        .send()
        .await
        .unwrap();
    let nonce_cookie = set_cookie(r.headers(), "hearth_login").unwrap();
    let html = r.text().await.unwrap();
    let csrf = value_of(&html, "csrf").to_owned();
    let r = http
        .post(s.url("/ui/login"))
        .header("cookie", nonce_cookie.split(';').next().unwrap())
        .header("origin", s.url(""))
        .form_of(&[("token", token), ("csrf", &csrf), ("next", next)])
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.headers().clone())
}

#[tokio::test]
async fn the_root_redirects_and_an_open_loopback_dashboard_needs_no_login() {
    let (s, http) = server().await;
    let r = http.get(s.url("/")).send().await.unwrap();
    assert_eq!((r.status().as_u16(), location(r.headers())), (303, "/ui"));
    let r = http.get(s.url("/ui")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let h = r.headers();
    let csp = h["content-security-policy"].to_str().unwrap();
    assert!(
        csp.starts_with("default-src 'self'") && !csp.contains("unsafe"),
        "{csp}"
    );
    assert_eq!(h["x-frame-options"], "DENY");
    assert_eq!(h["referrer-policy"], "no-referrer");
    let html = r.text().await.unwrap();
    assert!(html.contains("<h1>Overview</h1>"), "{html}");
    assert!(!html.contains("<script>"), "no inline script");
}

#[tokio::test]
async fn with_tokens_every_page_asks_for_a_login_and_a_good_token_opens_it() {
    let (s, http) = server().await;
    let token = token(&s, "t1").await;
    for path in [
        "/ui",
        "/ui/runs?status=failed",
        "/ui/settings",
        "/ui/usage.csv",
    ] {
        let r = http.get(s.url(path)).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 303, "{path}");
        let want = format!(
            "/ui/login?next={}",
            path.replace('/', "%2F")
                .replace('?', "%3F")
                .replace('=', "%3D")
        );
        assert_eq!(location(r.headers()), want, "{path}");
    }

    let (status, _) = login(&s, &http, "hth_not_a_token", "/ui").await;
    assert_eq!(status, 401, "a bad token is refused");

    let (status, h) = login(&s, &http, &token, "/ui/runs").await;
    assert_eq!((status, location(&h)), (303, "/ui/runs"));
    let cookie = set_cookie(&h, "hearth_session").unwrap();
    assert!(
        cookie.contains("HttpOnly")
            && cookie.contains("SameSite=Strict")
            && cookie.contains("Path=/"),
        "{cookie}"
    );
    let pair = cookie.split(';').next().unwrap().to_owned();
    assert!(!pair.contains(&token), "the cookie never holds the token");
    let page = http
        .get(s.url("/ui/runs"))
        .header("cookie", &pair)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status().as_u16(), 200);

    // Revoking the token ends the session at once.
    assert!(s.store.revoke_token("t1").await.unwrap());
    let _other = token_after_revoke(&s).await;
    let page = http
        .get(s.url("/ui/runs"))
        .header("cookie", &pair)
        .send()
        .await
        .unwrap();
    assert_eq!(
        page.status().as_u16(),
        303,
        "a revoked token's session is over"
    );
}

/// Another token, so the server is not open again once the first is revoked.
async fn token_after_revoke(s: &Server) -> String {
    token(s, "t2").await
}

#[tokio::test]
async fn a_change_needs_the_csrf_token_and_the_own_origin() {
    let (s, http) = server().await;
    let token = token(&s, "t1").await;
    let (_, h) = login(&s, &http, &token, "/ui").await;
    let pair = set_cookie(&h, "hearth_session")
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let page = http
        .get(s.url("/ui/logout"))
        .header("cookie", &pair)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = value_of(&page, "csrf").to_owned();
    let post = |origin: Option<&str>, site: Option<&str>, csrf: &str| {
        let mut rb = http
            .post(s.url("/ui/skills/reload"))
            .header("cookie", &pair)
            .form_of(&[("csrf", csrf)]);
        if let Some(o) = origin {
            rb = rb.header("origin", o);
        }
        if let Some(x) = site {
            rb = rb.header("sec-fetch-site", x);
        }
        rb
    };
    let own = s.url("");
    let status =
        |rb: reqwest::RequestBuilder| async move { rb.send().await.unwrap().status().as_u16() };
    assert_eq!(
        status(post(Some(&own), None, "wrong")).await,
        403,
        "a wrong CSRF token"
    );
    assert_eq!(
        status(post(Some("http://evil.example"), None, &csrf)).await,
        403,
        "another origin"
    );
    assert_eq!(
        status(post(Some("null"), None, &csrf)).await,
        403,
        "null without Sec-Fetch-Site"
    );
    assert_eq!(
        status(post(Some("null"), Some("same-origin"), "wrong")).await,
        403,
        "null with a bad token"
    );
    assert_eq!(
        status(post(Some("null"), Some("same-origin"), &csrf)).await,
        303,
        "a same-origin form post"
    );
    assert_eq!(
        status(post(Some(&own), None, &csrf)).await,
        303,
        "a script's post"
    );
    // Elsewhere `null` stays refused, CSRF token or not.
    let r = http
        .post(s.url("/v1/skills/reload"))
        .header("authorization", format!("Bearer {token}"))
        .header("origin", "null")
        .header("sec-fetch-site", "same-origin")
        .header("x-csrf-token", &csrf)
        .header("cookie", &pair)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
}

#[tokio::test]
async fn logging_out_ends_the_session() {
    let (s, http) = server().await;
    let token = token(&s, "t1").await;
    let (_, h) = login(&s, &http, &token, "/ui").await;
    let pair = set_cookie(&h, "hearth_session")
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let page = http
        .get(s.url("/ui/logout"))
        .header("cookie", &pair)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = value_of(&page, "csrf").to_owned();
    let r = http
        .post(s.url("/ui/logout"))
        .header("cookie", &pair)
        .header("origin", s.url(""))
        .form_of(&[("csrf", csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(
        (r.status().as_u16(), location(r.headers())),
        (303, "/ui/login")
    );
    let r = http
        .get(s.url("/ui"))
        .header("cookie", &pair)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 303);
}

#[tokio::test]
async fn unknown_pages_and_runs_are_pages_not_json() {
    let (s, http) = server().await;
    let r = http.get(s.url("/ui/nope")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 404);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let r = http
        .get(s.url("/ui/runs/run_missing"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    assert!(r.text().await.unwrap().contains("Not found"));
}

#[tokio::test]
async fn the_run_list_pages_by_cursor_and_never_reads_more_than_a_page() {
    let (s, http) = server().await;
    let mut ids = Vec::new();
    for i in 0..51 {
        let (status, _, v) = s
            .send(
                s.http.post(s.url("/v1/messages")).json(
                    &serde_json::json!({ "text": "hi", "thread_key": format!("api:page-{i}") }),
                ),
            )
            .await;
        assert_eq!(status, 202, "{v}");
        ids.push(v["run_id"].as_str().unwrap().to_owned());
    }
    let first = http
        .get(s.url("/ui/runs"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(first.matches("<tr id=\"run-").count(), 50, "one page");
    assert!(first.contains(&ids[50]) && !first.contains(&format!("run-{}\"", ids[0])));
    let at = first
        .find("rel=\"next\" href=\"")
        .expect("a link to older runs")
        + 17;
    let next = first[at..].split('"').next().unwrap().replace("&amp;", "&");
    assert_eq!(next, format!("/ui/runs?before={}", ids[1]));
    let second = http
        .get(s.url(&next))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(second.matches("<tr id=\"run-").count(), 1);
    assert!(second.contains(&format!("run-{}\"", ids[0])));
    assert!(!second.contains("rel=\"next\""), "the last page");
}

/// A server over `store` (with its own home) whose logins last `hours`.
async fn server_on(store: &std::sync::Arc<dyn hearth_store::Store>, hours: u64) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let runtime = crate::harness::runtime(dir.path(), "", store, |b| b).await;
    let routes = hearth_server::Routes::build().with_ui_session_hours(hours);
    let app = hearth_server::with_state(routes, crate::harness::state(runtime), 1 << 20);
    Server::serve(
        app,
        hearth_server::ServeLimits::default(),
        store.clone(),
        dir,
    )
    .await
}

#[tokio::test]
async fn a_login_on_one_replica_holds_on_another_sharing_the_store() {
    let (a, http) = server().await;
    let b = server_on(&a.store, 12).await;
    let token = token(&a, "t1").await;
    let (_, h) = login(&a, &http, &token, "/ui").await;
    let pair = set_cookie(&h, "hearth_session")
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let r = http
        .get(b.url("/ui/settings"))
        .header("cookie", &pair)
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status().as_u16(),
        200,
        "the other replica knows the session"
    );
}

#[tokio::test]
async fn a_session_ends_after_ui_session_hours() {
    let dir = tempfile::tempdir().unwrap();
    let store = hearth_runtime::testing::store(dir.path());
    let s = server_on(&store, 0).await;
    let http = reqwest::Client::builder()
        .redirect(Policy::none())
        .build()
        .unwrap();
    let token = token(&s, "t1").await;
    let (status, h) = login(&s, &http, &token, "/ui").await;
    assert_eq!(status, 303);
    let pair = set_cookie(&h, "hearth_session")
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let r = http
        .get(s.url("/ui"))
        .header("cookie", &pair)
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status().as_u16(),
        303,
        "a session of zero hours has ended"
    );
}

#[tokio::test]
async fn the_run_list_filters_by_user_source_and_time_in_the_store() {
    let (s, http) = server().await;
    let mut by = std::collections::BTreeMap::new();
    for (user, source) in [
        ("api:user:ann", "api"),
        ("api:user:bob", "api"),
        ("api:user:ann", "cli"),
    ] {
        let (status, _, v) = s
            .send(s.http.post(s.url("/v1/messages")).json(
                &serde_json::json!({ "text": "hi", "user_key": user, "source": source, "thread_key": format!("api:{source}") }),
            ))
            .await;
        assert_eq!(status, 202, "{v}");
        by.insert((user, source), v["run_id"].as_str().unwrap().to_owned());
    }
    let rows = |html: &str| html.matches("<tr id=\"run-").count();
    let page = http
        .get(s.url("/ui/runs?user=api%3Auser%3Aann"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(rows(&page), 2);
    assert!(!page.contains(&by[&("api:user:bob", "api")]));
    let page = http
        .get(s.url("/ui/runs?user=api%3Auser%3Aann&source=cli"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(rows(&page), 1);
    assert!(page.contains(&by[&("api:user:ann", "cli")]));
    let page = http
        .get(s.url("/ui/runs?since=1h"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(rows(&page), 3);
    let page = http
        .get(s.url("/ui/runs?until=1h"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(rows(&page), 0, "none is older than an hour");
    let r = http
        .get(s.url("/ui/runs?since=yesterdayish"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
}

/// A session cookie (`name=value`) of `token`.
pub async fn login_cookie(s: &Server, http: &reqwest::Client, token: &str) -> String {
    let (status, h) = login(s, http, token, "/ui").await;
    assert_eq!(status, 303);
    set_cookie(&h, "hearth_session")
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned()
}

/// A thread's page sets its permission mode and, in `plan` mode, approves
/// the plan: the mode switches and the plan goes back as the next message.
#[tokio::test]
async fn a_threads_page_sets_its_mode_and_runs_the_plan() {
    let (s, http) = server().await;
    let own = s.url("");
    let page = |key: &'static str| {
        let http = http.clone();
        let url = s.url(&format!("/ui/threads/{key}"));
        async move { http.get(url).send().await.unwrap().text().await.unwrap() }
    };
    let html = page("api%3Aplanner").await;
    assert!(html.contains("<dd id=\"mode\">ask"), "{html}");
    assert!(!html.contains("Run the plan"), "no plan to run in ask mode");
    let csrf = value_of(&html, "csrf").to_owned();
    let post = |path: &str, pairs: &[(&str, &str)]| {
        http.post(s.url(path))
            .header("origin", &own)
            .form_of(pairs)
            .send()
    };
    let r = post(
        "/ui/threads/api%3Aplanner/settings",
        &[("csrf", &csrf), ("mode", "plan")],
    )
    .await
    .unwrap();
    assert_eq!(r.status().as_u16(), 303);
    let v: serde_json::Value = http
        .get(s.url("/v1/threads/api%3Aplanner"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["mode"], "plan", "{v}");
    let html = page("api%3Aplanner").await;
    assert!(html.contains("Run the plan"), "{html}");
    // Nothing to carry out before the model has answered.
    let r = post(
        "/ui/threads/api%3Aplanner/run-plan",
        &[("csrf", &csrf), ("mode", "auto")],
    )
    .await
    .unwrap();
    assert_eq!(r.status().as_u16(), 409);
    let r = http
        .post(s.url("/v1/messages"))
        .json(&serde_json::json!({"thread_key": "api:planner", "text": "1. look 2. fix", "wait": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "{}", r.text().await.unwrap());
    let r = post(
        "/ui/threads/api%3Aplanner/run-plan",
        &[("csrf", &csrf), ("mode", "auto")],
    )
    .await
    .unwrap();
    assert_eq!(r.status().as_u16(), 303);
    assert!(location(r.headers()).starts_with("/ui/runs/"));
    let v: serde_json::Value = http
        .get(s.url("/v1/threads/api%3Aplanner"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["mode"], "auto", "{v}");
    let v: serde_json::Value = http
        .get(s.url("/v1/threads/api%3Aplanner/history?limit=5"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let sent = v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["text"].as_str())
        .unwrap_or_default()
        .to_owned();
    assert!(
        sent.starts_with(hearth_core::mode::RUN_PLAN_PREFIX) && sent.contains("1. look 2. fix"),
        "{v}"
    );
}
