//! Telegram's HTML parse mode, read the way the Bot API reads it: the tags
//! and entities of the "HTML style" section of the reference, proper
//! nesting, and the text that remains once they are parsed (which is what
//! the 4096 limit counts, in UTF-16 units).
//!
//! Stricter than Telegram in two places, on purpose: a bare `&` that starts
//! no supported entity is refused (Telegram shows it literally, but it is
//! almost always an escaping bug), and so is any tag inside `code`/`pre`
//! other than `<pre><code class="language-…">`, and a link inside a link
//! or a code span inside a link (Telegram drops those entities silently).

/// One formatting entity, as Telegram would report it in `entities`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entity {
    /// The Bot API entity type (`bold`, `text_link`, `pre`, …).
    pub kind: &'static str,
    /// Start, in UTF-16 units of the parsed text.
    pub offset: usize,
    /// Length, in UTF-16 units.
    pub length: usize,
    /// A `text_link`'s URL.
    pub url: Option<String>,
    /// A `pre` block's language.
    pub language: Option<String>,
}

/// A message text after entity parsing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsed {
    /// The visible text.
    pub text: String,
    /// The entities, in the order their tags close.
    pub entities: Vec<Entity>,
}

impl Parsed {
    /// The text's length as Telegram counts it.
    pub fn utf16_len(&self) -> usize {
        self.text.encode_utf16().count()
    }
}

/// An open tag.
struct Open {
    name: String,
    kind: &'static str,
    offset: usize,
    url: Option<String>,
    language: Option<String>,
}

/// Parses `html` as Telegram's parse_mode "HTML". The error is what
/// Telegram puts after "Bad Request: can't parse entities: ".
pub fn parse_html(html: &str) -> Result<Parsed, String> {
    let mut out = Parsed::default();
    let mut units = 0usize;
    let mut stack: Vec<Open> = Vec::new();
    let mut i = 0usize;
    while let Some(c) = html[i..].chars().next() {
        match c {
            '<' if html[i + 1..].starts_with('/') => {
                let end = html[i..]
                    .find('>')
                    .map(|e| i + e)
                    .ok_or_else(|| format!("Unclosed end tag at byte offset {i}"))?;
                let name = html[i + 2..end].trim().to_ascii_lowercase();
                let Some(open) = stack.pop() else {
                    return Err(format!("Unexpected end tag at byte offset {i}"));
                };
                if open.name != name {
                    return Err(format!(
                        "Unmatched end tag at byte offset {i}, expected \"</{}>\", found \"</{name}>\"",
                        open.name
                    ));
                }
                close(&mut out, &mut stack, open, units);
                i = end + 1;
            }
            '<' => {
                let (open, end) = start_tag(html, i, &stack, units)?;
                stack.push(open);
                i = end;
            }
            '&' => {
                let (decoded, len) = entity(&html[i..])
                    .ok_or_else(|| format!("Unsupported HTML entity at byte offset {i}"))?;
                out.text.push(decoded);
                units += decoded.len_utf16();
                i += len;
            }
            c => {
                out.text.push(c);
                units += c.len_utf16();
                i += c.len_utf8();
            }
        }
    }
    if let Some(open) = stack.last() {
        return Err(format!(
            "Can't find end tag corresponding to start tag \"{}\"",
            open.name
        ));
    }
    Ok(out)
}

/// Ends an entity; a `<code>` directly inside `<pre>` gives its language
/// to the `pre` instead of being one itself.
fn close(out: &mut Parsed, stack: &mut [Open], open: Open, units: usize) {
    if open.kind == "code"
        && let Some(pre) = stack.last_mut().filter(|p| p.kind == "pre")
    {
        pre.language = open.language;
        return;
    }
    if units > open.offset {
        out.entities.push(Entity {
            kind: open.kind,
            offset: open.offset,
            length: units - open.offset,
            url: open.url,
            language: open.language,
        });
    }
}

