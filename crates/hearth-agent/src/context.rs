//! Context assembly: what the model sees of the thread.

use std::sync::Arc;

use hearth_core::{Content, Message, Role};

/// Text added to the system prompt of each model call, after SYSTEM.md and
/// AGENTS.md: the skill list (which changes on reload) and the instructions
/// of a skill the run's user message invokes (`/name args`). It gets that
/// message and returns "" for nothing; it runs before every model call, so
/// it must be cheap (an `Arc` clone in the common case).
pub type PromptHook = Arc<dyn Fn(&str) -> Arc<str> + Send + Sync>;

/// Appends `section` to the system prompt `out`, a blank line between.
pub fn append_section(out: &mut String, section: &str) {
    if section.is_empty() {
        return;
    }
    if !out.is_empty() {
        out.push_str("\n\n");
    }
    out.push_str(section);
}

/// Drops leading messages until the first user message, so a history window
/// cut by a count limit never starts with a tool result whose call was cut off.
pub fn trim_history(mut history: Vec<Message>) -> Vec<Message> {
    let first_user = history
        .iter()
        .position(|m| m.role == Role::User)
        .unwrap_or(history.len());
    history.drain(..first_user);
    history
}

/// The tool calls of an assistant message that `results` does not answer yet.
pub fn unanswered_calls<'a>(
    assistant: &'a Message,
    results: Option<&Message>,
) -> Vec<(&'a str, &'a str, &'a str)> {
    let answered = |id: &str| {
        results.is_some_and(|r| {
            r.content
                .iter()
                .any(|c| matches!(c, Content::ToolResult { call_id, .. } if call_id == id))
        })
    };
    assistant
        .content
        .iter()
        .filter_map(|c| match c {
            Content::ToolCall {
                id,
                name,
                arguments,
            } if !answered(id) => Some((id.as_str(), name.as_str(), arguments.as_str())),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_follow_the_prompt_after_a_blank_line() {
        let mut p = String::from("You are hearth.");
        append_section(&mut p, "");
        assert_eq!(p, "You are hearth.");
        append_section(&mut p, "## Skills");
        assert_eq!(p, "You are hearth.\n\n## Skills");
        let mut empty = String::new();
        append_section(&mut empty, "## Skills");
        assert_eq!(empty, "## Skills");
    }

    #[test]
    fn trims_to_first_user_message() {
        let h = vec![
            Message {
                role: Role::Tool,
                content: vec![Content::ToolResult {
                    call_id: "a".into(),
                    output: "{}".into(),
                }],
            },
            Message::text(Role::Assistant, "x"),
            Message::text(Role::User, "hi"),
            Message::text(Role::Assistant, "hello"),
        ];
        let t = trim_history(h);
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].role, Role::User);
        assert!(trim_history(vec![Message::text(Role::Assistant, "x")]).is_empty());
    }

    #[test]
    fn finds_unanswered_calls() {
        let call = |id: &str| Content::ToolCall {
            id: id.into(),
            name: "t".into(),
            arguments: "{}".into(),
        };
        let a = Message {
            role: Role::Assistant,
            content: vec![call("1"), call("2")],
        };
        let r = Message {
            role: Role::Tool,
            content: vec![Content::ToolResult {
                call_id: "1".into(),
                output: "{}".into(),
            }],
        };
        let missing = unanswered_calls(&a, Some(&r));
        assert_eq!(missing.len(), 1);
        assert_eq!(missing[0].0, "2");
        assert_eq!(unanswered_calls(&a, None).len(), 2);
    }
}
