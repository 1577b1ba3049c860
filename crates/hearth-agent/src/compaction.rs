//! Compaction: what to summarize when a run's context would outgrow the
//! model's window, and the request that summarizes it.
//!
//! Pure decisions, no I/O: the engine (`engine/compact.rs`) estimates the
//! context, asks [`plan`] which leading messages of the history to replace,
//! sends [`summary_request`] to a model, and stores the answer. Turns are
//! cut only where a user message starts, so a tool call and its result
//! always stay on the same side.

use hearth_core::{ChatRequest, Content, Message, Role, ThinkingLevel};

/// `[agent] compaction`, `context_fraction`, `default_context_tokens`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompactionConfig {
    /// False: history is cut at `history_messages` instead.
    pub enabled: bool,
    /// Share of the window a run's context may fill before compacting.
    pub fraction: f64,
    /// Window assumed for a model whose window is not known.
    pub default_context_tokens: u32,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            fraction: 0.75,
            default_context_tokens: 32_000,
        }
    }
}

impl CompactionConfig {
    /// The tokens a run's context may reach on a model with `window`
    /// (`None`: not known, the default is assumed).
    pub fn threshold(&self, window: Option<u32>) -> usize {
        let window = window.unwrap_or(self.default_context_tokens);
        (f64::from(window) * self.fraction) as usize
    }
}

/// Tokens a message costs besides its text (role, framing).
const MESSAGE_OVERHEAD: usize = 4;

/// Estimated tokens of `text`: about four bytes a token for English and
/// code, which over-counts rather than under-counts other scripts' bytes.
pub fn estimate_text(text: &str) -> usize {
    text.len().div_ceil(4)
}

/// Estimated tokens of a message.
pub fn estimate_message(m: &Message) -> usize {
    MESSAGE_OVERHEAD
        + m.content
            .iter()
            .map(|c| match c {
                Content::Text { text } | Content::Thinking { text, .. } => estimate_text(text),
                Content::ToolCall {
                    name, arguments, ..
                } => estimate_text(name) + estimate_text(arguments) + MESSAGE_OVERHEAD,
                Content::ToolResult { output, .. } => estimate_text(output) + MESSAGE_OVERHEAD,
            })
            .sum::<usize>()
}

/// Estimated tokens of messages.
pub fn estimate_messages(ms: &[Message]) -> usize {
    ms.iter().map(estimate_message).sum()
}

/// Instructions of the summarizing call. Tests' fake summarizers recognise
/// a compaction request by its first line.
pub const SUMMARY_INSTRUCTIONS: &str = "You compact a conversation between a user and an \
assistant. Write one summary that replaces the turns below in the assistant's memory.
Keep every fact the user stated about themselves, their preferences, names, numbers, codes, \
dates, decisions and open tasks, exactly as written; keep what tools returned that is still \
relevant. Everything the previous summary says must stay in the new one unless a later turn \
corrects it. Drop greetings and small talk. Write plain text, no preamble.";

/// Where the previous summary starts in a compaction request.
pub const PREVIOUS_SUMMARY_HEADING: &str = "## Previous summary";
/// Where the turns being replaced start in a compaction request.
pub const TURNS_HEADING: &str = "## Turns to fold into the summary";

/// The system-prompt section that carries a summary in ordinary calls.
pub fn summary_section(summary: &str) -> String {
    format!(
        "## Earlier in this conversation\nThe oldest turns of this conversation were \
         replaced by this summary of them:\n\n{summary}"
    )
}

/// Which leading messages of `history` to replace, if any: the number of
/// messages, always a whole number of turns (cut before a user message).
///
/// `fixed` is what the call costs besides the history (system prompt,
/// tools, the summary, the run's own messages), `threshold` the most the
/// context may be. The newest turns are kept verbatim while they fit in half
/// of what is left, so the next compactions are rare; the replaced part is
/// capped at `chunk` tokens so the summarizing call fits its own window.
/// `None` when the context fits, or when no whole turn can be replaced.
pub fn plan(history: &[Message], fixed: usize, threshold: usize, chunk: usize) -> Option<usize> {
    let sizes: Vec<usize> = history.iter().map(estimate_message).collect();
    let total: usize = sizes.iter().sum();
    if fixed + total <= threshold {
        return None;
    }
    let starts: Vec<usize> = history
        .iter()
        .enumerate()
        .filter(|(_, m)| m.role == Role::User)
        .map(|(i, _)| i)
        .collect();
    let keep_budget = (threshold / 2).saturating_sub(fixed);
    // The oldest turn start from which everything still fits the budget.
    let mut keep_from = history.len();
    let mut kept = 0;
    for &start in starts.iter().rev() {
        let turn: usize = sizes[start..keep_from].iter().sum();
        if kept + turn > keep_budget {
            break;
        }
        kept += turn;
        keep_from = start;
    }
    // Whole turns only, oldest first, no more than one call can take (but
    // at least one turn, or nothing would ever shrink).
    let mut replace = 0;
    let mut taken = 0;
    for &start in starts.iter().skip(1).chain(std::iter::once(&history.len())) {
        if start > keep_from {
            break;
        }
        let turn: usize = sizes[replace..start].iter().sum();
        if replace > 0 && taken + turn > chunk {
            break;
        }
        taken += turn;
        replace = start;
    }
    (replace > 0).then_some(replace)
}