/// Reads the start tag at `i`; returns it and the byte after its `>`.
fn start_tag(html: &str, i: usize, stack: &[Open], units: usize) -> Result<(Open, usize), String> {
    let bytes = html.as_bytes();
    let name_end = html[i + 1..]
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .map_or(html.len(), |e| i + 1 + e);
    let name = html[i + 1..name_end].to_ascii_lowercase();
    const KNOWN: [&str; 15] = [
        "b",
        "strong",
        "i",
        "em",
        "u",
        "ins",
        "s",
        "strike",
        "del",
        "tg-spoiler",
        "span",
        "a",
        "code",
        "pre",
        "blockquote",
    ];
    let unsupported = || format!("Unsupported start tag \"{name}\" at byte offset {i}");
    if !KNOWN.contains(&name.as_str()) {
        return Err(unsupported());
    }
    let mut attrs: Vec<(String, String)> = Vec::new();
    let mut j = name_end;
    let end = loop {
        while bytes.get(j).is_some_and(u8::is_ascii_whitespace) {
            j += 1;
        }
        match bytes.get(j) {
            None => return Err(format!("Unclosed start tag at byte offset {i}")),
            Some(b'>') => break j + 1,
            Some(_) => {}
        }
        let attr_end = html[j..]
            .find(|c: char| c.is_ascii_whitespace() || c == '=' || c == '>')
            .map_or(html.len(), |e| j + e);
        let attr = html[j..attr_end].to_ascii_lowercase();
        if attr.is_empty() || attr.contains(['/', '"', '\'', '<']) {
            return Err(format!(
                "Empty attribute name in the tag \"{name}\" at byte offset {j}"
            ));
        }
        j = attr_end;
        let mut value = String::new();
        if bytes.get(j) == Some(&b'=') {
            j += 1;
            let (raw, next) = match bytes.get(j) {
                Some(&q @ (b'"' | b'\'')) => {
                    let close = html[j + 1..]
                        .find(char::from(q))
                        .map(|e| j + 1 + e)
                        .ok_or_else(|| format!("Unclosed start tag at byte offset {i}"))?;
                    (&html[j + 1..close], close + 1)
                }
                _ => {
                    let e = html[j..]
                        .find(|c: char| c.is_ascii_whitespace() || c == '>')
                        .map_or(html.len(), |e| j + e);
                    (&html[j..e], e)
                }
            };
            value = decode_attr(raw).ok_or_else(|| {
                format!("Unsupported HTML entity in attribute at byte offset {j}")
            })?;
            j = next;
        }
        attrs.push((attr, value));
    };
    let attr = |key: &str| {
        attrs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };

    let parent = stack.last().map(|o| o.kind);
    if let Some(inside) = parent.filter(|p| *p == "code" || *p == "pre")
        && !(inside == "pre" && name == "code")
    {
        return Err(format!(
            "Tag \"{name}\" at byte offset {i} is inside \"{inside}\", which can contain no entity"
        ));
    }
    let (kind, url, language) = match name.as_str() {
        "b" | "strong" => ("bold", None, None),
        "i" | "em" => ("italic", None, None),
        "u" | "ins" => ("underline", None, None),
        "s" | "strike" | "del" => ("strikethrough", None, None),
        "tg-spoiler" => ("spoiler", None, None),
        "span" if attr("class") == Some("tg-spoiler") => ("spoiler", None, None),
        "a" => {
            let href = attr("href").filter(|h| !h.trim().is_empty());
            let Some(href) = href else {
                return Err(format!("Tag \"a\" at byte offset {i} has no href"));
            };
            if stack.iter().any(|o| o.kind == "text_link") {
                return Err(format!(
                    "Tag \"a\" at byte offset {i} is inside another link"
                ));
            }
            ("text_link", Some(href.to_owned()), None)
        }
        "code" => {
            if stack.iter().any(|o| o.kind == "text_link") {
                return Err(format!("Tag \"code\" at byte offset {i} is inside a link"));
            }
            let language = attr("class").and_then(|c| c.strip_prefix("language-"));
            if language.is_some() && parent != Some("pre") {
                // Telegram: "Programming language can't be specified for
                // standalone code tags" (it ignores the class).
                return Err(format!(
                    "Tag \"code\" at byte offset {i} has a language outside \"pre\""
                ));
            }
            ("code", None, language.map(str::to_owned))
        }
        "pre" => ("pre", None, None),
        "blockquote" => {
            if stack.iter().any(|o| o.kind.ends_with("blockquote")) {
                return Err(format!("Tag \"blockquote\" at byte offset {i} is nested"));
            }
            let kind = if attr("expandable").is_some() {
                "expandable_blockquote"
            } else {
                "blockquote"
            };
            (kind, None, None)
        }
        _ => return Err(unsupported()),
    };
    let open = Open {
        name,
        kind,
        offset: units,
        url,
        language,
    };
    Ok((open, end))
}

/// Decodes the entity at the start of `s`: the named ones Telegram
/// supports and numeric ones. Returns the char and the bytes used.
fn entity(s: &str) -> Option<(char, usize)> {
    let end = s.find(';')?;
    let body = &s[1..end];
    let c = match body {
        "lt" => '<',
        "gt" => '>',
        "amp" => '&',
        "quot" => '"',
        _ => {
            let num = body.strip_prefix('#')?;
            let code = match num.strip_prefix(['x', 'X']) {
                Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                None => num.parse::<u32>().ok()?,
            };
            char::from_u32(code).filter(|&c| c != '\0')?
        }
    };
    Some((c, end + 1))
}

fn decode_attr(raw: &str) -> Option<String> {
    let mut out = String::with_capacity(raw.len());
    let mut i = 0;
    while let Some(c) = raw[i..].chars().next() {
        if c == '&' {
            let (decoded, len) = entity(&raw[i..])?;
            out.push(decoded);
            i += len;
        } else {
            out.push(c);
            i += c.len_utf8();
        }
    }
    Some(out)
}
