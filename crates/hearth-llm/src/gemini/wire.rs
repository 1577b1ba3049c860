//! Gemini API wire types: the `generateContent` request we send and the
//! `GenerateContentResponse` chunks we parse.
//!
//! Request types borrow text from the `ChatRequest`; only tool arguments and
//! results (which Gemini wants as JSON objects, not text) and cleaned schemas
//! are built anew. Response types are lenient: every field optional, unknown
//! fields ignored.

use std::collections::HashMap;

use hearth_core::{ChatRequest, Content, Role, ThinkingLevel};

use crate::items::Items;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The body of `POST models/{model}:streamGenerateContent`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireRequest<'a> {
    contents: Vec<WireContent<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system_instruction: Option<SystemInstruction<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    generation_config: Option<GenerationConfig>,
}

#[derive(Debug, Serialize)]
struct WireContent<'a> {
    role: &'static str,
    parts: Vec<WirePart<'a>>,
}

#[derive(Debug, Serialize)]
struct SystemInstruction<'a> {
    parts: [TextPart<'a>; 1],
}

#[derive(Debug, Serialize)]
struct TextPart<'a> {
    text: &'a str,
}

#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
struct WirePart<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    function_call: Option<FunctionCallOut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    function_response: Option<FunctionResponseOut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thought_signature: Option<&'a str>,
}

#[derive(Debug, Serialize)]
struct FunctionCallOut<'a> {
    name: &'a str,
    args: Value,
}

#[derive(Debug, Serialize)]
struct FunctionResponseOut<'a> {
    name: &'a str,
    response: Value,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct WireTool<'a> {
    function_declarations: Vec<FunctionDeclaration<'a>>,
}

#[derive(Debug, Serialize)]
struct FunctionDeclaration<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    description: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    parameters: Option<Value>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct GenerationConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking_config: Option<ThinkingConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_output_tokens: Option<u32>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ThinkingConfig {
    thinking_budget: u32,
    include_thoughts: bool,
}

/// The thinking token budget for a level; `None` leaves the model's default.
pub(crate) fn thinking_budget(level: ThinkingLevel) -> Option<u32> {
    match level {
        ThinkingLevel::Off => None,
        ThinkingLevel::Low => Some(1024),
        ThinkingLevel::Medium => Some(8192),
        ThinkingLevel::High => Some(24576),
    }
}

/// Tool arguments as the JSON object Gemini wants; `{}` when the text is not one.
fn args_object(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ => Value::Object(Map::new()),
    }
}

/// A tool's output as a JSON object: itself when it is one, else `{"result": ...}`.
fn response_object(output: &str) -> Value {
    let inner = match serde_json::from_str::<Value>(output) {
        Ok(v @ Value::Object(_)) => return v,
        Ok(v) => v,
        Err(_) => Value::String(output.to_owned()),
    };
    let mut map = Map::with_capacity(1);
    map.insert("result".to_owned(), inner);
    Value::Object(map)
}

/// Schema keys Gemini's OpenAPI-subset `Schema` accepts and that need no rewriting.
const KEPT_SCHEMA_KEYS: &[&str] = &[
    "description",
    "enum",
    "required",
    "nullable",
    "title",
    "minItems",
    "maxItems",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
    "minProperties",
    "maxProperties",
    "propertyOrdering",
    "default",
    "example",
];

/// Rewrites a JSON Schema into the subset Gemini accepts: unknown keywords
/// (`additionalProperties`, `$schema`, `$ref`, `oneOf`'s siblings...) are
/// dropped at every level, `type: [t, "null"]` becomes `type: t` plus
/// `nullable`, `oneOf` becomes `anyOf`, `const` becomes a one-value `enum`,
/// and formats Gemini does not know are dropped.
pub(crate) fn clean_schema(schema: &Value) -> Value {
    let Value::Object(obj) = schema else {
        // Boolean schemas (`true`) and junk: the unconstrained schema.
        return Value::Object(Map::new());
    };
    let mut out = Map::with_capacity(obj.len());
    for (key, value) in obj {
        match key.as_str() {
            "type" => match value {
                Value::String(_) => {
                    out.insert(key.clone(), value.clone());
                }
                Value::Array(types) => {
                    let mut nullable = false;
                    let mut first = None;
                    for t in types.iter().filter_map(Value::as_str) {
                        if t == "null" {
                            nullable = true;
                        } else if first.is_none() {
                            first = Some(t);
                        }
                    }
                    if let Some(t) = first {
                        out.insert(key.clone(), Value::String(t.to_owned()));
                    }
                    if nullable {
                        out.insert("nullable".to_owned(), Value::Bool(true));
                    }
                }
                _ => {}
            },
            "properties" => {
                if let Value::Object(props) = value {
                    let cleaned = props
                        .iter()
                        .map(|(name, s)| (name.clone(), clean_schema(s)))
                        .collect();
                    out.insert(key.clone(), Value::Object(cleaned));
                }
            }
            "items" => {
                // A tuple schema has no Gemini form; its first item is the closest.
                let item = match value {
                    Value::Array(items) => items.first().map(clean_schema),
                    other => Some(clean_schema(other)),
                };
                if let Some(item) = item {
                    out.insert(key.clone(), item);
                }
            }
            "anyOf" | "oneOf" => {
                if let Value::Array(options) = value {
                    out.insert(
                        "anyOf".to_owned(),
                        Value::Array(options.iter().map(clean_schema).collect()),
                    );
                }
            }
            "const" if !obj.contains_key("enum") => {
                out.insert("enum".to_owned(), Value::Array(vec![value.clone()]));
            }
            "format" => {
                if matches!(
                    value.as_str(),
                    Some("enum" | "date-time" | "int32" | "int64" | "float" | "double")
                ) {
                    out.insert(key.clone(), value.clone());
                }
            }
            k if KEPT_SCHEMA_KEYS.contains(&k) => {
                out.insert(key.clone(), value.clone());
            }
            _ => {}
        }
    }
    Value::Object(out)
}

