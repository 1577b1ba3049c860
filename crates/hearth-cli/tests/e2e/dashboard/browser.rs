//! Headless Chromium driven over WebDriver (Debian's `chromium` and
//! `chromium-driver`), with what the dashboard's tests check on every
//! page: the browser's console (failed requests and CSP violations are
//! logged there as errors) and axe-core's accessibility rules.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// A program on PATH.
fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// One Chromium at a time: each takes a few hundred MB and a core, and the
/// machines that run the tests have two.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// One browser session; the driver is killed when dropped.
pub struct Browser {
    pub c: Client,
    driver_url: String,
    session: String,
    http: reqwest::Client,
    _driver: Child,
    /// Released last, once the driver is gone.
    _turn: tokio::sync::MutexGuard<'static, ()>,
}

/// A headless Chromium, or `None` (after one line saying why) when chromium
/// or chromedriver is missing outside CI; under `CI=true` that fails.
pub async fn open() -> Option<Browser> {
    let (Some(chromium), Some(driver)) = (which("chromium"), which("chromedriver")) else {
        if hearth_testkit::tools::in_ci() {
            panic!(
                "CI=true but chromium or chromedriver is not on PATH: .ci/prereqs.sh installs Debian's chromium and chromium-driver"
            );
        }
        eprintln!(
            "skipped: the dashboard's browser tests need chromium and chromedriver on PATH (apt-get install chromium chromium-driver)"
        );
        return None;
    };
    let turn = ONE_AT_A_TIME.lock().await;
    let (child, port) = start_driver(&driver).await;
    let driver_url = format!("http://127.0.0.1:{port}");
    let caps = json!({
        "browserName": "chrome",
        "goog:chromeOptions": {
            "binary": chromium,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--no-first-run", "--window-size=1280,900", "--disable-extensions"]
        },
        "goog:loggingPrefs": { "browser": "ALL" }
    });
    let Value::Object(caps) = caps else {
        unreachable!()
    };
    let c = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&driver_url)
        .await
        .expect("a WebDriver session with headless chromium");
    let session = c.session_id().await.unwrap().unwrap();
    Some(Browser {
        c,
        driver_url,
        session,
        http: reqwest::Client::new(),
        _driver: child,
        _turn: turn,
    })
}

/// Attempts at starting chromedriver.
const DRIVER_ATTEMPTS: usize = 3;

/// A chromedriver listening on a port of its choice, and that port. It
/// picks the port itself (`--port=0`), and while the other tests bind
/// ports by the hundred it has been seen to exit before listening (one CI
/// run of many): it is then started again, and its stderr is shown when it
/// never listens.
async fn start_driver(driver: &std::path::Path) -> (Child, u16) {
    let mut reasons = Vec::new();
    for _ in 0..DRIVER_ATTEMPTS {
        let mut child = Command::new(driver)
            .arg("--port=0")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let port = tokio::time::timeout(Duration::from_secs(20), async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if let Some(rest) = line.split("started successfully on port ").nth(1) {
                    return Some(rest.trim_end_matches('.').trim().parse::<u16>().unwrap());
                }
            }
            None
        })
        .await
        .expect("chromedriver did not start within 20 s");
        let mut stderr = child.stderr.take().unwrap();
        if let Some(port) = port {
            tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
            tokio::spawn(async move { tokio::io::copy(&mut stderr, &mut tokio::io::sink()).await });
            return (child, port);
        }
        let mut said = String::new();
        let _ = tokio::io::AsyncReadExt::read_to_string(&mut stderr, &mut said).await;
        reasons.push(format!("{:?}: {said}", child.wait().await));
    }
    panic!("chromedriver exited before listening, {DRIVER_ATTEMPTS} times: {reasons:?}");
}

