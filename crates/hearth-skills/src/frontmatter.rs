//! SKILL.md parsing: the `---` frontmatter, read leniently.
//!
//! The Agent Skills spec fields plus OpenClaw's extras are read; unknown keys
//! are ignored (the official validator rejects OpenClaw's keys, so being
//! strict would refuse skills people already use). A field with the wrong
//! shape is a [`Problem`] naming it, never a panic. When the block is not
//! valid YAML as a whole (OpenClaw writes `metadata` as JSON5, with comments
//! and trailing commas), each top-level key is parsed alone and `metadata`
//! falls back to JSON5.

use serde_json::{Map, Value};

/// A field of a skill that is missing or malformed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The field, e.g. `description` or `metadata.openclaw.requires.bins`.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl Problem {
    pub(crate) fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Longest `description` the spec allows, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;

/// OpenClaw's `metadata.openclaw` (or the legacy `metadata.clawdbot`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpenClaw {
    /// Operating systems the skill works on (`darwin`, `linux`, `win32`);
    /// empty for any.
    pub os: Vec<String>,
    /// Programs that must all be on `PATH`.
    pub bins: Vec<String>,
    /// Programs of which one must be on `PATH`.
    pub any_bins: Vec<String>,
    /// Environment variables that must be set.
    pub env: Vec<String>,
    /// Offered whatever its requirements say.
    pub always: bool,
    /// The variable holding the skill's main credential.
    pub primary_env: Option<String>,
}

/// The frontmatter's fields, with defaults for what is absent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Frontmatter {
    /// `name` (empty when missing: a problem says so).
    pub name: String,
    /// `description` (empty when missing).
    pub description: String,
    /// `license`.
    pub license: Option<String>,
    /// `compatibility`.
    pub compatibility: Option<String>,
    /// `allowed-tools`.
    pub allowed_tools: Vec<String>,
    /// `user-invocable` (default true): `/name` in a message invokes it.
    pub user_invocable: bool,
    /// `disable-model-invocation` (default false): kept out of the prompt.
    pub disable_model_invocation: bool,
    /// OpenClaw's gating metadata.
    pub openclaw: OpenClaw,
}

/// The frontmatter block and the body after it; `None` when the text does
/// not start with a `---` line closed by another.
pub fn split(text: &str) -> Option<(&str, &str)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text
        .strip_prefix("---\r\n")
        .or_else(|| text.strip_prefix("---\n"))?;
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Some((&rest[..offset], &rest[offset + line.len()..]));
        }
        offset += line.len();
    }
    None
}

/// The body of a SKILL.md (everything after the frontmatter), or the whole
/// text when it has none.
pub fn body(text: &str) -> &str {
    split(text).map_or(text, |(_, body)| body)
}

/// Parses a SKILL.md's text into its fields and the problems found.
pub fn parse(text: &str) -> (Frontmatter, Vec<Problem>) {
    let mut problems = Vec::new();
    let Some((yaml, _)) = split(text) else {
        problems.push(Problem::new(
            "frontmatter",
            "missing: SKILL.md must start with a `---` block holding name and description",
        ));
        return (Frontmatter::default(), problems);
    };
    let map = match yaml_serde::from_str::<Value>(yaml) {
        Ok(Value::Object(map)) => map,
        Ok(Value::Null) => Map::new(),
        Ok(_) => {
            problems.push(Problem::new("frontmatter", "is not a mapping of keys"));
            Map::new()
        }
        Err(_) => key_by_key(yaml, &mut problems),
    };
    (fields(&map, &mut problems), problems)
}

/// Parses each top-level key alone, so one bad value costs only its key;
/// `metadata` may be JSON5.
fn key_by_key(yaml: &str, problems: &mut Vec<Problem>) -> Map<String, Value> {
    let mut blocks: Vec<(String, String)> = Vec::new();
    for line in yaml.lines() {
        let top = line
            .chars()
            .next()
            .is_some_and(|c| !c.is_whitespace() && c != '#' && c != '}' && c != ']');
        match line.split_once(':') {
            Some((key, _)) if top && !key.contains(' ') => {
                blocks.push((key.trim().to_owned(), format!("{line}\n")));
            }
            _ => {
                if let Some((_, block)) = blocks.last_mut() {
                    block.push_str(line);
                    block.push('\n');
                }
            }
        }
    }
    let mut map = Map::new();
    for (key, block) in blocks {
        let parsed = yaml_serde::from_str::<Value>(&block)
            .ok()
            .and_then(|v| v.get(&key).cloned())
            .or_else(|| {
                let value = block.split_once(':').map_or("", |(_, v)| v);
                json5::from_str::<Value>(value).ok()
            });
        match parsed {
            Some(v) => {
                map.insert(key, v);
            }
            None => problems.push(Problem::new(key, "is neither valid YAML nor JSON5")),
        }
    }
    map
}

