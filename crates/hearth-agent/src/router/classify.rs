//! The task classifier: a run's text sorted into a task class by keywords
//! and shape, without a model call (it runs on every routed run, so it must
//! stay in microseconds and give the same class for the same text).

use std::fmt;

/// What a run asks for, as far as choosing a model goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TaskClass {
    /// Small talk and anything unclassified.
    Chat,
    /// A question with a factual answer.
    Question,
    /// Writing, reading or fixing code.
    Code,
    /// Prose: drafts, letters, stories, translations.
    Writing,
    /// Shortening a text the user gives.
    Summarize,
    /// Something a tool does: the web, memory, reminders.
    Tools,
    /// Working something out: maths, proofs, plans, comparisons.
    Reasoning,
}

impl TaskClass {
    /// Every class, in the order used for per-class tables.
    pub const ALL: [TaskClass; 7] = [
        Self::Chat,
        Self::Question,
        Self::Code,
        Self::Writing,
        Self::Summarize,
        Self::Tools,
        Self::Reasoning,
    ];

    /// Wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Chat => "chat",
            Self::Question => "question",
            Self::Code => "code",
            Self::Writing => "writing",
            Self::Summarize => "summarize",
            Self::Tools => "tools",
            Self::Reasoning => "reasoning",
        }
    }

    /// The class of a wire name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// Position in [`Self::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for TaskClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Bytes of the text looked at: the instruction is nearly always at the
/// start, and a pasted document should not make classification slow.
const SCAN_BYTES: usize = 1024;
/// Longest keyword: longer words cannot match one and are skipped.
const LONGEST_KEYWORD: usize = 10;
/// A text this long with no other signal is a paste to be summarized.
const LONG_PASTE_BYTES: usize = 3000;

/// The class of a run's text: one pass over its words (keywords and word
/// pairs) and one over its bytes (marks of code and links), so the cost
/// stays linear in the (capped) text.
pub fn classify(text: &str) -> TaskClass {
    let head = prefix(text, SCAN_BYTES);
    let lower = head.to_lowercase();
    let mut words = Signals::default();
    let mut prev = "";
    for word in lower
        .split(|c: char| !c.is_alphanumeric() && c != '_')
        .filter(|w| !w.is_empty())
    {
        words.see(word);
        words.pair(prev, word);
        if words.code {
            // Code outranks every other class: the rest cannot change it.
            return TaskClass::Code;
        }
        prev = word;
    }
    let marks = marks(lower.as_bytes());
    if marks.code {
        return TaskClass::Code;
    }
    if words.summarize {
        return TaskClass::Summarize;
    }
    if words.tools || marks.link {
        return TaskClass::Tools;
    }
    if words.writing {
        return TaskClass::Writing;
    }
    if words.reasoning || marks.arithmetic {
        return TaskClass::Reasoning;
    }
    if text.len() >= LONG_PASTE_BYTES {
        return TaskClass::Summarize;
    }
    if lower.trim_end().ends_with('?') || words.first_is_question {
        return TaskClass::Question;
    }
    TaskClass::Chat
}

/// What the bytes of a text show besides its words.
#[derive(Default)]
struct Marks {
    code: bool,
    link: bool,
    arithmetic: bool,
}

/// Marks of code (```` ``` ````, `();`, `=>`, `::`, `</`, `{` at a line end,
/// `#include`), links (`://`) and sums (`12 * 7`), in one pass.
fn marks(b: &[u8]) -> Marks {
    let mut m = Marks::default();
    for (i, &c) in b.iter().enumerate() {
        let rest = &b[i..];
        match c {
            b'`' => m.code |= rest.starts_with(b"```"),
            b'(' => m.code |= rest.starts_with(b"();"),
            b'=' => m.code |= rest.starts_with(b"=>"),
            b'<' => m.code |= rest.starts_with(b"</"),
            b'{' => m.code |= rest.starts_with(b"{\n"),
            b'#' => m.code |= rest.starts_with(b"#include"),
            b':' => {
                m.code |= rest.starts_with(b"::");
                m.link |= rest.starts_with(b"://");
            }
            _ => {}
        }
        if matches!(c, b'+' | b'*' | b'/' | b'^' | b'=') && operands_around(b, i) {
            m.arithmetic = true;
        }
    }
    m
}