/// A tool's cleaned parameters, `None` for an object schema without
/// properties (Gemini refuses an `OBJECT` with an empty `properties`).
fn parameters(schema: &Value) -> Option<Value> {
    let cleaned = clean_schema(schema);
    let is_object = cleaned
        .get("type")
        .and_then(Value::as_str)
        .is_some_and(|t| t.eq_ignore_ascii_case("object"));
    let no_props = cleaned
        .get("properties")
        .and_then(Value::as_object)
        .is_none_or(Map::is_empty);
    if (is_object && no_props) || cleaned.as_object().is_some_and(Map::is_empty) {
        None
    } else {
        Some(cleaned)
    }
}

/// Appends a content, merging it into the previous one when both have the
/// same role (Gemini wants turns to alternate).
fn push_content<'a>(
    contents: &mut Vec<WireContent<'a>>,
    role: &'static str,
    parts: Vec<WirePart<'a>>,
) {
    if parts.is_empty() {
        return;
    }
    match contents.last_mut() {
        Some(last) if last.role == role => last.parts.extend(parts),
        _ => contents.push(WireContent { role, parts }),
    }
}

impl<'a> WireRequest<'a> {
    /// Converts a request for the provider configured as `provider`.
    ///
    /// Thought text is never sent back; a thought signature goes back (on the
    /// message's first function call, else its first part) only when the
    /// thinking was produced by `provider` itself. A tool result whose call id
    /// matches no earlier tool call is an error: Gemini needs the function name.
    pub(crate) fn from_request(req: &'a ChatRequest, provider: &str) -> Result<Self, String> {
        let mut contents: Vec<WireContent<'a>> = Vec::with_capacity(req.messages.len());
        // Call id -> tool name; a later call with the same id (Gemini's ids
        // restart at call_0 every turn) replaces the earlier one.
        let mut names: HashMap<&'a str, &'a str> = HashMap::new();
        for (m, msg) in req.messages.iter().enumerate() {
            let mut responses = Vec::new();
            for c in &msg.content {
                if let Content::ToolResult { call_id, output } = c {
                    let Some(name) = names.get(call_id.as_str()).copied() else {
                        return Err(format!(
                            "message {m}: tool result for call id {call_id:?} answers no earlier tool call"
                        ));
                    };
                    responses.push(WirePart {
                        function_response: Some(FunctionResponseOut {
                            name,
                            response: response_object(output),
                        }),
                        ..WirePart::default()
                    });
                }
            }
            let texts = msg.content.iter().filter_map(|c| match c {
                Content::Text { text } if !text.is_empty() => Some(WirePart {
                    text: Some(text),
                    ..WirePart::default()
                }),
                _ => None,
            });
            match msg.role {
                Role::User | Role::Tool => {
                    // Results first: they must follow the model's calls directly.
                    responses.extend(texts);
                    push_content(&mut contents, "user", responses);
                }
                Role::Assistant => {
                    let mut parts = Vec::with_capacity(msg.content.len());
                    let mut first_call = None;
                    for c in &msg.content {
                        match c {
                            Content::Text { text } if !text.is_empty() => parts.push(WirePart {
                                text: Some(text),
                                ..WirePart::default()
                            }),
                            Content::ToolCall {
                                id,
                                name,
                                arguments,
                            } => {
                                names.insert(id, name);
                                first_call.get_or_insert(parts.len());
                                parts.push(WirePart {
                                    function_call: Some(FunctionCallOut {
                                        name,
                                        args: args_object(arguments),
                                    }),
                                    ..WirePart::default()
                                });
                            }
                            _ => {}
                        }
                    }
                    let signature = msg.content.iter().find_map(|c| match c {
                        Content::Thinking {
                            signature: Some(sig),
                            provider: Some(p),
                            ..
                        } if p == provider && !sig.is_empty() => Some(sig.as_str()),
                        _ => None,
                    });
                    if let Some(sig) = signature
                        && let Some(part) = parts.get_mut(first_call.unwrap_or(0))
                    {
                        part.thought_signature = Some(sig);
                    }
                    push_content(&mut contents, "model", parts);
                    // Results inside an assistant message (unusual) follow it.
                    push_content(&mut contents, "user", responses);
                }
            }
        }
        let system_instruction = (!req.system.is_empty()).then(|| SystemInstruction {
            parts: [TextPart { text: &req.system }],
        });
        let tools = if req.tools.is_empty() {
            Vec::new()
        } else {
            vec![WireTool {
                function_declarations: req
                    .tools
                    .iter()
                    .map(|t| FunctionDeclaration {
                        name: &t.name,
                        description: &t.description,
                        parameters: parameters(&t.parameters),
                    })
                    .collect(),
            }]
        };
        let thinking_config = thinking_budget(req.thinking).map(|budget| ThinkingConfig {
            thinking_budget: budget,
            include_thoughts: true,
        });
        let generation_config = (thinking_config.is_some() || req.max_output_tokens.is_some())
            .then_some(GenerationConfig {
                thinking_config,
                max_output_tokens: req.max_output_tokens,
            });
        Ok(Self {
            contents,
            system_instruction,
            tools,
            generation_config,
        })
    }
}

