//! An answer as text messages: Markdown stripped to plain text, then split
//! at sentence boundaries into at most `max_segments` messages of at most
//! [`SEGMENT_CHARS`] characters (Twilio's limit for one message's body).
//! What does not fit is replaced by a note saying where the full answer is.

/// Most characters of one message body Twilio accepts.
pub const SEGMENT_CHARS: usize = 1600;

/// Plain text from the model's Markdown: fences, headings' `#`, emphasis
/// markers, inline code ticks and link syntax removed (a link keeps its
/// text and its address), bullets written as `- `.
pub fn strip_markdown(text: &str) -> String {
    let mut out = Vec::new();
    let mut in_code = false;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            out.push(line.to_owned());
            continue;
        }
        let mut l = trimmed;
        let heading = l.trim_start_matches('#');
        if heading.len() < l.len() && (heading.is_empty() || heading.starts_with(' ')) {
            l = heading.trim_start();
        }
        let bullet = ["* ", "+ ", "- "].iter().find_map(|b| l.strip_prefix(b));
        let body = inline(bullet.unwrap_or(l));
        out.push(match bullet {
            Some(_) => format!("- {body}"),
            None => body,
        });
    }
    out.join("\n").trim().to_owned()
}

/// One line's inline Markdown removed.
fn inline(line: &str) -> String {
    let mut s = String::with_capacity(line.len());
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '*' | '`' | '~' => {}
            '_' if chars.get(i + 1) == Some(&'_') => i += 1,
            '[' => {
                // `[text](url)` reads as `text (url)`.
                if let Some((text, url, end)) = link(&chars, i) {
                    s.push_str(&text);
                    if url != text {
                        s.push_str(" (");
                        s.push_str(&url);
                        s.push(')');
                    }
                    i = end;
                    continue;
                }
                s.push(c);
            }
            _ => s.push(c),
        }
        i += 1;
    }
    s
}

/// A link starting at `start` (`[`): its text, its address, and the index
/// after it.
fn link(chars: &[char], start: usize) -> Option<(String, String, usize)> {
    let close = start + chars[start..].iter().position(|&c| c == ']')?;
    if chars.get(close + 1) != Some(&'(') {
        return None;
    }
    let end = close + 1 + chars[close + 1..].iter().position(|&c| c == ')')?;
    let text: String = chars[start + 1..close].iter().collect();
    let url: String = chars[close + 2..end].iter().collect();
    Some((inline(&text), url, end + 1))
}

/// The pieces `text` may be cut between: sentences (ending in `.`, `!` or
/// `?` and a space) and lines, each with what follows it.
fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let bytes = text.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        let ends = match b {
            b'\n' => true,
            b'.' | b'!' | b'?' => bytes.get(i + 1).is_some_and(|n| *n == b' ' || *n == b'\n'),
            _ => false,
        };
        if ends {
            // Trailing spaces stay with the sentence they follow.
            let mut end = i + 1;
            while bytes.get(end) == Some(&b' ') {
                end += 1;
            }
            if end > start {
                out.push(&text[start..end]);
                start = end;
            }
        }
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

/// `piece` cut into parts of at most `limit` characters, at spaces where
/// it can be (a sentence longer than a whole message).
fn cut(piece: &str, limit: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = piece;
    while rest.chars().count() > limit {
        let at = rest
            .char_indices()
            .nth(limit)
            .map_or(rest.len(), |(i, _)| i);
        let cut_at = rest[..at].rfind(' ').filter(|&i| i > 0).unwrap_or(at);
        out.push(rest[..cut_at].to_owned());
        rest = rest[cut_at..].trim_start_matches(' ');
    }
    if !rest.is_empty() {
        out.push(rest.to_owned());
    }
    out
}

/// Packs `text`'s sentences into messages, the `i`th at most `caps(i)`
/// characters; stops once more than `stop_after` messages are made.
fn pack(text: &str, caps: impl Fn(usize) -> usize, stop_after: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut cur = String::new();
    for sentence in sentences(text) {
        let cap = caps(out.len());
        if cur.chars().count() + sentence.chars().count() <= cap {
            cur.push_str(sentence);
            continue;
        }
        if !cur.trim().is_empty() {
            out.push(cur.trim().to_owned());
            if out.len() > stop_after {
                return out;
            }
        }
        cur = String::new();
        let cap = caps(out.len());
        for part in cut(sentence, cap) {
            if cur.is_empty() && part.chars().count() <= cap {
                cur = part;
            } else {
                out.push(std::mem::take(&mut cur).trim().to_owned());
                cur = part;
            }
            if out.len() > stop_after {
                return out;
            }
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_owned());
    }
    out.retain(|s| !s.is_empty());
    out
}

