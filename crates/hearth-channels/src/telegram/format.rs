//! Markdown as models write it, turned into Telegram HTML (`parse_mode`
//! "HTML"), and split into messages within Telegram's limit.
//!
//! Only tags Telegram accepts are emitted, always well nested: each matched
//! construct's inside is rendered on its own, so tags can only nest. What
//! does not parse as Markdown stays literal (escaped) text. Inline
//! formatting never spans lines, so the visible length of one line is known
//! alone; that is what lets [`render_parts`] split the source first and
//! still keep every formatted part within the limit after escaping.

use crate::text::{is_fence, split_markdown};

/// Telegram's limit for one message's text: 4096 UTF-16 units after entity
/// parsing.
pub const MESSAGE_LIMIT: usize = 4096;

/// Converts Markdown to Telegram HTML.
pub fn to_html(markdown: &str) -> String {
    render(markdown).html
}

/// The UTF-16 length of what Telegram counts for one Markdown line once
/// converted: its visible text, tags and entities decoded away. Fence lines
/// count 0 (they become tags); `in_code` lines count as they are.
pub fn visible_len(line: &str, in_code: bool) -> usize {
    if is_fence(line) {
        return 0;
    }
    if in_code {
        return line.encode_utf16().count();
    }
    let mut out = Out::default();
    match classify(line) {
        Kind::Quote(body) => inline(&mut out, body, false),
        kind => render_line(&mut out, kind),
    }
    out.visible
}

/// The Markdown as HTML messages for `parse_mode` "HTML", each at most
/// [`MESSAGE_LIMIT`] UTF-16 units of visible text. Parts with no visible
/// text (an empty code block) are left out, as Telegram refuses them.
pub fn render_parts(markdown: &str) -> Vec<String> {
    split_markdown(markdown, MESSAGE_LIMIT, &visible_len)
        .iter()
        .map(|chunk| render(chunk))
        .filter(|out| out.has_text)
        .map(|out| out.html)
        .collect()
}

/// Plain-text messages (no `parse_mode`), each at most [`MESSAGE_LIMIT`]
/// UTF-16 units: for notices, and for an answer Telegram would not parse.
pub fn plain_parts(text: &str) -> Vec<String> {
    split_markdown(text, MESSAGE_LIMIT, &|line: &str, _| {
        line.encode_utf16().count()
    })
}

/// HTML being written, with the UTF-16 length of its visible text.
#[derive(Default)]
struct Out {
    html: String,
    visible: usize,
    has_text: bool,
}

impl Out {
    /// Appends visible text, escaped.
    fn text(&mut self, s: &str) {
        for c in s.chars() {
            match c {
                '&' => self.html.push_str("&amp;"),
                '<' => self.html.push_str("&lt;"),
                '>' => self.html.push_str("&gt;"),
                c => self.html.push(c),
            }
            self.visible += c.len_utf16();
            self.has_text |= !c.is_whitespace();
        }
    }

    fn tag(&mut self, tag: &str) {
        self.html.push_str(tag);
    }

    fn newline(&mut self) {
        self.text("\n");
    }
}

