//! What the fake checks of each Web API request, from Slack's reference:
//! required fields, `text` and Block Kit limits, and mrkdwn escaping.

use serde_json::Value;

/// `text` of a message (Slack truncates beyond it).
const MAX_TEXT: usize = 40_000;
/// A section block's text.
const MAX_SECTION: usize = 3000;
/// Blocks in a message.
const MAX_BLOCKS: usize = 50;
/// Elements of an actions block.
const MAX_ACTIONS: usize = 25;
/// A button's value.
const MAX_VALUE: usize = 2000;
/// A button's label.
const MAX_LABEL: usize = 75;
/// `action_id` and `block_id`.
const MAX_ID: usize = 255;

pub(super) fn check(method: &str, body: &Value, index: usize, out: &mut Vec<String>) {
    let mut v = |what: String| out.push(format!("call {index} ({method}): {what}"));
    let s = |k: &str| body.get(k).and_then(Value::as_str);
    match method {
        "chat.postMessage" | "chat.update" | "chat.postEphemeral" | "response_url" => {
            if method != "response_url" && s("channel").is_none_or(str::is_empty) {
                v("no channel".into());
            }
            if method == "chat.update" && s("ts").is_none() {
                v("no ts".into());
            }
            if method == "chat.postEphemeral" && s("user").is_none() {
                v("no user".into());
            }
            let text = s("text");
            let blocks = body.get("blocks");
            if text.is_none_or(str::is_empty) && blocks.is_none() {
                v("neither text nor blocks".into());
            }
            if let Some(t) = text {
                if t.chars().count() > MAX_TEXT {
                    v(format!("text of {} characters", t.chars().count()));
                }
                if let Some(bad) = unescaped(t) {
                    v(format!("text has an unescaped {bad:?}: {t:?}"));
                }
            }
            if let Some(b) = blocks {
                check_blocks(b, &mut v);
            }
            if let Some(ts) = body.get("thread_ts")
                && !ts.is_string()
            {
                v(format!("thread_ts is not a string: {ts}"));
            }
        }
        "chat.delete" => {
            if s("channel").is_none() || s("ts").is_none() {
                v("chat.delete needs channel and ts".into());
            }
        }
        "auth.test" | "apps.connections.open" => {}
        other => v(format!("unknown method {other}")),
    }
}

fn check_blocks(blocks: &Value, v: &mut impl FnMut(String)) {
    let Some(list) = blocks.as_array() else {
        v("blocks is not an array".into());
        return;
    };
    if list.len() > MAX_BLOCKS {
        v(format!("{} blocks", list.len()));
    }
    for (i, b) in list.iter().enumerate() {
        match b.get("type").and_then(Value::as_str) {
            Some("section") => {
                let text = &b["text"];
                let kind = text.get("type").and_then(Value::as_str);
                let body = text.get("text").and_then(Value::as_str).unwrap_or("");
                if !matches!(kind, Some("mrkdwn" | "plain_text")) {
                    v(format!("block {i}: section text type {kind:?}"));
                }
                let n = body.chars().count();
                if n == 0 || n > MAX_SECTION {
                    v(format!(
                        "block {i}: section text of {n} characters (1..=3000)"
                    ));
                }
                if kind == Some("mrkdwn")
                    && let Some(bad) = unescaped(body)
                {
                    v(format!(
                        "block {i}: mrkdwn has an unescaped {bad:?}: {body:?}"
                    ));
                }
            }
            Some("actions") => {
                let els = b["elements"].as_array().map_or(&[][..], Vec::as_slice);
                if els.is_empty() || els.len() > MAX_ACTIONS {
                    v(format!("block {i}: {} action elements (1..=25)", els.len()));
                }
                let mut ids = Vec::new();
                for e in els {
                    let id = e.get("action_id").and_then(Value::as_str).unwrap_or("");
                    if id.is_empty() || id.len() > MAX_ID || ids.contains(&id) {
                        v(format!(
                            "block {i}: action_id {id:?} missing, too long or repeated"
                        ));
                    }
                    ids.push(id);
                    let value = e.get("value").and_then(Value::as_str).unwrap_or("");
                    if value.chars().count() > MAX_VALUE {
                        v(format!("block {i}: button value over 2000 characters"));
                    }
                    let label = e["text"]["text"].as_str().unwrap_or("");
                    if e["text"]["type"] != "plain_text"
                        || label.is_empty()
                        || label.chars().count() > MAX_LABEL
                    {
                        v(format!(
                            "block {i}: button label {label:?} not 1..=75 plain_text characters"
                        ));
                    }
                }
            }
            other => v(format!("block {i}: unexpected block type {other:?}")),
        }
    }
}

/// The first character mrkdwn would misread: `&` not starting an escape,
/// or `<`/`>` outside a `<http…|…>` link.
fn unescaped(text: &str) -> Option<char> {
    let mut rest = text;
    while let Some(i) = rest.find(['&', '<', '>']) {
        let tail = &rest[i..];
        if let Some(after) = tail.strip_prefix('&') {
            if !(tail.starts_with("&amp;") || tail.starts_with("&lt;") || tail.starts_with("&gt;"))
            {
                return Some('&');
            }
            rest = after;
        } else if tail.starts_with('<') {
            let link = ["<http://", "<https://", "<mailto:", "<@", "<#", "<!"]
                .iter()
                .any(|p| tail.starts_with(p));
            match tail.find('>') {
                Some(end) if link => rest = &tail[end + 1..],
                _ => return Some('<'),
            }
        } else {
            return Some('>');
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_is_checked() {
        assert_eq!(
            unescaped("a &amp; b &lt; c &gt; <https://x.io|x> <@U1>"),
            None
        );
        assert_eq!(unescaped("a & b"), Some('&'));
        assert_eq!(unescaped("a < b"), Some('<'));
        assert_eq!(unescaped("a > b"), Some('>'));
    }
}
