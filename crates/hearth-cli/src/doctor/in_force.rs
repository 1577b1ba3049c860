//! `config in force`: when a `hearth serve` runs on this home, when it
//! loaded the configuration it serves (`GET /v1/config`'s `loaded_at`), and
//! whether hearth.toml changed after that: then the server does not serve
//! what the file says until `hearth config reload` or SIGHUP reads it again.
//!
//! Whether a server runs is told by the home's lock (so a server of another
//! home that happens to answer at the address is never compared with this
//! file); it is asked at `--url`/`HEARTH_URL` when given, else at the
//! configured bind address, with the token from `--token`/`HEARTH_TOKEN`.
//! No server, or one that does not answer or show its configuration, is an
//! `ok` line saying so: nothing `serve` would refuse.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use hearth_server::routes::config::ConfigShown;
use serde_json::Value;

use super::{Report, Status};
use crate::cli::Global;
use crate::client::given_or_bind;

/// The check's name in the report.
const NAME: &str = "config in force";
/// How long the server gets to answer: it is local, and doctor must not
/// hang on one that does not answer.
const TIMEOUT: Duration = Duration::from_secs(3);
/// What secret states are compared as: the server's environment is not
/// this shell's, and a secret set in one and not the other is no change of
/// the file.
const SECRET: &str = "<secret>";

/// Where to look for the running server and its file.
pub struct Running<'a> {
    /// The home (its lock says whether a server runs on it).
    pub home: &'a Path,
    /// The configuration file the server reads.
    pub file: &'a Path,
    /// The bind address the configuration names, when valid.
    pub bind: Option<SocketAddr>,
}

/// Adds the `config in force` check. `file_view` is the file's
/// configuration as the server would show it (from doctor's own assembly),
/// to name the sections that differ.
pub async fn check(report: &mut Report, g: &Global, at: &Running<'_>, file_view: Option<&Value>) {
    let Some(pid) = crate::home_lock::holder(at.home) else {
        report.ok(
            NAME,
            format!(
                "no `hearth serve` runs on {}; it will load {} as checked above",
                at.home.display(),
                at.file.display()
            ),
        );
        return;
    };
    let who = pid.map_or_else(
        || "the running hearth serve".to_owned(),
        |p| format!("hearth serve (PID {p})"),
    );
    let base = match crate::client::base_url(&given_or_bind(g.url.as_deref(), at.bind)) {
        Ok(b) => b,
        Err(e) => {
            report.bad(NAME, Status::Warn, format!("{:#}", e.error), None);
            return;
        }
    };
    let shown = match fetch(&base, g.token.as_deref()).await {
        Ok(s) => s,
        Err(why) => {
            report.ok(
                NAME,
                format!("{who} runs on this home, but {why}; cannot compare the config in force with {}", at.file.display()),
            );
            return;
        }
    };
    let loaded = shown
        .loaded_at
        .parse::<jiff::Timestamp>()
        .map(jiff::Timestamp::as_millisecond)
        .ok();
    let changed = std::fs::metadata(at.file)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .and_then(|d| i64::try_from(d.as_millis()).ok());
    let differ = file_view
        .map(|v| differing(v, &shown.sections))
        .unwrap_or_default();
    let file = at.file.display();
    let loaded_at = &shown.loaded_at;
    match (loaded, changed) {
        (Some(loaded), Some(changed)) if changed > loaded => {
            let mut message = format!(
                "{who} at {base} loaded its config at {loaded_at}, and {file} changed after that \
                 (at {}): the server does not serve what the file says",
                hearth_core::rfc3339(changed)
            );
            if !differ.is_empty() {
                message.push_str(&format!(" (sections that differ: {})", differ.join(", ")));
            }
            let signal = pid.map_or_else(|| "SIGHUP".to_owned(), |p| format!("`kill -HUP {p}`"));
            report.bad(
                NAME,
                Status::Warn,
                message,
                Some(format!(
                    "run `hearth config reload` (or send it {signal}) to put the file in force; \
                     it says what changed and what needs a restart"
                )),
            );
        }
        _ => {
            let mut message = format!("{who} at {base} serves the config it loaded at {loaded_at}");
            if changed.is_some() && loaded.is_some() {
                message.push_str(&format!(", after {file} last changed"));
            }
            if !differ.is_empty() {
                // The file did not change since: what differs was set where
                // the server was started, not in the file.
                message.push_str(&format!(
                    "; its {} differ from what this shell reads (its environment or flags set them)",
                    differ.join(", ")
                ));
            }
            report.ok(NAME, message);
        }
    }
}