fn fields(map: &Map<String, Value>, problems: &mut Vec<Problem>) -> Frontmatter {
    let mut text = |key: &str| match map.get(key) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.trim().to_owned()),
        Some(_) => {
            problems.push(Problem::new(key, "must be text"));
            None
        }
    };
    let name = text("name").unwrap_or_default();
    let description = text("description").unwrap_or_default();
    let license = text("license");
    let compatibility = text("compatibility");
    if name.is_empty() {
        problems.push(Problem::new("name", "is required"));
    } else if let Err(why) = crate::check_name(&name) {
        problems.push(Problem::new("name", why));
    }
    if description.is_empty() {
        problems.push(Problem::new("description", "is required"));
    } else if description.chars().count() > MAX_DESCRIPTION_CHARS {
        problems.push(Problem::new(
            "description",
            format!("is longer than {MAX_DESCRIPTION_CHARS} characters"),
        ));
    }
    let allowed_tools = match map.get("allowed-tools") {
        Some(Value::String(s)) => s.split_whitespace().map(str::to_owned).collect(),
        Some(v) => strings(Some(v), "allowed-tools", problems),
        None => Vec::new(),
    };
    let user_invocable = flag(map, "user-invocable", true, "user-invocable", problems);
    let disable_model_invocation = flag(
        map,
        "disable-model-invocation",
        false,
        "disable-model-invocation",
        problems,
    );
    Frontmatter {
        name,
        description,
        license,
        compatibility,
        allowed_tools,
        user_invocable,
        disable_model_invocation,
        openclaw: openclaw(map.get("metadata"), problems),
    }
}

/// `metadata.openclaw`, else the legacy `metadata.clawdbot`; either may be
/// a mapping or JSON5 text, and so may `metadata` itself.
fn openclaw(metadata: Option<&Value>, problems: &mut Vec<Problem>) -> OpenClaw {
    let metadata = match metadata {
        None | Some(Value::Null) => return OpenClaw::default(),
        Some(Value::String(s)) => match json5::from_str::<Value>(s) {
            Ok(v) => v,
            Err(e) => {
                problems.push(Problem::new("metadata", format!("is not valid JSON5: {e}")));
                return OpenClaw::default();
            }
        },
        Some(v) => v.clone(),
    };
    let (key, value) = match (metadata.get("openclaw"), metadata.get("clawdbot")) {
        (Some(v), _) => ("metadata.openclaw", v.clone()),
        (None, Some(v)) => ("metadata.clawdbot", v.clone()),
        (None, None) => return OpenClaw::default(),
    };
    let value = match value {
        Value::String(s) => match json5::from_str::<Value>(&s) {
            Ok(v) => v,
            Err(e) => {
                problems.push(Problem::new(key, format!("is not valid JSON5: {e}")));
                return OpenClaw::default();
            }
        },
        v => v,
    };
    let Value::Object(oc) = value else {
        problems.push(Problem::new(key, "must be a mapping"));
        return OpenClaw::default();
    };
    let requires = match oc.get("requires") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(r)) => r.clone(),
        Some(_) => {
            problems.push(Problem::new(format!("{key}.requires"), "must be a mapping"));
            Map::new()
        }
    };
    let list = |problems: &mut Vec<Problem>, name: &str| {
        strings(
            requires.get(name),
            &format!("{key}.requires.{name}"),
            problems,
        )
    };
    let bins = list(problems, "bins");
    let any_bins = list(problems, "anyBins");
    let env = list(problems, "env");
    let os = match oc.get("os") {
        Some(Value::String(s)) => vec![s.clone()],
        v => strings(v, &format!("{key}.os"), problems),
    };
    let primary_env = match oc.get("primaryEnv") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            problems.push(Problem::new(format!("{key}.primaryEnv"), "must be text"));
            None
        }
    };
    OpenClaw {
        os,
        bins,
        any_bins,
        env,
        always: flag(&oc, "always", false, &format!("{key}.always"), problems),
        primary_env,
    }
}

/// A list of strings; absent or null is empty.
fn strings(value: Option<&Value>, field: &str, problems: &mut Vec<Problem>) -> Vec<String> {
    match value {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        Some(_) => {
            problems.push(Problem::new(field, "must be a list of text"));
            Vec::new()
        }
    }
}