/// What ends a shortened answer: where the full one is.
pub fn shortened_note(ui: &str) -> String {
    format!("[Shortened for SMS. The full answer is at {ui}, or reply to ask for the rest.]")
}

/// `text` as at most `max` messages of at most [`SEGMENT_CHARS`]
/// characters; when it does not fit, the last ends with `note`.
pub fn segments(text: &str, max: usize, note: &str) -> Vec<String> {
    let max = max.max(1);
    let all = pack(text, |_| SEGMENT_CHARS, usize::MAX);
    if all.len() <= max {
        return if all.is_empty() {
            vec![String::new()]
        } else {
            all
        };
    }
    let room = SEGMENT_CHARS.saturating_sub(note.chars().count() + 1);
    let mut kept = pack(
        text,
        |i| if i + 1 >= max { room } else { SEGMENT_CHARS },
        max,
    );
    kept.truncate(max);
    let last = kept.pop().unwrap_or_default();
    kept.push(if last.is_empty() {
        note.to_owned()
    } else {
        format!("{last}\n{note}")
    });
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_becomes_plain_text() {
        let md = "# Plan\n\nUse **bold** and `code`, see [the docs](https://x.test/d).\n\n* one\n- two\n\n```sh\nls -l\n```\n__done__";
        assert_eq!(
            strip_markdown(md),
            "Plan\n\nUse bold and code, see the docs (https://x.test/d).\n\n- one\n- two\n\nls -l\ndone"
        );
    }

    #[test]
    fn a_short_answer_is_one_message() {
        assert_eq!(
            segments("Hello there. Bye.", 4, "N"),
            vec!["Hello there. Bye."]
        );
    }

    #[test]
    fn long_answers_split_at_sentences_within_the_limit() {
        let sentence = "This sentence is exactly fifty characters long ok. ";
        assert_eq!(sentence.len(), 51);
        let text = sentence.repeat(60); // 3060 characters: two messages
        let parts = segments(&text, 4, "N");
        assert_eq!(parts.len(), 2, "{parts:?}");
        for p in &parts {
            assert!(p.chars().count() <= SEGMENT_CHARS);
            assert!(p.ends_with("ok."), "cut inside a sentence: {p:?}");
        }
        assert_eq!(parts.concat().matches("ok.").count(), 60, "nothing lost");
    }

    #[test]
    fn what_does_not_fit_is_replaced_by_the_note() {
        let sentence = "Another sentence that goes on for a while here. ";
        let text = sentence.repeat(200); // about 9,600 characters
        let note = shortened_note("https://h.test/ui");
        let parts = segments(&text, 3, &note);
        assert_eq!(parts.len(), 3);
        for p in &parts {
            assert!(p.chars().count() <= SEGMENT_CHARS, "{}", p.len());
        }
        assert!(parts[2].ends_with(&note));
        assert!(!parts[0].contains(&note) && !parts[1].contains(&note));
        let before_note = parts[2].trim_end_matches(&note).trim_end();
        assert!(before_note.ends_with("here."), "{before_note:?}");
    }

    #[test]
    fn a_sentence_longer_than_a_message_is_cut_at_spaces() {
        let text = "word ".repeat(700); // 3,500 characters, no sentence end
        let parts = segments(text.trim(), 4, "N");
        assert_eq!(parts.len(), 3);
        for p in &parts {
            assert!(p.chars().count() <= SEGMENT_CHARS);
            assert!(!p.starts_with(' ') && !p.ends_with(' '));
            assert!(p.split(' ').all(|w| w == "word"), "a word was cut");
        }
        let unbroken = "x".repeat(2000);
        let parts = segments(&unbroken, 4, "N");
        assert_eq!(
            parts.iter().map(|p| p.chars().count()).collect::<Vec<_>>(),
            [1600, 400]
        );
    }
}