/// What a line is, outside code blocks.
enum Kind<'a> {
    /// `> text`: the text.
    Quote(&'a str),
    /// `# Title`: the title.
    Heading(&'a str),
    /// `- item` / `* item` / `+ item`: the indentation and the item.
    Bullet(&'a str, &'a str),
    Text(&'a str),
}

fn classify(line: &str) -> Kind<'_> {
    let trimmed = line.trim_start();
    let indent = &line[..line.len() - trimmed.len()];
    if let Some(body) = trimmed.strip_prefix('>') {
        return Kind::Quote(body.strip_prefix(' ').unwrap_or(body));
    }
    let hashes = trimmed.bytes().take_while(|&b| b == b'#').count();
    if (1..=6).contains(&hashes) {
        let rest = &trimmed[hashes..];
        if rest.is_empty() || rest.starts_with([' ', '\t']) {
            // A closing run of `#` is decoration, as in CommonMark.
            let title = rest.trim();
            let title = match title.trim_end_matches('#') {
                t if t.is_empty() || t.ends_with([' ', '\t']) => t.trim_end(),
                _ => title,
            };
            return Kind::Heading(title);
        }
    }
    for marker in ["- ", "* ", "+ "] {
        if let Some(item) = trimmed.strip_prefix(marker) {
            return Kind::Bullet(indent, item);
        }
    }
    Kind::Text(line)
}

fn render_line(out: &mut Out, kind: Kind<'_>) {
    match kind {
        Kind::Quote(body) | Kind::Text(body) => inline(out, body, false),
        Kind::Heading(title) => {
            if !title.is_empty() {
                out.tag("<b>");
                inline(out, title, false);
                out.tag("</b>");
            }
        }
        Kind::Bullet(indent, item) => {
            out.text(indent);
            out.text("• ");
            inline(out, item, false);
        }
    }
}

/// Renders a whole message: lines joined by newlines, fenced blocks as
/// `<pre>`, runs of quote lines as one `<blockquote>`.
fn render(markdown: &str) -> Out {
    let mut out = Out::default();
    let mut lines = markdown.split('\n').peekable();
    let mut first = true;
    while let Some(line) = lines.next() {
        if !first {
            out.newline();
        }
        first = false;
        if is_fence(line) {
            let mut code: Vec<&str> = Vec::new();
            for line in lines.by_ref() {
                if is_fence(line) {
                    break;
                }
                code.push(line);
            }
            code_block(&mut out, line, &code.join("\n"));
            continue;
        }
        if let Kind::Quote(body) = classify(line) {
            let mut bodies = vec![body];
            while let Some(Kind::Quote(body)) = lines.peek().map(|l| classify(l)) {
                bodies.push(body);
                lines.next();
            }
            quote(&mut out, &bodies);
            continue;
        }
        render_line(&mut out, classify(line));
    }
    out
}

fn code_block(out: &mut Out, fence: &str, code: &str) {
    // Telegram refuses a message whose text is only whitespace; an empty
    // block shows nothing anyway.
    if code.trim().is_empty() {
        return;
    }
    let info = fence.trim_start().trim_start_matches('`').trim();
    let lang: String = info
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || "+-#._".contains(*c))
        .collect();
    if lang.is_empty() {
        out.tag("<pre>");
        out.text(code);
        out.tag("</pre>");
    } else {
        out.tag(&format!("<pre><code class=\"language-{lang}\">"));
        out.text(code);
        out.tag("</code></pre>");
    }
}

fn quote(out: &mut Out, bodies: &[&str]) {
    let tagged = bodies.iter().any(|b| !b.trim().is_empty());
    if tagged {
        out.tag("<blockquote>");
    }
    for (i, body) in bodies.iter().enumerate() {
        if i > 0 {
            out.newline();
        }
        inline(out, body, false);
    }
    if tagged {
        out.tag("</blockquote>");
    }
}