/// A boolean, accepting `"true"`/`"false"` text too (lenient).
fn flag(
    map: &Map<String, Value>,
    key: &str,
    default: bool,
    field: &str,
    problems: &mut Vec<Problem>,
) -> bool {
    match map.get(key) {
        None | Some(Value::Null) => default,
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) if s == "true" => true,
        Some(Value::String(s)) if s == "false" => false,
        Some(_) => {
            problems.push(Problem::new(field, "must be true or false"));
            default
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_fields_and_defaults() {
        let (fm, problems) = parse(
            "---\nname: pdf-tools\ndescription: Work with PDF files.\nlicense: MIT\n\
             allowed-tools: Bash(pdftotext:*) Read\nunknown-key: [1, 2]\n---\n# Body\n",
        );
        assert_eq!(problems, vec![]);
        assert_eq!(fm.name, "pdf-tools");
        assert_eq!(fm.description, "Work with PDF files.");
        assert_eq!(fm.license.as_deref(), Some("MIT"));
        assert_eq!(fm.allowed_tools, vec!["Bash(pdftotext:*)", "Read"]);
        assert!(fm.user_invocable && !fm.disable_model_invocation);
        assert_eq!(fm.openclaw, OpenClaw::default());
    }

    #[test]
    fn openclaw_metadata_as_single_line_json() {
        let (fm, problems) = parse(
            "---\r\nname: banana\r\ndescription: Images.\r\nmetadata: {\"openclaw\": {\"emoji\": \"🍌\", \
             \"requires\": {\"bins\": [\"uv\"], \"env\": [\"GEMINI_API_KEY\"]}, \
             \"primaryEnv\": \"GEMINI_API_KEY\", \"os\": \"darwin\"}}\r\n---\r\nbody",
        );
        assert_eq!(problems, vec![]);
        assert_eq!(
            fm.openclaw,
            OpenClaw {
                os: vec!["darwin".into()],
                bins: vec!["uv".into()],
                env: vec!["GEMINI_API_KEY".into()],
                primary_env: Some("GEMINI_API_KEY".into()),
                ..OpenClaw::default()
            }
        );
    }

    #[test]
    fn json5_metadata_with_comments_and_trailing_commas_falls_back() {
        let text = "---\nname: gh\ndescription: GitHub CLI.\nuser-invocable: false\nmetadata:\n  {\n    \
                    // installed by brew\n    \"openclaw\": {\n      requires: { anyBins: [\"gh\", \"hub\",], },\n      \
                    always: true,\n      install: [{ kind: \"brew\", formula: \"gh\" }],\n    },\n  }\n---\nUse gh.\n";
        let (fm, problems) = parse(text);
        assert_eq!(problems, vec![]);
        assert_eq!(fm.openclaw.any_bins, vec!["gh", "hub"]);
        assert!(fm.openclaw.always);
        assert!(!fm.user_invocable);
        assert_eq!(body(text), "Use gh.\n");
    }

    #[test]
    fn legacy_clawdbot_and_metadata_as_text() {
        let (fm, problems) = parse(
            "---\nname: x\ndescription: d\nmetadata: '{clawdbot: {os: [\"linux\"], requires: {bins: [\"jq\"]}}}'\n---\n",
        );
        assert_eq!(problems, vec![]);
        assert_eq!(fm.openclaw.os, vec!["linux"]);
        assert_eq!(fm.openclaw.bins, vec!["jq"]);
    }

    #[test]
    fn problems_name_the_field() {
        let fields =
            |text: &str| -> Vec<String> { parse(text).1.into_iter().map(|p| p.field).collect() };
        assert_eq!(fields("no frontmatter"), vec!["frontmatter"]);
        assert_eq!(fields("---\nname: x\n"), vec!["frontmatter"]);
        assert_eq!(fields("---\n---\n"), vec!["name", "description"]);
        assert_eq!(
            fields("---\nname: Bad Name\ndescription: [a]\n---\n"),
            vec!["description", "name", "description"]
        );
        let long = "d".repeat(MAX_DESCRIPTION_CHARS + 1);
        assert_eq!(
            fields(&format!("---\nname: x\ndescription: {long}\n---\n")),
            vec!["description"]
        );
        assert_eq!(
            fields(
                "---\nname: x\ndescription: d\nuser-invocable: maybe\n\
                 metadata: {openclaw: {requires: {bins: gh}, always: 3}}\n---\n"
            ),
            vec![
                "user-invocable",
                "metadata.openclaw.requires.bins",
                "metadata.openclaw.always"
            ]
        );
        assert_eq!(
            fields("---\nname: x\ndescription: d\nmetadata: {openclaw: [1}\n---\n"),
            vec!["metadata"]
        );
    }

    #[test]
    fn never_panics_on_odd_input() {
        for text in [
            "",
            "---",
            "---\n",
            "---\n---",
            "\u{feff}---\nname: x\n---\n",
            "---\n: :\n---\n",
            "---\n- a\n---\n",
            "---\n{{{{\n---\n",
            "---\nname: é\u{0}\n---\n",
        ] {
            let _ = parse(text);
        }
        assert_eq!(
            split("\u{feff}---\nname: x\n---\nb"),
            Some(("name: x\n", "b"))
        );
    }

    proptest::proptest! {
        /// Whatever the text, parsing returns fields and problems.
        #[test]
        fn any_frontmatter_parses_without_panic(body in "\\PC{0,200}", yaml in "[ -~\n]{0,200}") {
            let _ = parse(&format!("---\n{yaml}\n---\n{body}"));
            let _ = parse(&body);
        }
    }
}
