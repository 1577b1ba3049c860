//! What every command prints with `--json`: one style, indented JSON, one
//! document per command, on stdout.

use std::borrow::Cow;
use std::io::IsTerminal;
use std::sync::OnceLock;

use serde::Serialize;

/// Prints `value` as indented JSON on stdout.
pub fn print_json(value: &impl Serialize) {
    match serde_json::to_string_pretty(value) {
        Ok(text) => println!("{text}"),
        // Only a map with non-string keys fails to serialise; none of the
        // printed types has one, so say so rather than print nothing.
        Err(e) => eprintln!("hearth: cannot print the answer as JSON: {e}"),
    }
}

/// Text that others wrote (a model's answer, which a web page it read may
/// have steered; a platform's error; a tool's arguments) as it may reach the
/// user's terminal: when stdout is one, each control character but a
/// newline and a tab becomes U+FFFD, so no escape sequence in it is
/// obeyed (a title set, the screen redrawn, on some terminals the clipboard
/// written). Piped or redirected output keeps every character, for the
/// scripts that read it.
pub fn shown(text: &str) -> Cow<'_, str> {
    static TERMINAL: OnceLock<bool> = OnceLock::new();
    if *TERMINAL.get_or_init(|| std::io::stdout().is_terminal()) {
        terminal_safe(text)
    } else {
        Cow::Borrowed(text)
    }
}

/// `text` with each control character (C0, DEL, C1) but a newline and a
/// tab replaced by U+FFFD.
pub fn terminal_safe(text: &str) -> Cow<'_, str> {
    let unsafe_char = |c: char| c.is_control() && c != '\n' && c != '\t';
    if text.chars().any(unsafe_char) {
        Cow::Owned(
            text.chars()
                .map(|c| if unsafe_char(c) { '\u{FFFD}' } else { c })
                .collect(),
        )
    } else {
        Cow::Borrowed(text)
    }
}

/// Lays out rows under headers in aligned columns: text columns left-aligned,
/// the others (numbers, costs) right-aligned, widths from the widest cell.
pub fn table(headers: &[&str], right: &[bool], rows: &[Vec<String>]) -> String {
    let width = |i: usize| {
        rows.iter()
            .map(|r| r.get(i).map_or(0, |c| c.chars().count()))
            .chain(std::iter::once(headers[i].chars().count()))
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..headers.len()).map(width).collect();
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let w = widths.get(i).copied().unwrap_or(0);
                if right.get(i).copied().unwrap_or(false) {
                    format!("{c:>w$}")
                } else {
                    format!("{c:<w$}")
                }
            })
            .collect();
        padded.join("  ").trim_end().to_owned()
    };
    let mut out = line(headers.to_vec());
    for r in rows {
        out.push('\n');
        out.push_str(&line(r.iter().map(String::as_str).collect()));
    }
    match shown(&out) {
        Cow::Borrowed(_) => out,
        Cow::Owned(safe) => safe,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_but_newline_and_tab_are_not_passed_to_a_terminal() {
        let steered = "done\u{1b}]52;c;cm0gLXJm\u{7}\u{1b}[2J\r\u{9b}31m\u{7f}\n\tnext\0";
        assert_eq!(
            terminal_safe(steered),
            "done\u{FFFD}]52;c;cm0gLXJm\u{FFFD}\u{FFFD}[2J\u{FFFD}\u{FFFD}31m\u{FFFD}\n\tnext\u{FFFD}"
        );
        let plain = "Zoë 山田 🙂\n\tok";
        assert!(matches!(terminal_safe(plain), Cow::Borrowed(t) if t == plain));
    }

    #[test]
    fn table_columns_align_whatever_the_cell_widths() {
        let rows = vec![
            vec!["openai/gpt-4.1-mini".to_owned(), "12345".to_owned()],
            vec!["echo".to_owned(), "2".to_owned()],
        ];
        let t = table(&["model", "calls"], &[false, true], &rows);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines,
            [
                "model                calls",
                "openai/gpt-4.1-mini  12345",
                "echo                     2",
            ]
        );
    }
}
