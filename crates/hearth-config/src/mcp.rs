//! `[mcp]` and `[mcp.servers.<name>]`: the MCP servers hearth starts and
//! whose tools it offers. Each server is either a child process speaking MCP
//! over stdio (`command`) or a streamable HTTP endpoint (`url`). Secrets never
//! sit in the file: HTTP header values and passed-through variables are read
//! from hearth's own environment by name.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::PresetName;

/// Longest server name: tool names are `<server>__<tool>` within 64 characters.
pub const MAX_SERVER_NAME: usize = 32;

/// `[mcp]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpConfig {
    /// A tool result longer than this (in bytes of text) is cut with a notice.
    pub max_result_bytes: usize,
    /// `[mcp.servers.<name>]`, each checked by [`validate_server`].
    #[serde(deserialize_with = "servers")]
    pub servers: BTreeMap<String, McpServerConfig>,
}

impl Default for McpConfig {
    fn default() -> Self {
        Self {
            max_result_bytes: 256 * 1024,
            servers: BTreeMap::new(),
        }
    }
}

/// `[mcp.servers.<name>]`: one MCP server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpServerConfig {
    /// The program to run (stdio transport); looked up on `PATH`.
    pub command: Option<String>,
    /// Its arguments.
    pub args: Vec<String>,
    /// Literal variables the child gets (beyond `PATH` and `HOME`).
    pub env: BTreeMap<String, String>,
    /// Variables passed through from hearth's environment, by name.
    pub env_pass: Vec<String>,
    /// The streamable HTTP endpoint (HTTP transport).
    pub url: Option<String>,
    /// HTTP headers whose values come from hearth's environment:
    /// `{ Authorization = "VAR" }` sends the value of `$VAR`.
    pub headers_env: BTreeMap<String, String>,
    /// Seconds one call may take; overrides `[agent] tool_timeout_secs`.
    pub timeout_secs: u64,
    /// `false` keeps the server configured but never started.
    pub enabled: bool,
    /// The preset whose holders get capability `mcp.<name>`.
    pub preset: PresetName,
    /// Tools (the server's own names, without the `<server>__` prefix) that
    /// are read-class: no confirmation, and redone after a crash. Every
    /// other tool is write-class unless `trust_annotations` is set.
    pub read_tools: Vec<String>,
    /// `true` lets the server's own `readOnlyHint: true` make a tool
    /// read-class. The MCP specification calls annotations untrusted (a
    /// server could mark a destructive tool read-only), so only the
    /// operator can turn this on.
    pub trust_annotations: bool,
}

impl Default for McpServerConfig {
    fn default() -> Self {
        Self {
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            env_pass: Vec::new(),
            url: None,
            headers_env: BTreeMap::new(),
            timeout_secs: 60,
            enabled: true,
            preset: PresetName::Trusted,
            read_tools: Vec::new(),
            trust_annotations: false,
        }
    }
}

fn servers<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<String, McpServerConfig>, D::Error> {
    let servers = BTreeMap::<String, McpServerConfig>::deserialize(d)?;
    for (name, server) in &servers {
        validate_server(name, server).map_err(serde::de::Error::custom)?;
    }
    Ok(servers)
}

/// Checks one server entry: a usable name, exactly one transport, and only
/// the keys that transport uses, so a mistake fails at start with its reason.
pub fn validate_server(name: &str, s: &McpServerConfig) -> Result<(), String> {
    let word = |w: &str| {
        w.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    };
    // `__` separates server and tool in tool names; inside a server name it
    // could make two servers' tools collide (`a` + `b__c`, `a__b` + `c`).
    if name.is_empty() || name.len() > MAX_SERVER_NAME || !word(name) || name.contains("__") {
        return Err(format!(
            "server name {name:?} must be 1 to {MAX_SERVER_NAME} letters, digits, _ or -, \
             without `__` (it prefixes the server's tool names as <server>__<tool>)"
        ));
    }
    let at = format!("server {name}");
    match (&s.command, &s.url) {
        (Some(_), Some(_)) => {
            return Err(format!(
                "{at}: set either command (stdio) or url (HTTP), not both"
            ));
        }
        (None, None) => {
            return Err(format!(
                "{at}: set command (a program speaking MCP over stdio) or url (a streamable HTTP endpoint)"
            ));
        }
        (Some(command), None) => {
            if command.trim().is_empty() {
                return Err(format!("{at}: command is empty"));
            }
            if !s.headers_env.is_empty() {
                return Err(format!(
                    "{at}: headers_env is for url servers; a command server gets env"
                ));
            }
        }
        (None, Some(url)) => {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(format!(
                    "{at}: url {url:?} must start with http:// or https://"
                ));
            }
            if !s.args.is_empty() || !s.env.is_empty() || !s.env_pass.is_empty() {
                return Err(format!(
                    "{at}: args, env and env_pass are for command servers; a url server gets headers_env"
                ));
            }
        }
    }
    let var = |v: &str| {
        !v.is_empty()
            && !v.as_bytes()[0].is_ascii_digit()
            && v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    };
    for v in s.env.keys().chain(&s.env_pass) {
        if !var(v) {
            return Err(format!("{at}: {v:?} is not an environment variable name"));
        }
    }
    for (header, v) in &s.headers_env {
        if header.is_empty() || !header.bytes().all(|b| b.is_ascii_graphic() && b != b':') {
            return Err(format!("{at}: {header:?} is not an HTTP header name"));
        }
        if !var(v) {
            return Err(format!(
                "{at}: headers_env.{header} must name an environment variable (its value is read at start), not {v:?}"
            ));
        }
    }
    if s.timeout_secs == 0 {
        return Err(format!("{at}: timeout_secs must be at least 1"));
    }
    validate_read_tools(&at, name, &s.read_tools)
}