/// At most `max` bytes of `text`, cut at a character boundary.
fn prefix(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// A digit before and after the operator at `i` (spaces aside): `12 * 7`, `3+4`.
fn operands_around(b: &[u8], i: usize) -> bool {
    b[..i]
        .iter()
        .rev()
        .find(|c| **c != b' ')
        .is_some_and(u8::is_ascii_digit)
        && b[i + 1..]
            .iter()
            .find(|c| **c != b' ')
            .is_some_and(u8::is_ascii_digit)
}

/// Which classes the words of a text point to.
#[derive(Default)]
struct Signals {
    seen_first: bool,
    first_is_question: bool,
    code: bool,
    summarize: bool,
    tools: bool,
    writing: bool,
    reasoning: bool,
}

impl Signals {
    /// Two words in a row that mean more than each alone.
    fn pair(&mut self, prev: &str, word: &str) {
        match (prev, word) {
            ("stack", "trace") | ("console", "log") => self.code = true,
            ("tl", "dr") | ("key", "points") | ("in", "short") => self.summarize = true,
            ("look", "up") | ("what", "time") => self.tools = true,
            ("by", "step") | ("how", "many") | ("what", "if") | ("pros", "and") => {
                self.reasoning = true;
            }
            _ => {}
        }
    }

    fn see(&mut self, word: &str) {
        if self.seen_first && word.len() > LONGEST_KEYWORD {
            return;
        }
        if !self.seen_first {
            self.seen_first = true;
            self.first_is_question = matches!(
                word,
                "who"
                    | "what"
                    | "when"
                    | "where"
                    | "which"
                    | "how"
                    | "is"
                    | "are"
                    | "can"
                    | "does"
                    | "do"
                    | "did"
                    | "should"
                    | "could"
                    | "would"
                    | "will"
            );
        }
        match word {
            "code" | "fn" | "def" | "traceback" | "function" | "bug" | "debug" | "regex"
            | "script" | "python" | "rust" | "javascript" | "typescript" | "sql" | "java"
            | "golang" | "compile" | "compiler" | "refactor" | "snippet" | "segfault"
            | "exception" | "struct" | "async" | "bash" | "html" | "css" | "json" | "yaml"
            | "api" | "git" | "dockerfile" | "kotlin" | "swift" | "cpp" => self.code = true,
            "summarize" | "summarise" | "summary" | "tldr" | "recap" | "condense" | "shorten"
            | "gist" => self.summarize = true,
            "search" | "www" | "lookup" | "fetch" | "browse" | "remember" | "remind"
            | "reminder" | "schedule" | "weather" | "news" | "latest" | "today" | "tomorrow"
            | "memory" | "save" | "forget" | "website" | "url" | "link" => self.tools = true,
            "write" | "draft" | "rewrite" | "essay" | "poem" | "story" | "letter" | "email"
            | "blog" | "article" | "translate" | "compose" | "paraphrase" | "proofread"
            | "tweet" | "slogan" | "lyrics" | "speech" | "outline" => self.writing = true,
            "why" | "prove" | "proof" | "calculate" | "solve" | "reason" | "compare"
            | "analyze" | "analyse" | "plan" | "derive" | "estimate" | "logic" | "puzzle"
            | "explain" | "tradeoff" | "tradeoffs" | "optimize" | "equation" => {
                self.reasoning = true;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_of_typical_messages() {
        for (text, want) in [
            ("hi there!", TaskClass::Chat),
            ("thanks, that helped", TaskClass::Chat),
            ("What is the capital of France?", TaskClass::Question),
            ("who wrote Dune", TaskClass::Question),
            ("Fix this: ```let x = 1```", TaskClass::Code),
            (
                "Write a Python function that reverses a list",
                TaskClass::Code,
            ),
            ("why does my Rust code not compile", TaskClass::Code),
            ("Write a poem about the sea", TaskClass::Writing),
            ("draft an email to my landlord", TaskClass::Writing),
            ("Summarize this: the meeting was long", TaskClass::Summarize),
            ("tl;dr of the thread please", TaskClass::Summarize),
            ("what's on https://example.org", TaskClass::Tools),
            ("remind me to call mum at 5", TaskClass::Tools),
            ("search for flights to Oslo", TaskClass::Tools),
            ("Why is the sky blue?", TaskClass::Reasoning),
            ("my console.log prints nothing", TaskClass::Code),
            ("struct {\n  a: u8 }", TaskClass::Code),
            ("got a stack trace from the server", TaskClass::Code),
            ("open www.example.org for me", TaskClass::Tools),
            ("what if we left at noon", TaskClass::Reasoning),
            ("what is 12 * 7", TaskClass::Reasoning),
            ("solve x^2 = 4 step by step", TaskClass::Reasoning),
        ] {
            assert_eq!(classify(text), want, "{text:?}");
        }
    }

    #[test]
    fn a_long_paste_without_instructions_is_summarize() {
        let paste = "The committee met on Tuesday. ".repeat(200);
        assert_eq!(classify(&paste), TaskClass::Summarize);
    }

    #[test]
    fn only_the_head_is_scanned_and_multibyte_text_is_cut_safely() {
        let text = format!(
            "{}{}",
            "é".repeat(LONG_PASTE_BYTES.max(SCAN_BYTES)),
            " python code"
        );
        assert_eq!(
            classify(&text),
            TaskClass::Summarize,
            "the tail is not read"
        );
        assert_eq!(classify(""), TaskClass::Chat);
        assert_eq!(classify("??"), TaskClass::Question);
    }

    #[test]
    fn names_match_the_config_list() {
        let names: Vec<&str> = TaskClass::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(
            names,
            [
                "chat",
                "question",
                "code",
                "writing",
                "summarize",
                "tools",
                "reasoning"
            ]
        );
        for c in TaskClass::ALL {
            assert_eq!(TaskClass::parse(c.as_str()), Some(c));
            assert_eq!(TaskClass::ALL[c.index()], c);
        }
        assert_eq!(TaskClass::parse("poetry"), None);
    }
}