/// Where screenshots go: `<target>/dashboard-screenshots`.
pub fn screenshot_dir() -> PathBuf {
    let bin = PathBuf::from(crate::harness::bin());
    let dir = bin
        .parent()
        .and_then(|d| d.parent())
        .unwrap_or(&bin)
        .join("dashboard-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

impl Browser {
    async fn driver(&self, path: &str, body: Value) -> Value {
        let r = self
            .http
            .post(format!(
                "{}/session/{}/{path}",
                self.driver_url, self.session
            ))
            .json(&body)
            .send()
            .await
            .unwrap();
        r.json().await.unwrap()
    }

    /// The browser console's errors since the last call (the driver hands
    /// each entry out once).
    pub async fn console_errors(&self) -> Vec<String> {
        let v = self.driver("se/log", json!({ "type": "browser" })).await;
        v["value"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["level"] == "SEVERE")
            .map(|e| e["message"].as_str().unwrap_or("").to_owned())
            .collect()
    }

    /// Lays the page out `width` CSS pixels wide (a phone at 360).
    pub async fn width(&self, width: u32) {
        let mobile = width < 600;
        self.driver(
            "goog/cdp/execute",
            json!({ "cmd": "Emulation.setDeviceMetricsOverride",
                    "params": { "width": width, "height": 900, "deviceScaleFactor": 1, "mobile": mobile } }),
        )
        .await;
    }

    /// Saves a screenshot of the page as `<name>-desktop.png` and
    /// `<name>-phone.png` (360 px wide).
    pub async fn screenshots(&self, name: &str) {
        let dir = screenshot_dir();
        for (suffix, w) in [("desktop", 1280), ("phone", 360)] {
            self.width(w).await;
            let png = self.c.screenshot().await.unwrap();
            std::fs::write(dir.join(format!("{name}-{suffix}.png")), png).unwrap();
        }
        self.width(1280).await;
    }

    /// Goes to `url` and checks the page: no console errors, and no
    /// serious or critical accessibility violation (when axe-core is there).
    pub async fn visit(&self, url: &str) {
        self.c.goto(url).await.unwrap();
        self.check_page(url).await;
    }

    /// The checks of [`Browser::visit`] on the page as it is.
    pub async fn check_page(&self, what: &str) {
        let errors = self.console_errors().await;
        assert!(errors.is_empty(), "{what}: console errors: {errors:#?}");
        if let Some(axe) = axe_source() {
            self.c.execute(&axe, vec![]).await.unwrap();
            // Both themes: the page follows the system's.
            for scheme in ["dark", "light"] {
                self.driver(
                    "goog/cdp/execute",
                    json!({ "cmd": "Emulation.setEmulatedMedia",
                            "params": { "features": [{ "name": "prefers-color-scheme", "value": scheme }] } }),
                )
                .await;
                self.axe(what, scheme).await;
            }
        }
    }

    async fn axe(&self, what: &str, scheme: &str) {
        // A live redraw that swaps nodes while axe walks them makes axe
        // itself throw (a node it held is gone): that run says nothing
        // about the page, so it is made again. Violations are never retried.
        let mut failures = Vec::new();
        for _ in 0..3 {
            let found = self
                .c
                .execute_async(
                    "const done = arguments[arguments.length - 1];
                     axe.run(document, { resultTypes: ['violations'] })
                       .then(r => done({ violations: r.violations
                         .filter(v => v.impact === 'serious' || v.impact === 'critical')
                         .map(v => v.id + ' (' + v.impact + '): ' + v.nodes.map(n => n.target.join(' ')).join(', ')) }))
                       .catch(e => done({ failed: String(e) }));",
                    vec![],
                )
                .await;
            match found {
                Ok(v) if v["failed"].is_string() => failures.push(v["failed"].to_string()),
                Ok(v) => {
                    let found: Vec<String> = serde_json::from_value(v["violations"].clone())
                        .unwrap_or_else(|e| panic!("{what}: axe answered {v}: {e}"));
                    assert!(
                        found.is_empty(),
                        "{what} ({scheme} theme): accessibility violations: {found:#?}"
                    );
                    return;
                }
                Err(e) => failures.push(e.to_string()),
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        panic!("{what} ({scheme} theme): axe could not run: {failures:#?}");
    }

    /// The element `css`, waited for up to 20 s.
    pub async fn find(&self, css: &str) -> fantoccini::elements::Element {
        tokio::time::timeout(
            Duration::from_secs(20),
            self.c.wait().forever().for_element(Locator::Css(css)),
        )
        .await
        .unwrap_or_else(|_| panic!("no {css} within 20 s"))
        .unwrap()
    }

    /// The text of `css`, read again if a live redraw replaced the element
    /// between finding and reading it.
    pub async fn text(&self, css: &str) -> String {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let read = match self.c.find(Locator::Css(css)).await {
                Ok(e) => e.text().await.map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            match read {
                Ok(t) => return t,
                Err(e) if tokio::time::Instant::now() >= deadline => {
                    panic!("cannot read {css}: {e}")
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    /// Clicks the element `css`, found again if a live redraw replaced it
    /// between finding and clicking.
    pub async fn click(&self, css: &str) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let clicked = match self.c.find(Locator::Css(css)).await {
                Ok(e) => e.click().await.map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            match clicked {
                Ok(()) => return,
                Err(e) if tokio::time::Instant::now() >= deadline => {
                    panic!("cannot click {css}: {e}")
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    /// Clicks the form button `css` and waits until the page its post leads
    /// to has loaded: a new document, not the one clicked on. Without the
    /// wait, a `visit` right after could cut the post short, or be overtaken
    /// by the post's redirect and land back on the page posted from.
    pub async fn submit(&self, css: &str) {
        self.mark_page().await;
        self.click(css).await;
        self.until_new_page(css).await;
    }

    /// Marks the document shown now, so that [`Browser::until_new_page`]
    /// can tell it from the next one.
    pub async fn mark_page(&self) {
        self.c
            .execute("window.hearthPosted = true", vec![])
            .await
            .unwrap();
    }

    /// Waits until a document other than the one [`Browser::mark_page`]
    /// marked has loaded (after `what`, a post from it).
    pub async fn until_new_page(&self, what: &str) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let loaded = self
                .c
                .execute(
                    "return window.hearthPosted !== true && document.readyState === 'complete'",
                    vec![],
                )
                .await;
            // While the browser navigates, a script may fail to run: asked again.
            if let Ok(Value::Bool(true)) = loaded {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no page loaded within 20 s of {what}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until the text of `css` contains `want` (the page changes
    /// itself: a live redraw or a streamed answer).
    pub async fn until_text(&self, css: &str, want: &str) -> String {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        let mut last = String::new();
        while tokio::time::Instant::now() < deadline {
            if let Ok(e) = self.c.find(Locator::Css(css)).await
                && let Ok(t) = e.text().await
            {
                if t.contains(want) {
                    return t;
                }
                last = t;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{css} did not come to contain {want:?}; last: {last:?}");
    }
}

/// axe-core's source: `HEARTH_AXE`, or where `.ci/prereqs.sh` puts it. When
/// missing: a failure under `CI=true`, else one line and no check.
fn axe_source() -> Option<String> {
    let path = std::env::var_os("HEARTH_AXE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/tmp".into()))
                .join(".cache/hearth-axe-4.10.3/node_modules/axe-core/axe.min.js")
        });
    match std::fs::read_to_string(&path) {
        Ok(s) => Some(s),
        Err(_) if hearth_testkit::tools::in_ci() => {
            panic!(
                "CI=true but axe-core is not at {} (.ci/prereqs.sh installs it)",
                path.display()
            )
        }
        Err(_) => {
            eprintln!(
                "skipped the accessibility check: axe-core is not at {} (run .ci/prereqs.sh)",
                path.display()
            );
            None
        }
    }
}