/// Renders one line's inline Markdown. Inside a link (`in_link`) code spans
/// become plain text and links stay literal: Telegram lets no entity but
/// the text styles sit inside a link.
fn inline(out: &mut Out, s: &str, in_link: bool) {
    let b = s.as_bytes();
    let mut i = 0;
    let mut lit = 0;
    while let Some(&c) = b.get(i) {
        let start = i;
        match c {
            b'\\' if b.get(i + 1).is_some_and(u8::is_ascii_punctuation) => {
                out.text(&s[lit..i]);
                out.text(&s[i + 1..i + 2]);
                i += 2;
                lit = i;
                continue;
            }
            b'`' => {
                let n = run(b, i, b'`');
                if let Some(close) = code_close(b, i + n, n) {
                    out.text(&s[lit..start]);
                    let code = &s[i + n..close];
                    if in_link {
                        out.text(code);
                    } else {
                        out.tag("<code>");
                        out.text(code);
                        out.tag("</code>");
                    }
                    i = close + n;
                    lit = i;
                } else {
                    i += n;
                }
                continue;
            }
            b'*' | b'_' | b'~' => {
                let n = run(b, i, c);
                let tags: Option<(&str, &str)> = match (c, n) {
                    (b'~', 2) => Some(("<s>", "</s>")),
                    (b'~', _) => None,
                    (_, 1) => Some(("<i>", "</i>")),
                    (_, 2) => Some(("<b>", "</b>")),
                    (_, 3) => Some(("<b><i>", "</i></b>")),
                    _ => None,
                };
                if let Some((open, close_tag)) = tags
                    && let Some(close) = emphasis_close(s, i, n, c)
                {
                    out.text(&s[lit..start]);
                    out.tag(open);
                    inline(out, &s[i + n..close], in_link);
                    out.tag(close_tag);
                    i = close + n;
                    lit = i;
                } else {
                    i += n;
                }
                continue;
            }
            b'[' if !in_link => {
                if let Some(link) = link_at(s, i) {
                    out.text(&s[lit..start]);
                    out.tag("<a href=\"");
                    out.tag(&escape_attr(link.url));
                    out.tag("\">");
                    if link.text.trim().is_empty() {
                        out.text(link.url);
                    } else {
                        inline(out, link.text, true);
                    }
                    out.tag("</a>");
                    i = link.end;
                    lit = i;
                    continue;
                }
            }
            b'h' if url_starts(s, i) => {
                // A bare URL is left whole: its `_` and `*` are not markup,
                // and Telegram links it itself.
                i = s[i..].find(char::is_whitespace).map_or(s.len(), |w| i + w);
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out.text(&s[lit..]);
}

/// The length of the run of `c` starting at `i`.
fn run(b: &[u8], i: usize, c: u8) -> usize {
    b.get(i..)
        .map_or(0, |rest| rest.iter().take_while(|&&x| x == c).count())
}

/// Where the backtick run closing a code span opened by `n` backticks is:
/// the next run of exactly `n`.
fn code_close(b: &[u8], mut i: usize, n: usize) -> Option<usize> {
    while let Some(&c) = b.get(i) {
        if c == b'`' {
            let m = run(b, i, b'`');
            if m == n {
                return Some(i);
            }
            i += m;
        } else {
            i += 1;
        }
    }
    None
}

/// Where the closing run for the `n` delimiters `c` at `i` is, if they
/// open emphasis: the opener is followed by non-space, the closer preceded
/// by non-space, a run of the same length, and for `_` neither touches a
/// letter or digit outside (so snake_case stays). Code spans are skipped
/// whole, so emphasis never cuts one.
fn emphasis_close(s: &str, i: usize, n: usize, c: u8) -> Option<usize> {
    let b = s.as_bytes();
    let after = s[i + n..].chars().next()?;
    if after.is_whitespace() {
        return None;
    }
    if c == b'_'
        && s[..i]
            .chars()
            .next_back()
            .is_some_and(char::is_alphanumeric)
    {
        return None;
    }
    let mut j = i + n;
    while let Some(&x) = b.get(j) {
        match x {
            b'\\' => j += 2,
            b'`' => {
                let m = run(b, j, b'`');
                j = code_close(b, j + m, m).map_or(j + m, |close| close + m);
            }
            x if x == c => {
                let m = run(b, j, c);
                let before = s[..j].chars().next_back();
                let next = s[j + m..].chars().next();
                let closes = m == n
                    && j > i + n
                    && before.is_some_and(|ch| !ch.is_whitespace())
                    && (c != b'_' || !next.is_some_and(char::is_alphanumeric));
                if closes {
                    return Some(j);
                }
                j += m;
            }
            _ => j += 1,
        }
    }
    None
}

struct Link<'a> {
    text: &'a str,
    url: &'a str,
    end: usize,
}

/// `[text](http…)` at `i`; only http(s) URLs make links, so a model cannot
/// make a `tg://` or `javascript:` one.
fn link_at(s: &str, i: usize) -> Option<Link<'_>> {
    let b = s.as_bytes();
    let mut j = i + 1;
    let close = loop {
        match b.get(j)? {
            b'\\' => j += 2,
            b'`' => {
                let m = run(b, j, b'`');
                j = code_close(b, j + m, m).map_or(j + m, |close| close + m);
            }
            b']' => break j,
            _ => j += 1,
        }
    };
    if b.get(close + 1) != Some(&b'(') {
        return None;
    }
    let url_start = close + 2;
    let mut depth = 0usize;
    let mut k = url_start;
    let url_end = loop {
        match b.get(k)? {
            b'(' => depth += 1,
            b')' if depth == 0 => break k,
            b')' => depth -= 1,
            x if x.is_ascii_whitespace() => return None,
            _ => {}
        }
        k += 1;
    };
    let url = &s[url_start..url_end];
    if !url_starts(url, 0) {
        return None;
    }
    Some(Link {
        text: &s[i + 1..close],
        url,
        end: url_end + 1,
    })
}

/// Whether an http(s) URL starts at `i`, at the start of a word.
fn url_starts(s: &str, i: usize) -> bool {
    let rest = &s[i..];
    let scheme = ["https://", "http://"].iter().find(|p| {
        rest.get(..p.len())
            .is_some_and(|r| r.eq_ignore_ascii_case(p))
    });
    let word_start = !s[..i]
        .chars()
        .next_back()
        .is_some_and(char::is_alphanumeric);
    scheme.is_some_and(|p| rest.len() > p.len()) && word_start
}

fn escape_attr(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
#[path = "format_tests.rs"]
mod tests;