/// The request that folds `turns` into `previous` (the summary they follow).
/// `max_chars` caps the rendered turns, so an enormous tool output cannot
/// make the summarizing call itself too big: the longest messages lose the
/// middle of their text, never their end (where a tool's output or an
/// answer usually concludes) nor their start, so every turn the summary
/// replaces reaches it.
pub fn summary_request(
    model: &str,
    previous: Option<&str>,
    turns: &[Message],
    max_chars: usize,
) -> ChatRequest {
    let mut text = String::new();
    if let Some(previous) = previous {
        text.push_str(PREVIOUS_SUMMARY_HEADING);
        text.push('\n');
        text.push_str(previous);
        text.push_str("\n\n");
    }
    text.push_str(TURNS_HEADING);
    text.push('\n');
    let mut lines = Vec::new();
    for m in turns {
        render(&mut lines, m);
    }
    fit(&mut lines, max_chars);
    for line in &lines {
        text.push_str(line);
    }
    ChatRequest {
        model: model.to_owned(),
        system: SUMMARY_INSTRUCTIONS.to_owned(),
        messages: vec![Message::text(Role::User, text)],
        tools: Default::default(),
        thinking: ThinkingLevel::Off,
        max_output_tokens: None,
    }
}

/// Bytes a cut line's marker takes, at most.
const MARKER_BYTES: usize = 48;

/// Bytes a cut line keeps at least, besides its marker.
const MIN_KEPT: usize = 192;