/// One `data:` payload of the stream: a `GenerateContentResponse`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Chunk {
    #[serde(default)]
    pub(crate) candidates: Option<Items<Candidate>>,
    #[serde(default)]
    pub(crate) usage_metadata: Option<UsageMetadata>,
    #[serde(default)]
    pub(crate) prompt_feedback: Option<PromptFeedback>,
    #[serde(default)]
    pub(crate) error: Option<Value>,
}

/// One candidate; only the first is used.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Candidate {
    #[serde(default)]
    pub(crate) content: Option<CandidateContent>,
    #[serde(default)]
    pub(crate) finish_reason: Option<String>,
}

/// `candidate.content`.
#[derive(Debug, Deserialize)]
pub(crate) struct CandidateContent {
    #[serde(default)]
    pub(crate) parts: Option<Items<Part>>,
}

/// One part of the answer: text, a thought, or a function call.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Part {
    #[serde(default)]
    pub(crate) text: Option<String>,
    #[serde(default)]
    pub(crate) thought: Option<bool>,
    #[serde(default)]
    pub(crate) thought_signature: Option<String>,
    #[serde(default)]
    pub(crate) function_call: Option<FunctionCall>,
}

/// A whole function call (Gemini does not stream argument fragments).
#[derive(Debug, Deserialize)]
pub(crate) struct FunctionCall {
    #[serde(default)]
    pub(crate) name: Option<String>,
    #[serde(default)]
    pub(crate) args: Option<Value>,
}

/// `promptFeedback`: set when the prompt itself was blocked.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PromptFeedback {
    #[serde(default)]
    pub(crate) block_reason: Option<String>,
}

/// `usageMetadata`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct UsageMetadata {
    #[serde(default)]
    pub(crate) prompt_token_count: Option<u64>,
    #[serde(default)]
    pub(crate) candidates_token_count: Option<u64>,
    #[serde(default)]
    pub(crate) cached_content_token_count: Option<u64>,
    #[serde(default)]
    pub(crate) thoughts_token_count: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cleans_schemas_recursively() {
        let schema = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "path": {"type": "string", "description": "p", "format": "uri"},
                "tags": {"type": "array", "items": {"type": "object", "additionalProperties": true,
                          "properties": {"additionalProperties": {"type": ["integer", "null"]}}}},
                "mode": {"const": "fast"},
                "any": {"oneOf": [{"type": "string"}, {"type": "number", "$ref": "#/x"}]}
            },
            "required": ["path"]
        });
        let got = clean_schema(&schema);
        assert_eq!(
            got,
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "p"},
                    "tags": {"type": "array", "items": {"type": "object",
                              "properties": {"additionalProperties": {"type": "integer", "nullable": true}}}},
                    "mode": {"enum": ["fast"]},
                    "any": {"anyOf": [{"type": "string"}, {"type": "number"}]}
                },
                "required": ["path"]
            })
        );
        assert_eq!(
            parameters(&json!({"type": "object", "properties": {}})),
            None
        );
        assert_eq!(
            parameters(&json!({"type": "object", "additionalProperties": false})),
            None
        );
    }

    #[test]
    fn tool_payloads_become_objects() {
        assert_eq!(args_object("{\"a\":1}"), json!({"a": 1}));
        assert_eq!(args_object("[1]"), json!({}));
        assert_eq!(args_object("not json"), json!({}));
        assert_eq!(response_object("{\"ok\":true}"), json!({"ok": true}));
        assert_eq!(response_object("42"), json!({"result": 42}));
        assert_eq!(response_object("plain"), json!({"result": "plain"}));
    }
}
