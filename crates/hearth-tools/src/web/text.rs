//! HTML → readable text for the model.
//!
//! A small tokenizer rather than a parser: it never fails, needs no new crate,
//! and is linear in the input. It drops what a reader never sees (scripts,
//! styles, the head), turns block elements into line breaks, decodes common
//! entities and collapses whitespace. Malformed markup degrades to text.

/// Elements whose content is raw text up to the matching end tag; the
/// content is dropped (a `<` inside a script is not a tag).
const RAW_DROP: &[&str] = &["script", "style", "noscript", "textarea", "xmp", "iframe"];

/// Elements whose whole subtree is dropped; nesting is counted.
const SUBTREE_DROP: &[&str] = &["head", "template", "svg", "math", "object", "select"];

/// Elements that start and end a line.
const BLOCK: &[&str] = &[
    "address",
    "article",
    "aside",
    "blockquote",
    "body",
    "br",
    "caption",
    "center",
    "dd",
    "details",
    "dialog",
    "div",
    "dl",
    "dt",
    "fieldset",
    "figcaption",
    "figure",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hr",
    "html",
    "legend",
    "li",
    "main",
    "nav",
    "ol",
    "p",
    "pre",
    "section",
    "summary",
    "table",
    "tbody",
    "tfoot",
    "thead",
    "tr",
    "ul",
];

/// Blocks that also leave a blank line after them.
const PARAGRAPH: &[&str] = &[
    "p",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "blockquote",
    "pre",
    "table",
    "ul",
    "ol",
    "dl",
    "section",
    "article",
    "header",
    "footer",
    "figure",
];

/// The readable text of an HTML document and its `<title>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extracted {
    /// The first `<title>`, decoded and collapsed; `None` when absent/empty.
    pub title: Option<String>,
    /// The visible text.
    pub text: String,
}

/// Reduces HTML to readable text and extracts the title.
pub fn html_to_text(html: &str) -> Extracted {
    let mut out = Output::default();
    let mut title: Option<String> = None;
    let mut drop_depth: Vec<String> = Vec::new();
    let mut pre_depth = 0usize;
    let mut rest = html;

    while !rest.is_empty() {
        let Some(lt) = rest.find('<') else {
            if drop_depth.is_empty() {
                out.text(&decode_entities(rest), pre_depth > 0);
            }
            break;
        };
        if lt > 0 && drop_depth.is_empty() {
            out.text(&decode_entities(&rest[..lt]), pre_depth > 0);
        }
        rest = &rest[lt..];

        // Comments, doctype, CDATA, processing instructions.
        if let Some(after) = rest.strip_prefix("<!--") {
            rest = after.find("-->").map_or("", |i| &after[i + 3..]);
            continue;
        }
        if rest.starts_with("<!") || rest.starts_with("<?") {
            rest = rest.find('>').map_or("", |i| &rest[i + 1..]);
            continue;
        }

        let Some(tag) = parse_tag(rest) else {
            // A lone '<' (e.g. "a < b") is text.
            if drop_depth.is_empty() {
                out.text("<", pre_depth > 0);
            }
            rest = &rest[1..];
            continue;
        };
        rest = &rest[tag.len..];
        let name = tag.name.as_str();

        if !tag.closing && name == "title" {
            let (content, after) = raw_text_until(rest, "title");
            if title.is_none() {
                let t = collapse(&decode_entities(content));
                if !t.is_empty() {
                    title = Some(t);
                }
            }
            rest = after;
            continue;
        }
        if !tag.closing && RAW_DROP.contains(&name) {
            rest = raw_text_until(rest, name).1;
            continue;
        }
        if SUBTREE_DROP.contains(&name) {
            if tag.closing {
                if let Some(pos) = drop_depth.iter().rposition(|n| n == name) {
                    drop_depth.truncate(pos);
                }
            } else if !tag.self_closing {
                drop_depth.push(name.to_owned());
            }
            continue;
        }
        // <body> always ends the head, even when </head> is missing.
        if name == "body" && !tag.closing {
            drop_depth.retain(|n| n != "head");
        }
        if !drop_depth.is_empty() {
            continue;
        }
        if name == "pre" {
            if tag.closing {
                pre_depth = pre_depth.saturating_sub(1);
            } else {
                pre_depth += 1;
            }
        }
        if BLOCK.contains(&name) {
            if PARAGRAPH.contains(&name) {
                out.blank_line();
            } else {
                out.newline();
            }
            if name == "li" && !tag.closing {
                out.text("- ", true);
            }
        } else if matches!(name, "td" | "th") {
            out.text(" ", false);
        } else if name == "img"
            && !tag.closing
            && let Some(alt) = tag.alt.as_deref().map(collapse).filter(|a| !a.is_empty())
        {
            out.text(&format!("[{alt}]"), false);
        }
    }
    Extracted {
        title,
        text: out.finish(),
    }
}

