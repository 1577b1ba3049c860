//! The length of a value's compact JSON text, worked out by walking it:
//! estimates of a request's size (budget reservations, compaction) need the
//! size of the offered tools' schemas on every run, and serializing them to
//! measure them cost more than the rest of both estimates together.

use std::fmt::Write as _;

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
        for n in [0, 1, tools.len()] {
            let some = &tools[..n];
            assert_eq!(
                tools_json_len(some),
                serde_json::to_string(some).unwrap().len()
            );
        }
    }
}
