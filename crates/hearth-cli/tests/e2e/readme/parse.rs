//! Reading README.md: its fenced blocks, and the commands of a shell block.

/// One fenced block of the README.
#[derive(Debug)]
pub struct Block {
    /// The fence's language (`sh`, `toml`, ...).
    pub lang: String,
    /// The README line of the opening fence (1-based), for messages.
    pub line: usize,
    /// The block's text, dedented by the fence's own indentation (blocks
    /// inside list items are indented).
    pub text: String,
}

/// Every fenced block of `readme`, in order. Panics on a fence without a
/// language or one never closed: the test must know what each block is.
pub fn blocks(readme: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<(String, usize, usize, Vec<String>)> = None;
    for (i, raw) in readme.lines().enumerate() {
        let indent = raw.len() - raw.trim_start().len();
        let trimmed = raw.trim();
        match open.take() {
            None => {
                if let Some(lang) = trimmed.strip_prefix("```") {
                    assert!(
                        !lang.trim().is_empty(),
                        "README.md:{}: a fenced block without a language; name it (sh, toml, ...)",
                        i + 1
                    );
                    open = Some((lang.trim().to_owned(), i + 1, indent, Vec::new()));
                }
            }
            Some((lang, line, fence_indent, mut lines)) => {
                if trimmed == "```" {
                    out.push(Block {
                        lang,
                        line,
                        text: lines.join("\n") + "\n",
                    });
                } else {
                    let cut = indent.min(fence_indent);
                    lines.push(raw[cut..].to_owned());
                    open = Some((lang, line, fence_indent, lines));
                }
            }
        }
    }
    assert!(open.is_none(), "README.md: a fenced block is never closed");
    out
}

/// A command of a shell block: what runs, and the key the test's tables
/// know it by.
#[derive(Debug, Clone)]
pub struct ShellCommand {
    /// The text as written (continuation lines and comments included),
    /// which is what runs.
    pub text: String,
    /// The command without its comments, continuation lines joined by one
    /// space: the exact text the tables name.
    pub key: String,
    /// Its first line's index in the block (0-based), for messages.
    pub offset: usize,
}

/// The commands of a shell block: each line, with the lines a trailing `\`
/// continues; blank and comment-only lines are not commands.
pub fn commands(block: &str) -> Vec<ShellCommand> {
    let mut out = Vec::new();
    let mut text: Vec<&str> = Vec::new();
    let mut key: Vec<String> = Vec::new();
    let mut offset = 0;
    for (i, line) in block.lines().enumerate() {
        if text.is_empty() && (line.trim().is_empty() || line.trim_start().starts_with('#')) {
            continue;
        }
        if text.is_empty() {
            offset = i;
        }
        let code = strip_comment(line).trim_end();
        let (code, continued) = match code.strip_suffix('\\') {
            Some(c) => (c.trim(), true),
            None => (code.trim(), false),
        };
        text.push(line);
        key.push(code.to_owned());
        if !continued {
            out.push(ShellCommand {
                text: text.join("\n"),
                key: key.join(" "),
                offset,
            });
            text.clear();
            key.clear();
        }
    }
    assert!(text.is_empty(), "a shell block ends in a `\\` continuation");
    out
}

/// `line` up to its comment: a `#` outside quotes, at the start or after a
/// blank (`a#b` is a word, as in the shell).
fn strip_comment(line: &str) -> &str {
    let (mut single, mut double) = (false, false);
    let mut prev = ' ';
    for (i, c) in line.char_indices() {
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '#' if !single && !double && prev.is_whitespace() => return &line[..i],
            _ => {}
        }
        prev = c;
    }
    line
}

#[test]
fn commands_join_continuations_and_drop_comments() {
    let block = "# a comment line\n\nhearth a 'x # y'   # said\nhearth b \\\n  --c \"d\"  # more\n";
    let cmds = commands(block);
    let keys: Vec<&str> = cmds.iter().map(|c| c.key.as_str()).collect();
    assert_eq!(keys, ["hearth a 'x # y'", "hearth b --c \"d\""]);
    assert_eq!(cmds[1].text, "hearth b \\\n  --c \"d\"  # more");
    assert_eq!((cmds[0].offset, cmds[1].offset), (2, 3));
}

#[test]
fn indented_blocks_are_dedented() {
    let md = "1. Add:\n   ```toml\n   [a]\n   b = 1\n   ```\n```sh\nx\n```\n";
    let b = blocks(md);
    assert_eq!(b.len(), 2);
    assert_eq!(
        (b[0].lang.as_str(), b[0].text.as_str()),
        ("toml", "[a]\nb = 1\n")
    );
    assert_eq!((b[1].lang.as_str(), b[1].line), ("sh", 6));
}