/// One start or end tag.
struct Tag {
    /// Lower-case element name.
    name: String,
    /// `</name>`.
    closing: bool,
    /// `<name ... />`.
    self_closing: bool,
    /// The `alt` attribute, for images.
    alt: Option<String>,
    /// Bytes consumed, including `<` and `>`.
    len: usize,
}

/// Parses a tag at the start of `s` (which begins with `<`). `None` when
/// this `<` does not start a tag.
fn parse_tag(s: &str) -> Option<Tag> {
    let bytes = s.as_bytes();
    let mut i = 1;
    let closing = bytes.get(i) == Some(&b'/');
    if closing {
        i += 1;
    }
    if !bytes.get(i).is_some_and(u8::is_ascii_alphabetic) {
        return None;
    }
    let start = i;
    while bytes
        .get(i)
        .is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b':' | b'_'))
    {
        i += 1;
    }
    let name = s[start..i].to_ascii_lowercase();
    // Attributes: skip to the closing '>' while honouring quotes, so a '>'
    // inside an attribute value does not end the tag.
    let attrs_start = i;
    let mut quote: Option<u8> = None;
    while let Some(&b) = bytes.get(i) {
        match quote {
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None if b == b'"' || b == b'\'' => quote = Some(b),
            None if b == b'>' => break,
            None => {}
        }
        i += 1;
    }
    // An unterminated tag swallows the rest of the document, as browsers do.
    let attrs = &s[attrs_start..i.min(s.len())];
    let self_closing = attrs.trim_end().ends_with('/');
    let alt = if name == "img" {
        attribute(attrs, "alt").map(|a| decode_entities(&a))
    } else {
        None
    };
    Some(Tag {
        name,
        closing,
        self_closing,
        alt,
        len: (i + 1).min(s.len()),
    })
}

/// The value of attribute `want` in an attribute string.
fn attribute(attrs: &str, want: &str) -> Option<String> {
    let bytes = attrs.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        while i < bytes.len() && (bytes[i].is_ascii_whitespace() || bytes[i] == b'/') {
            i += 1;
        }
        let start = i;
        while i < bytes.len() && !bytes[i].is_ascii_whitespace() && !matches!(bytes[i], b'=' | b'/')
        {
            i += 1;
        }
        let name = &attrs[start..i];
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        let mut value = None;
        if bytes.get(i) == Some(&b'=') {
            i += 1;
            while i < bytes.len() && bytes[i].is_ascii_whitespace() {
                i += 1;
            }
            match bytes.get(i) {
                Some(&q @ (b'"' | b'\'')) => {
                    let vstart = i + 1;
                    let end = attrs[vstart..]
                        .find(q as char)
                        .map_or(attrs.len(), |e| vstart + e);
                    value = Some(&attrs[vstart..end]);
                    i = end + 1;
                }
                _ => {
                    let vstart = i;
                    while i < bytes.len() && !bytes[i].is_ascii_whitespace() {
                        i += 1;
                    }
                    value = Some(&attrs[vstart..i]);
                }
            }
        }
        if name.eq_ignore_ascii_case(want) {
            return value.map(str::to_owned);
        }
        if i == start {
            i += 1;
        }
    }
    None
}