/// Longest tool name `read_tools` accepts (the MCP specification's limit).
const MAX_TOOL_NAME: usize = 128;

/// Checks `read_tools` of server (or executable skill) `owner`: each entry
/// is a tool name as the server itself lists it. The usual slip, the name
/// the model sees (`<owner>__<tool>`), is refused with the fix.
pub(crate) fn validate_read_tools(at: &str, owner: &str, tools: &[String]) -> Result<(), String> {
    for t in tools {
        if let Some(own) = t.strip_prefix(&format!("{owner}__")) {
            return Err(format!(
                "{at}: read_tools lists the server's own tool names: write {own:?}, not {t:?}"
            ));
        }
        if t.is_empty()
            || t.len() > MAX_TOOL_NAME
            || t.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(format!(
                "{at}: read_tools: {t:?} is not a tool name (1 to {MAX_TOOL_NAME} characters, \
                 no spaces; the name the server lists, e.g. \"read_file\")"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::{Config, PresetName};

    fn load(toml: &str) -> Result<Config, crate::ConfigError> {
        crate::load_str(toml, "f.toml", Vec::new())
    }

    #[test]
    fn servers_parse_with_defaults() {
        let c = load(
            "[mcp]\nmax_result_bytes = 1000\n\
             [mcp.servers.fs]\ncommand = \"npx\"\nargs = [\"-y\", \"x\"]\nenv = { A = \"1\" }\nenv_pass = [\"TOKEN\"]\n\
             [mcp.servers.web]\nurl = \"https://example.org/mcp\"\nheaders_env = { Authorization = \"WEB_TOKEN\" }\n\
             timeout_secs = 5\nenabled = false\npreset = \"member\"\nread_tools = [\"search\"]\n",
        )
        .unwrap();
        assert_eq!(c.mcp.max_result_bytes, 1000);
        let fs = &c.mcp.servers["fs"];
        assert_eq!(fs.command.as_deref(), Some("npx"));
        assert_eq!((fs.timeout_secs, fs.enabled), (60, true));
        assert_eq!(fs.preset, PresetName::Trusted);
        assert_eq!(fs.env_pass, ["TOKEN"]);
        let web = &c.mcp.servers["web"];
        assert_eq!(web.headers_env["Authorization"], "WEB_TOKEN");
        assert_eq!((web.timeout_secs, web.enabled), (5, false));
        assert_eq!(web.preset, PresetName::Member);
        assert_eq!(web.read_tools, ["search"]);
        assert_eq!(Config::default().mcp.max_result_bytes, 256 * 1024);
    }

    #[test]
    fn annotations_are_untrusted_unless_the_operator_says_so() {
        let c = load(
            "[mcp.servers.a]\ncommand = \"x\"\n\
             [mcp.servers.b]\ncommand = \"x\"\ntrust_annotations = true\n",
        )
        .unwrap();
        assert!(!c.mcp.servers["a"].trust_annotations, "false by default");
        assert!(c.mcp.servers["b"].trust_annotations);
    }

    #[test]
    fn read_tools_name_the_servers_own_tools() {
        for (toml, want) in [
            (
                "[mcp.servers.fs]\ncommand = \"x\"\nread_tools = [\"fs__read_file\"]\n",
                "write \"read_file\", not \"fs__read_file\"",
            ),
            (
                "[mcp.servers.fs]\ncommand = \"x\"\nread_tools = [\"\"]\n",
                "read_tools: \"\" is not a tool name",
            ),
            (
                "[mcp.servers.fs]\ncommand = \"x\"\nread_tools = [\"read file\"]\n",
                "read_tools: \"read file\" is not a tool name",
            ),
            (
                "[mcp.servers.fs]\ncommand = \"x\"\ntrust_annotations = \"yes\"\n",
                "trust_annotations",
            ),
        ] {
            let err = load(toml).unwrap_err().to_string();
            assert!(err.contains(want), "{toml}: {err}");
            assert!(err.contains("mcp"), "{toml}: {err}");
        }
    }

    #[test]
    fn mistakes_are_refused_with_the_reason() {
        for (toml, want) in [
            ("[mcp.servers.a]\n", "set command"),
            (
                "[mcp.servers.a]\ncommand = \"x\"\nurl = \"http://h\"\n",
                "not both",
            ),
            ("[mcp.servers.a]\nurl = \"ftp://h\"\n", "http://"),
            (
                "[mcp.servers.a]\nurl = \"http://h\"\nenv = { A = \"1\" }\n",
                "command servers",
            ),
            (
                "[mcp.servers.a]\ncommand = \"x\"\nheaders_env = { X = \"V\" }\n",
                "url servers",
            ),
            (
                "[mcp.servers.a]\nurl = \"http://h\"\nheaders_env = { Authorization = \"Bearer abc\" }\n",
                "environment variable",
            ),
            ("[mcp.servers.\"a b\"]\ncommand = \"x\"\n", "server name"),
            ("[mcp.servers.a__b]\ncommand = \"x\"\n", "without `__`"),
            (
                "[mcp.servers.a]\ncommand = \"x\"\ntimeout_secs = 0\n",
                "timeout_secs",
            ),
            (
                "[mcp.servers.a]\ncommand = \"x\"\nenv_pass = [\"1A\"]\n",
                "variable name",
            ),
            ("[mcp.servers.a]\ncommand = \"x\"\ncwd = \"/\"\n", "cwd"),
        ] {
            let err = load(toml).unwrap_err().to_string();
            assert!(err.contains(want), "{toml}: {err}");
            assert!(err.contains("mcp"), "{toml}: {err}");
        }
    }
}
