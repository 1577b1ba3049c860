//! Basic Markdown for the terminal: headings and `**bold**` in bold,
//! `` `code` `` and fenced code blocks in their own colour, `-`/`*`/`1.`
//! lists with a hanging indent; then wrapped to the screen's width by
//! words, keeping each word's style. Anything else is shown as written.

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthStr;

/// The style of code.
fn code() -> Style {
    Style::default().fg(Color::Cyan)
}

/// `text` as lines of at most `width` columns, every line starting with
/// `prefix` (a speaker's mark on the first, as many spaces after).
pub(super) fn render(
    text: &str,
    width: u16,
    prefix: Span<'static>,
    base: Style,
) -> Vec<Line<'static>> {
    let width = usize::from(width.max(8));
    let pad = Span::raw(" ".repeat(prefix.width()));
    let mut out: Vec<Line<'static>> = Vec::new();
    let mut in_code = false;
    for raw in text.lines() {
        let trimmed = raw.trim_start();
        if trimmed.starts_with("```") {
            in_code = !in_code;
            continue;
        }
        let lead = if out.is_empty() {
            prefix.clone()
        } else {
            pad.clone()
        };
        if in_code {
            // Code keeps its spaces; long lines are cut into pieces.
            for piece in cut(raw, width.saturating_sub(lead.width() + 2).max(1)) {
                let lead = if out.is_empty() {
                    prefix.clone()
                } else {
                    pad.clone()
                };
                out.push(Line::from(vec![
                    lead,
                    Span::styled(format!("  {piece}"), code()),
                ]));
            }
            continue;
        }
        let (marker, body, style) = block(trimmed, base);
        let words = inline(body, style);
        let hang = lead.width() + marker.chars().count();
        let mut first = vec![lead.clone(), Span::styled(marker.clone(), style)];
        let mut lines = wrap(words, width, hang);
        if lines.is_empty() {
            lines.push(Vec::new());
        }
        for (i, spans) in lines.into_iter().enumerate() {
            let mut line = if i == 0 {
                std::mem::take(&mut first)
            } else {
                vec![
                    if out.is_empty() {
                        prefix.clone()
                    } else {
                        pad.clone()
                    },
                    Span::raw(" ".repeat(marker.chars().count())),
                ]
            };
            line.extend(spans);
            out.push(Line::from(line));
        }
    }
    if out.is_empty() {
        out.push(Line::from(vec![prefix]));
    }
    out
}

/// A line's block: its marker (a list bullet), the rest, and its style.
fn block(line: &str, base: Style) -> (String, &str, Style) {
    if let Some(rest) = line.strip_prefix("- ").or_else(|| line.strip_prefix("* ")) {
        return ("• ".into(), rest, base);
    }
    let digits = line.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0 && line[digits..].starts_with(". ") {
        return (format!("{} ", &line[..=digits]), &line[digits + 2..], base);
    }
    let hashes = line.bytes().take_while(|b| *b == b'#').count();
    if (1..=6).contains(&hashes) && line[hashes..].starts_with(' ') {
        return (
            String::new(),
            &line[hashes + 1..],
            base.add_modifier(Modifier::BOLD),
        );
    }
    (String::new(), line, base)
}

/// Words of `text` with their style: `**bold**` and `` `code` ``.
fn inline(text: &str, base: Style) -> Vec<Span<'static>> {
    let mut out = Vec::new();
    let (mut bold, mut in_code) = (false, false);
    let mut word = String::new();
    let mut chars = text.chars().peekable();
    let style = |bold: bool, in_code: bool| match (bold, in_code) {
        (_, true) => code(),
        (true, false) => base.add_modifier(Modifier::BOLD),
        (false, false) => base,
    };
    let flush = |word: &mut String, out: &mut Vec<Span<'static>>, s: Style| {
        if !word.is_empty() {
            out.push(Span::styled(std::mem::take(word), s));
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '`' => {
                flush(&mut word, &mut out, style(bold, in_code));
                in_code = !in_code;
            }
            '*' if !in_code && chars.peek() == Some(&'*') => {
                chars.next();
                flush(&mut word, &mut out, style(bold, in_code));
                bold = !bold;
            }
            ' ' => {
                word.push(' ');
                flush(&mut word, &mut out, style(bold, in_code));
            }
            c => word.push(c),
        }
    }
    flush(&mut word, &mut out, style(bold, in_code));
    out
}

/// Greedy word wrap: lines of `width` columns, the first `hang` columns of
/// each taken already. A word longer than a line is cut.
fn wrap(words: Vec<Span<'static>>, width: usize, hang: usize) -> Vec<Vec<Span<'static>>> {
    let room = width.saturating_sub(hang).max(1);
    let mut lines: Vec<Vec<Span<'static>>> = Vec::new();
    let mut line: Vec<Span<'static>> = Vec::new();
    let mut used = 0;
    for w in words {
        let len = w.content.width();
        if used + len.min(room) > room && used > 0 {
            lines.push(std::mem::take(&mut line));
            used = 0;
        }
        if len > room {
            for piece in cut(&w.content, room) {
                if used > 0 {
                    lines.push(std::mem::take(&mut line));
                }
                used = piece.width();
                line.push(Span::styled(piece, w.style));
            }
            continue;
        }
        used += len;
        line.push(w);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// `text` in pieces of at most `width` columns.
pub(super) fn cut(text: &str, width: usize) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut used = 0;
    for c in text.chars() {
        let w = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        if used + w > width && used > 0 {
            out.push(String::new());
            used = 0;
        }
        if let Some(last) = out.last_mut() {
            last.push(c);
        }
        used += w;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(lines: &[Line<'_>]) -> Vec<String> {
        lines
            .iter()
            .map(|l| {
                l.spans
                    .iter()
                    .map(|s| s.content.as_ref())
                    .collect::<String>()
            })
            .collect()
    }

    #[test]
    fn lists_hang_bold_is_bold_and_code_keeps_its_spaces() {
        let text = "# Plan\n- read **all** the notes first please\n2. then `rm` them\n```\n  let x = 1;\n```";
        let lines = render(text, 24, Span::raw("> "), Style::default());
        assert_eq!(
            plain(&lines),
            [
                "> Plan",
                "  • read all the notes ",
                "    first please",
                "  2. then rm them",
                "      let x = 1;",
            ]
        );
        let bold = lines[1]
            .spans
            .iter()
            .find(|s| s.content.trim() == "all")
            .unwrap();
        assert!(bold.style.add_modifier.contains(Modifier::BOLD));
        assert!(
            lines[0].spans[1]
                .style
                .add_modifier
                .contains(Modifier::BOLD)
        );
        let rm = lines[3]
            .spans
            .iter()
            .find(|s| s.content.trim() == "rm")
            .unwrap();
        assert_eq!(rm.style.fg, Some(Color::Cyan));
    }

    #[test]
    fn a_word_longer_than_the_line_is_cut_and_nothing_is_lost() {
        let long = "x".repeat(50);
        let lines = render(&long, 20, Span::raw(""), Style::default());
        assert_eq!(plain(&lines).concat(), long);
        assert!(lines.iter().all(|l| l.width() <= 20));
    }
}