/// Cuts the middle of the longest `lines` until they total at most
/// `max_chars` bytes: every line longer than one cap keeps its first third
/// and last two thirds of the cap. When even the cap's floor is too much
/// (a great many lines), they keep the floor and the total passes
/// `max_chars` by what the floor costs.
fn fit(lines: &mut [String], max_chars: usize) {
    let cost = |cap: usize| -> usize { lines.iter().map(|l| l.len().min(cap)).sum() };
    let longest = lines.iter().map(String::len).max().unwrap_or(0);
    if cost(longest) <= max_chars {
        return;
    }
    // The largest cap whose cost fits, found by bisection (cost grows with
    // the cap).
    let (mut lo, mut hi) = (MIN_KEPT + MARKER_BYTES, longest);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if cost(mid) <= max_chars {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    for line in lines.iter_mut().filter(|l| l.len() > lo) {
        cut_middle(line, lo - MARKER_BYTES);
    }
}

/// Keeps about `keep` bytes of `line`, a third from its start and two
/// thirds from its end, and says how much of the middle was left out.
fn cut_middle(line: &mut String, keep: usize) {
    let mut head = keep / 3;
    while !line.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = line.len() - (keep - keep / 3);
    while !line.is_char_boundary(tail) {
        tail += 1;
    }
    let left_out = line[head..tail].chars().count();
    let marker = format!(" [... {left_out} characters left out ...] ");
    line.replace_range(head..tail, &marker);
}

/// One message as transcript lines; reasoning is left out (it is the
/// model's scratch work, and signatures mean nothing to another call).
fn render(out: &mut Vec<String>, m: &Message) {
    let who = match m.role {
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    for c in &m.content {
        let line = match c {
            Content::Text { text } => format!("{who}: {text}\n"),
            Content::Thinking { .. } => continue,
            Content::ToolCall {
                name, arguments, ..
            } => format!("assistant called {name} {arguments}\n"),
            Content::ToolResult { output, .. } => format!("tool result: {output}\n"),
        };
        out.push(line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(t: &str) -> Message {
        Message::text(Role::User, t)
    }
    fn assistant(t: &str) -> Message {
        Message::text(Role::Assistant, t)
    }
    fn call(id: &str) -> Message {
        Message {
            role: Role::Assistant,
            content: vec![Content::ToolCall {
                id: id.into(),
                name: "clock".into(),
                arguments: "{}".into(),
            }],
        }
    }
    fn result(id: &str) -> Message {
        Message {
            role: Role::Tool,
            content: vec![Content::ToolResult {
                call_id: id.into(),
                output: "x".repeat(400),
            }],
        }
    }

    #[test]
    fn nothing_to_do_under_the_threshold() {
        let h = vec![user("hi"), assistant("hello")];
        assert_eq!(plan(&h, 10, 1000, 1000), None);
    }

    #[test]
    fn replaces_the_oldest_whole_turns_and_keeps_the_newest() {
        let long = "w".repeat(400); // 100 tokens
        let mut h = Vec::new();
        for _ in 0..10 {
            h.push(user(&long));
            h.push(assistant(&long));
        }
        // 10 turns of ~208 tokens; threshold 1000 keeps about 2 turns.
        let n = plan(&h, 0, 1000, 100_000).unwrap();
        assert_eq!(n % 2, 0, "cut before a user message");
        assert_eq!(h[n].role, Role::User);
        let kept = estimate_messages(&h[n..]);
        assert!(kept <= 500, "kept {kept}");
        assert!(n >= 16, "replaced {n}");
    }

    #[test]
    fn never_separates_a_tool_call_from_its_result() {
        let mut h = Vec::new();
        for i in 0..12 {
            h.push(user("question"));
            h.push(call(&format!("c{i}")));
            h.push(result(&format!("c{i}")));
            h.push(assistant("answer"));
        }
        for threshold in [200, 400, 800, 1200] {
            for chunk in [50, 300, 100_000] {
                if let Some(n) = plan(&h, 20, threshold, chunk) {
                    // All of it, or up to a user message.
                    let next = h.get(n).map_or(Role::User, |m| m.role);
                    assert_eq!(next, Role::User, "threshold {threshold} chunk {chunk}");
                    assert!(n > 0);
                }
            }
        }
    }

    #[test]
    fn the_chunk_caps_one_call_but_takes_at_least_one_turn() {
        let long = "w".repeat(4000);
        let h = vec![
            user(&long),
            assistant("a"),
            user(&long),
            assistant("b"),
            user("c"),
        ];
        assert_eq!(plan(&h, 0, 1500, 10), Some(2));
        assert_eq!(plan(&h, 0, 1500, 100_000), Some(4));
    }

    #[test]
    fn even_one_oversized_turn_is_replaced() {
        let h = vec![user(&"w".repeat(8000)), assistant("a")];
        assert_eq!(plan(&h, 0, 100, 100), Some(2));
        assert_eq!(plan(&h[..1], 0, 100, 100), Some(1));
        assert_eq!(plan(&[], 5000, 100, 100), None);
    }

    #[test]
    fn the_request_carries_the_previous_summary_and_the_turns() {
        let turns = vec![
            user("my locker code is 4417"),
            call("c1"),
            result("c1"),
            assistant("noted"),
        ];
        let r = summary_request("m", Some("name: Ada"), &turns, 100_000);
        assert_eq!(r.system, SUMMARY_INSTRUCTIONS);
        assert!(r.tools.is_empty());
        let text = r.messages[0].joined_text();
        assert!(text.starts_with(PREVIOUS_SUMMARY_HEADING));
        assert!(text.contains("name: Ada"));
        assert!(text.contains("user: my locker code is 4417"));
        assert!(text.contains("assistant called clock {}"));
        assert!(text.contains("assistant: noted"));
        let cut = summary_request("m", None, &turns, 40);
        let text = cut.messages[0].joined_text();
        assert!(text.starts_with(TURNS_HEADING));
        assert!(text.contains("characters left out"));
    }

    #[test]
    fn a_long_message_loses_its_middle_never_its_end() {
        let mut output = "log line: all quiet\n".repeat(10 * 1024);
        output.push_str("my parking spot is B12");
        let long = Message {
            role: Role::Tool,
            content: vec![Content::ToolResult {
                call_id: "c1".into(),
                output,
            }],
        };
        let turns = vec![
            user("read the logs"),
            call("c1"),
            long,
            assistant("the parking spot is in the logs"),
        ];
        let r = summary_request("m", None, &turns, 8000);
        let text = r.messages[0].joined_text();
        assert!(text.len() < 8000 + 200, "{}", text.len());
        assert!(text.contains("my parking spot is B12"), "the end is kept");
        assert!(
            text.contains("tool result: log line: all quiet"),
            "so is the start"
        );
        assert!(text.contains("characters left out"));
        // The short messages around it are whole.
        assert!(text.contains("user: read the logs\n"));
        assert!(text.contains("assistant: the parking spot is in the logs\n"));
    }

    #[test]
    fn fitting_cuts_the_longest_lines_first_and_keeps_char_boundaries() {
        let mut lines = vec![
            "short\n".to_owned(),
            format!("{}\n", "é".repeat(3000)),
            format!("{}\n", "b".repeat(900)),
        ];
        fit(&mut lines, 2000);
        assert_eq!(lines[0], "short\n");
        let total: usize = lines.iter().map(String::len).sum();
        assert!(total <= 2000, "{total}");
        assert!(lines[1].ends_with("é\n") && lines[1].starts_with('é'));
        assert!(lines[1].contains("left out"));
        let mut many = vec!["x".repeat(1000); 50];
        fit(&mut many, 100);
        assert!(many.iter().all(|l| l.len() <= MIN_KEPT + MARKER_BYTES));
    }

    #[test]
    fn thresholds_use_the_default_window_when_unknown() {
        let c = CompactionConfig::default();
        assert_eq!(c.threshold(None), 24_000);
        assert_eq!(c.threshold(Some(8000)), 6000);
    }
}