/// `GET /v1/config`, or what went wrong, in words that end a sentence
/// beginning "hearth serve runs on this home, but".
async fn fetch(base: &str, token: Option<&str>) -> Result<ConfigShown, String> {
    let client = hearth_http::client_builder()
        .connect_timeout(TIMEOUT)
        .timeout(TIMEOUT)
        .build()
        .map_err(|e| format!("the HTTP client cannot be built ({e})"))?;
    let mut rb = client.get(format!("{base}/v1/config"));
    // An empty HEARTH_TOKEN counts as unset, as for the client commands.
    if let Some(t) = token.filter(|t| !t.is_empty()) {
        rb = rb.bearer_auth(t);
    }
    let resp = rb.send().await.map_err(|e| {
        format!(
            "nothing answers at {base} ({}); give its address with --url or HEARTH_URL",
            e.without_url()
        )
    })?;
    let status = resp.status();
    if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
        return Err(format!(
            "it shows its config only to an operator (HTTP {} at {base}); set HEARTH_TOKEN to \
             an API token",
            status.as_u16()
        ));
    }
    if !status.is_success() {
        return Err(format!(
            "{base} answered GET /v1/config with HTTP {}",
            status.as_u16()
        ));
    }
    resp.json::<ConfigShown>().await.map_err(|e| {
        format!(
            "{base} answered GET /v1/config with something that is not a config ({})",
            e.without_url()
        )
    })
}

/// The sections whose values differ between the file's view and the one
/// served, secret states aside, and `server.bind` aside (`--bind` and
/// `HEARTH_BIND` set it where the server starts).
fn differing(file: &Value, served: &BTreeMap<String, Value>) -> Vec<String> {
    let Value::Object(file) = file else {
        return Vec::new();
    };
    let sections: BTreeSet<&String> = file.keys().chain(served.keys()).collect();
    let mut out = Vec::new();
    for section in sections {
        if section == "secret_key" {
            continue;
        }
        let mut a = file.get(section).cloned().unwrap_or(Value::Null);
        let mut b = served.get(section).cloned().unwrap_or(Value::Null);
        for v in [&mut a, &mut b] {
            if section == "server"
                && let Value::Object(m) = v
            {
                m.remove("bind");
            }
            normalise(v);
        }
        if a != b {
            out.push(section.clone());
        }
    }
    out
}

/// Every secret state (`<set>`/`<unset>`) as one value.
fn normalise(v: &mut Value) {
    match v {
        Value::String(s) if s == "<set>" || s == "<unset>" => *s = SECRET.to_owned(),
        Value::Object(m) => m.values_mut().for_each(normalise),
        Value::Array(a) => a.iter_mut().for_each(normalise),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sections_differ_by_their_values_not_by_secret_states_or_the_bind() {
        let file = json!({
            "server": { "bind": "127.0.0.1:7777", "x": 1 },
            "agent": { "max_steps": 5 },
            "llm": { "api_key_env": "K", "api_key": "<set>" },
            "secret_key": "<set>",
        });
        let served: BTreeMap<String, Value> = [
            (
                "server".to_owned(),
                json!({ "bind": "127.0.0.1:0", "x": 1 }),
            ),
            ("agent".to_owned(), json!({ "max_steps": 8 })),
            (
                "llm".to_owned(),
                json!({ "api_key_env": "K", "api_key": "<unset>" }),
            ),
            ("secret_key".to_owned(), json!("<unset>")),
            ("budget".to_owned(), json!({})),
        ]
        .into_iter()
        .collect();
        assert_eq!(differing(&file, &served), ["agent", "budget"]);
    }
}
