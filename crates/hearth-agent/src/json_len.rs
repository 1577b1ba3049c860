//! The length of a value's compact JSON text, worked out by walking it,
//! and [`ToolSizes`], which remembers it per tool: estimates of a request's
//! size (budget reservations, compaction) need the size of the offered
//! tools' schemas on every run, and measuring them each time cost more than
//! the rest of both estimates together.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Mutex, PoisonError};

use hearth_core::ToolSpec;
use serde_json::Value;

/// Bytes of `serde_json::to_string(v)`.
pub fn json_len(v: &Value) -> usize {
    match v {
        Value::Null => 4,
        Value::Bool(true) => 4,
        Value::Bool(false) => 5,
        Value::Number(n) => number_len(n),
        Value::String(s) => str_len(s),
        Value::Array(items) => {
            2 + items.iter().map(json_len).sum::<usize>() + items.len().saturating_sub(1)
        }
        Value::Object(map) => {
            2 + map
                .iter()
                .map(|(k, v)| str_len(k) + 1 + json_len(v))
                .sum::<usize>()
                + map.len().saturating_sub(1)
        }
    }
}

/// Bytes of `serde_json::to_string(tools)`.
pub fn tools_json_len(tools: &[ToolSpec]) -> usize {
    // {"name":N,"description":D,"parameters":P}
    const FRAME: usize = 2 + 7 + 1 + 14 + 1 + 13;
    2 + tools
        .iter()
        .map(|t| FRAME + str_len(&t.name) + str_len(&t.description) + json_len(&t.parameters))
        .sum::<usize>()
        + tools.len().saturating_sub(1)
}

/// The sizes of a list of tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListSize {
    /// Names, descriptions and schemas (as JSON), for budget estimates.
    pub text_bytes: usize,
    /// Bytes of `serde_json::to_string(tools)`, for compaction estimates.
    pub json: usize,
}

#[derive(Debug, Clone, Copy)]
struct Measured {
    /// What the sizes were measured for: a tool whose description or schema
    /// changes shape under the same name (an MCP server updated) is
    /// measured again.
    shape: (usize, usize, usize),
    text_bytes: usize,
    json: usize,
}

fn shape(t: &ToolSpec) -> (usize, usize, usize) {
    let props = t
        .parameters
        .get("properties")
        .and_then(Value::as_object)
        .map_or(0, serde_json::Map::len);
    (
        t.description.len(),
        t.parameters.as_object().map_or(0, serde_json::Map::len),
        props,
    )
}

/// Tool sizes remembered by tool name, shared by every run of an engine.
#[derive(Debug, Default)]
pub struct ToolSizes(Mutex<HashMap<String, Measured>>);

impl ToolSizes {
    /// The sizes of `tools`, measuring only the tools not seen before.
    pub fn measure(&self, tools: &[ToolSpec]) -> ListSize {
        // {"name":N,"description":D,"parameters":P}
        const FRAME: usize = 2 + 7 + 1 + 14 + 1 + 13;
        let mut known = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let mut total = ListSize {
            text_bytes: 0,
            json: 2 + tools.len().saturating_sub(1),
        };
        for t in tools {
            let shape = shape(t);
            let m = match known.get(&t.name) {
                Some(m) if m.shape == shape => *m,
                _ => {
                    let params = json_len(&t.parameters);
                    let m = Measured {
                        shape,
                        text_bytes: t.name.len() + t.description.len() + params,
                        json: FRAME + str_len(&t.name) + str_len(&t.description) + params,
                    };
                    known.insert(t.name.clone(), m);
                    m
                }
            };
            total.text_bytes += m.text_bytes;
            total.json += m.json;
        }
        total
    }
}

/// A string with its quotes and escapes, as serde_json writes it.
fn str_len(s: &str) -> usize {
    2 + s
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
            0..=0x1f => 6,
            _ => 1,
        })
        .sum::<usize>()
}

fn number_len(n: &serde_json::Number) -> usize {
    struct Count(usize);
    impl std::fmt::Write for Count {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.0 += s.len();
            Ok(())
        }
    }
    let mut c = Count(0);
    // Writing to a counter cannot fail.
    let _ = write!(c, "{n}");
    c.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lengths_match_what_serde_json_writes() {
        let values = [
            json!(null),
            json!(true),
            json!(false),
            json!(0),
            json!(-12345),
            json!(1.5),
            json!(1e300),
            json!(""),
            json!("plain"),
            json!("quote \" backslash \\ newline \n tab \t bell \u{7} é ✓"),
            json!([]),
            json!([1, "a", null, {"k": [true]}]),
            json!({}),
            json!({"type": "object", "properties": {"x": {"type": "string", "maxLength": 16384}},
                   "required": ["x"], "additionalProperties": false, "k\"ey": "v"}),
        ];
        for v in values {
            assert_eq!(
                json_len(&v),
                serde_json::to_string(&v).unwrap().len(),
                "{v}"
            );
        }
    }

    #[test]
    fn tool_lists_match_what_serde_json_writes() {
        let tools = hearth_tools::ToolRegistry::with_builtins().specs();
        assert!(!tools.is_empty());
        let sizes = ToolSizes::default();
        for n in [0, 1, tools.len()] {
            let some = &tools[..n];
            let json = serde_json::to_string(some).unwrap().len();
            assert_eq!(tools_json_len(some), json);
            // Measured, then remembered: the same either way.
            for _ in 0..2 {
                let got = sizes.measure(some);
                assert_eq!(got.json, json);
                let text: usize = some
                    .iter()
                    .map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len())
                    .sum();
                assert_eq!(got.text_bytes, text);
            }
        }
        // A tool whose schema changes shape under its name is measured again.
        let mut changed = tools[0].clone();
        changed.parameters = json!({"type": "object", "properties": {}});
        let list = [changed];
        assert_eq!(
            sizes.measure(&list).json,
            serde_json::to_string(&list).unwrap().len()
        );
    }
}