/// Splits `s` at the end tag `</name` (case-insensitive): the raw content
/// before it and the rest after its `>`. Without an end tag, everything is
/// content.
fn raw_text_until<'a>(s: &'a str, name: &str) -> (&'a str, &'a str) {
    let bytes = s.as_bytes();
    let needle = name.as_bytes();
    let mut i = 0;
    while let Some(off) = s[i..].find("</") {
        let at = i + off;
        let after = at + 2;
        let matches_name = bytes
            .get(after..after + needle.len())
            .is_some_and(|n| n.eq_ignore_ascii_case(needle));
        let boundary = bytes
            .get(after + needle.len())
            .is_none_or(|b| b.is_ascii_whitespace() || matches!(b, b'>' | b'/'));
        if matches_name && boundary {
            let end = s[after..].find('>').map_or(s.len(), |e| after + e + 1);
            return (&s[..at], &s[end..]);
        }
        i = after;
    }
    (s, "")
}

/// Decodes character references: numeric ones and the common named ones.
/// Unknown names stay as written.
pub fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        match decode_one(rest) {
            Some((c, used)) => {
                out.push(c);
                rest = &rest[used..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Decodes one reference at the start of `s` (which begins with `&`):
/// the character and the bytes used.
fn decode_one(s: &str) -> Option<(char, usize)> {
    let body = &s[1..];
    if let Some(num) = body.strip_prefix('#') {
        let (digits, radix, prefix) = match num.strip_prefix(['x', 'X']) {
            Some(hex) => (hex, 16, "&#x".len()),
            None => (num, 10, "&#".len()),
        };
        let n = digits.chars().take_while(|c| c.is_digit(radix)).count();
        if n == 0 {
            return None;
        }
        // NUL, surrogates and out-of-range values become U+FFFD, as in HTML;
        // more than 8 digits is out of range whatever they are.
        let code = if n > 8 {
            None
        } else {
            u32::from_str_radix(&digits[..n], radix).ok()
        };
        let c = code
            .filter(|&c| c != 0)
            .and_then(char::from_u32)
            .unwrap_or('\u{FFFD}');
        let semi = usize::from(digits[n..].starts_with(';'));
        return Some((c, prefix + n + semi));
    }
    let name_len = body
        .bytes()
        .take(32)
        .take_while(u8::is_ascii_alphanumeric)
        .count();
    if name_len == 0 || !body[name_len..].starts_with(';') {
        return None;
    }
    let c = named(&body[..name_len])?;
    Some((c, 1 + name_len + 1))
}

/// The common named references; the full HTML table is 2,000 entries.
fn named(name: &str) -> Option<char> {
    Some(match name {
        "amp" | "AMP" => '&',
        "lt" | "LT" => '<',
        "gt" | "GT" => '>',
        "quot" | "QUOT" => '"',
        "apos" => '\'',
        // Non-breaking space collapses like any other space in the output.
        "nbsp" => ' ',
        "ensp" | "emsp" | "thinsp" => ' ',
        "shy" | "zwj" | "zwnj" => '\u{200B}',
        "copy" => '©',
        "reg" => '®',
        "trade" => '™',
        "hellip" => '…',
        "mdash" => '—',
        "ndash" => '–',
        "minus" => '−',
        "lsquo" => '‘',
        "rsquo" => '’',
        "sbquo" => '‚',
        "ldquo" => '“',
        "rdquo" => '”',
        "bdquo" => '„',
        "laquo" => '«',
        "raquo" => '»',
        "lsaquo" => '‹',
        "rsaquo" => '›',
        "bull" => '•',
        "middot" => '·',
        "deg" => '°',
        "plusmn" => '±',
        "times" => '×',
        "divide" => '÷',
        "frac12" => '½',
        "frac14" => '¼',
        "frac34" => '¾',
        "euro" => '€',
        "pound" => '£',
        "yen" => '¥',
        "cent" => '¢',
        "sect" => '§',
        "para" => '¶',
        "dagger" => '†',
        "Dagger" => '‡',
        "larr" => '←',
        "rarr" => '→',
        "uarr" => '↑',
        "darr" => '↓',
        "harr" => '↔',
        "iexcl" => '¡',
        "iquest" => '¿',
        "eacute" => 'é',
        "egrave" => 'è',
        "ecirc" => 'ê',
        "aacute" => 'á',
        "agrave" => 'à',
        "acirc" => 'â',
        "auml" => 'ä',
        "ouml" => 'ö',
        "uuml" => 'ü',
        "Auml" => 'Ä',
        "Ouml" => 'Ö',
        "Uuml" => 'Ü',
        "szlig" => 'ß',
        "ccedil" => 'ç',
        "ntilde" => 'ñ',
        "oacute" => 'ó',
        "iacute" => 'í',
        "uacute" => 'ú',
        _ => return None,
    })
}

/// Collapses all whitespace runs to one space and trims.
fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Builds the text: spaces collapse, at most one blank line in a row, no
/// leading or trailing whitespace on lines.
#[derive(Default)]
struct Output {
    buf: String,
    /// A space is owed before the next visible character.
    space: bool,
    /// Line breaks owed before the next visible character (0, 1 or 2).
    breaks: u8,
}

impl Output {
    /// Appends text; whitespace collapses unless it is a newline in `<pre>`.
    fn text(&mut self, s: &str, pre: bool) {
        for c in s.chars() {
            if c == '\u{200B}' {
                continue;
            }
            if pre && c == '\n' {
                self.breaks = self.breaks.max(1);
                self.space = false;
            } else if c.is_whitespace() {
                self.space = true;
            } else {
                self.flush();
                self.buf.push(c);
            }
        }
    }

    /// Emits the owed separator before a visible character.
    fn flush(&mut self) {
        if self.buf.is_empty() {
            // Nothing before: leading breaks and spaces are dropped.
        } else if self.breaks > 0 {
            for _ in 0..self.breaks {
                self.buf.push('\n');
            }
        } else if self.space {
            self.buf.push(' ');
        }
        self.breaks = 0;
        self.space = false;
    }

    /// Owes a line break.
    fn newline(&mut self) {
        self.breaks = self.breaks.max(1);
    }

    /// Owes a blank line.
    fn blank_line(&mut self) {
        self.breaks = 2;
    }

    /// The text built.
    fn finish(self) -> String {
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_scripts_styles_head_and_keeps_blocks() {
        let html = r#"<!DOCTYPE html><html><head><title> A &amp; B </title>
            <style>p { color: red }</style><meta charset="utf-8"></head>
            <body><!-- hidden --><h1>Hello</h1><p>One<br>two &lt;3&gt; &#233;&#x20AC;</p>
            <script>if (a < b) { document.write("</p>nope") }</script>
            <noscript>enable js</noscript>
            <ul><li>x</li><li>y</li></ul><div title="a > b">after</div></body></html>"#;
        let e = html_to_text(html);
        assert_eq!(e.title.as_deref(), Some("A & B"));
        assert_eq!(e.text, "Hello\n\nOne\ntwo <3> é€\n\n- x\n- y\n\nafter");
    }

    #[test]
    fn survives_malformed_input() {
        for s in [
            "<",
            "<<<>>>",
            "a < b",
            "<p",
            "<script>never closed",
            "&#xFFFFFFFFFF;",
            "&#0;",
            "&unknown;",
            "<!--",
            "</",
            "<a href='x>",
            "&",
            "<title>t",
            "é<b>ü</b>",
        ] {
            let _ = html_to_text(s);
        }
        assert_eq!(html_to_text("a < b &amp c").text, "a < b &amp c");
        assert_eq!(html_to_text("&#0;&#xD800;").text, "\u{FFFD}\u{FFFD}");
        assert_eq!(html_to_text("x<b>y</b> <i>z</i>").text, "xy z");
    }

    #[test]
    fn head_without_end_tag_ends_at_body() {
        let e = html_to_text("<html><head><title>T</title><body>visible");
        assert_eq!(e.text, "visible");
        assert_eq!(e.title.as_deref(), Some("T"));
    }

    #[test]
    fn images_show_their_alt_text_and_tables_stay_readable() {
        let e = html_to_text(
            "<p>See <img src=x alt=\"a &quot;cat&quot;\"> here</p>\
             <table><tr><td>a</td><td>b</td></tr><tr><td>c</td></tr></table>",
        );
        assert_eq!(e.text, "See [a \"cat\"] here\n\na b\nc");
    }

    #[test]
    fn pre_keeps_line_breaks() {
        assert_eq!(html_to_text("<pre>a\nb</pre>").text, "a\nb");
    }
}
