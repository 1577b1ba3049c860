//! An MCP call result as the text the model reads.
//!
//! Text blocks are kept; embedded text resources are kept under a header
//! naming their URI. Images, audio and binary resources become a one-line
//! placeholder: a hearth tool result is JSON text, which cannot carry image
//! input to the provider. `structuredContent` is shown when the result has no
//! text. The whole is cut at `[mcp] max_result_bytes` with a notice.

use serde_json::Value;

/// The model-facing text of a `tools/call` result and whether it is an error.
pub fn render(result: &Value, max_bytes: usize) -> (String, bool) {
    let mut parts: Vec<String> = Vec::new();
    for block in result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        parts.push(render_block(block));
    }
    if parts.iter().all(|p| p.trim().is_empty())
        && let Some(structured) = result.get("structuredContent")
    {
        parts = vec![structured.to_string()];
    }
    let is_error = result.get("isError").and_then(Value::as_bool) == Some(true);
    (cut(parts.join("\n"), max_bytes), is_error)
}

fn render_block(block: &Value) -> String {
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    let kind = s(block, "type");
    match kind.as_str() {
        "text" => s(block, "text"),
        "image" | "audio" => format!(
            "[{kind} {}, {} bytes of base64, not shown: tool results reach the model as text only]",
            s(block, "mimeType"),
            s(block, "data").len()
        ),
        "resource" => {
            let r = block.get("resource").unwrap_or(&Value::Null);
            let (uri, mime) = (s(r, "uri"), s(r, "mimeType"));
            match r.get("text").and_then(Value::as_str) {
                Some(text) => format!("[resource {uri} {mime}]\n{text}"),
                None => format!(
                    "[resource {uri} {mime}, {} bytes of base64, not shown]",
                    s(r, "blob").len()
                ),
            }
        }
        "resource_link" => format!("[resource link {} {}]", s(block, "uri"), s(block, "name")),
        other => format!("[content of type {other:?}, not shown]"),
    }
}

/// `text` cut to at most `max` bytes (at a character boundary) plus a notice.
fn cut(mut text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let total = text.len();
    text.truncate(text.floor_char_boundary(max));
    text.push_str(&format!(
        "\n[cut: the result was {total} bytes, over the {max}-byte limit ([mcp] max_result_bytes)]"
    ));
    text
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn text_images_and_resources_are_rendered() {
        let result = json!({"content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "file:///a.txt", "mimeType": "text/plain", "text": "inside"}},
            {"type": "resource", "resource": {"uri": "file:///b.bin", "blob": "AAAAAAAA"}},
            {"type": "resource_link", "uri": "file:///c", "name": "c"},
        ], "isError": false});
        let (text, err) = render(&result, 10_000);
        assert!(!err);
        assert_eq!(
            text,
            "hello\n[image image/png, 4 bytes of base64, not shown: tool results reach the model as text only]\n\
             [resource file:///a.txt text/plain]\ninside\n[resource file:///b.bin , 8 bytes of base64, not shown]\n\
             [resource link file:///c c]"
        );
    }

    #[test]
    fn structured_content_errors_and_the_cut() {
        let (text, err) = render(
            &json!({"content": [], "structuredContent": {"n": 1}, "isError": true}),
            100,
        );
        assert_eq!((text.as_str(), err), ("{\"n\":1}", true));
        let (text, _) = render(
            &json!({"content": [{"type": "text", "text": "é".repeat(100)}]}),
            51,
        );
        assert!(text.starts_with(&"é".repeat(25)), "{text}");
        assert!(!text.starts_with(&"é".repeat(26)), "{text}");
        assert!(
            text.ends_with("over the 51-byte limit ([mcp] max_result_bytes)]"),
            "{text}"
        );
    }
}
