//! Slack's text in both directions. Incoming: entities (`<@U…>`,
//! `<#C…|name>`, `<!here>`, links) and the `&lt;` `&gt;` `&amp;` escapes are
//! decoded, and the bot's own mention removed, before the model sees the
//! text. Outgoing: the model's Markdown becomes mrkdwn with `&`, `<`, `>`
//! escaped, so nothing it writes turns into a mention or a link by accident,
//! and is split into parts within a section block's 3000 characters.

use crate::text::{is_fence, split_markdown};

/// Characters in one section block's text.
pub const MAX_SECTION: usize = 3000;

/// The text the model sees: entities decoded, the bot's own mention
/// (`<@{bot_user}>`) removed, surrounding whitespace trimmed.
pub fn decode_incoming(text: &str, bot_user: Option<&str>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('<') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find('>') else {
            out.push_str(&rest[open..]);
            rest = "";
            break;
        };
        // An entity holds no `<` (Slack escapes it as `&lt;`): a `<` before
        // this `>` is text, and the entity starts at the last one.
        if let Some(inner) = after[..close].rfind('<') {
            out.push_str(&rest[open..=open + inner]);
            rest = &after[inner..];
            continue;
        }
        out.push_str(&entity(&after[..close], bot_user));
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    let decoded = unescape(&out);
    // A removed mention leaves a double space behind.
    decoded
        .lines()
        .map(|l| {
            l.split(' ')
                .filter(|w| !w.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n")
        .trim()
        .to_owned()
}

/// One `<…>` entity as plain text.
fn entity(inner: &str, bot_user: Option<&str>) -> String {
    let (target, label) = match inner.split_once('|') {
        Some((t, l)) => (t, Some(l)),
        None => (inner, None),
    };
    if let Some(user) = target.strip_prefix('@') {
        if bot_user == Some(user) {
            return String::new();
        }
        return format!("@{}", label.unwrap_or(user));
    }
    if let Some(channel) = target.strip_prefix('#') {
        return format!("#{}", label.unwrap_or(channel));
    }
    if let Some(special) = target.strip_prefix('!') {
        // `<!here>`, `<!channel>`, `<!subteam^S123|@team>`, `<!date^…|text>`.
        return match label {
            Some(l) => l.to_owned(),
            None => format!("@{special}"),
        };
    }
    match label {
        Some(l) if l != target => format!("{l} ({target})"),
        _ => target.to_owned(),
    }
}

/// Slack's three escapes, decoded (`&amp;` last, so `&amp;lt;` stays `&lt;`).
fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// Escapes `&`, `<` and `>`, the only characters mrkdwn gives meaning to as
/// control sequences.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// One Markdown line as mrkdwn: escaped, with `**bold**` → `*bold*`,
/// `~~strike~~` → `~strike~`, `# heading` → `*heading*` and `[text](url)` →
/// `<url|text>`. Code lines are only escaped.
pub fn line_to_mrkdwn(line: &str, in_code: bool) -> String {
    if in_code || is_fence(line) {
        return escape(line);
    }
    let trimmed = line.trim_start();
    let hashes = trimmed.chars().take_while(|c| *c == '#').count();
    if (1..=6).contains(&hashes) && trimmed[hashes..].starts_with(' ') {
        let title = trimmed[hashes..].trim();
        return format!("*{}*", inline(title).replace("**", ""));
    }
    inline(line)
}

fn inline(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while !rest.is_empty() {
        // Inline code is left alone (escaped only).
        if let Some(after) = rest.strip_prefix('`')
            && let Some(end) = after.find('`')
        {
            out.push('`');
            out.push_str(&escape(&after[..end]));
            out.push('`');
            rest = &after[end + 1..];
            continue;
        }
        if let Some(after) = rest.strip_prefix('[')
            && let Some((text, url, tail)) = link(after)
        {
            out.push_str(&format!("<{}|{}>", escape(url), escape(text)));
            rest = tail;
            continue;
        }
        if let Some(after) = rest.strip_prefix("**") {
            out.push('*');
            rest = after;
            continue;
        }
        if let Some(after) = rest.strip_prefix("~~") {
            out.push('~');
            rest = after;
            continue;
        }
        let mut chars = rest.chars();
        if let Some(c) = chars.next() {
            match c {
                '&' => out.push_str("&amp;"),
                '<' => out.push_str("&lt;"),
                '>' => out.push_str("&gt;"),
                c => out.push(c),
            }
        }
        rest = chars.as_str();
    }
    out
}

/// `text](url)rest` → (text, url, rest) for an http(s) or mailto URL.
fn link(after_bracket: &str) -> Option<(&str, &str, &str)> {
    let close = after_bracket.find("](")?;
    let text = &after_bracket[..close];
    let tail = &after_bracket[close + 2..];
    let end = tail.find(')')?;
    let url = &tail[..end];
    let ok =
        (url.starts_with("http://") || url.starts_with("https://") || url.starts_with("mailto:"))
            && !url.contains(char::is_whitespace)
            && !url.contains('|')
            && !text.contains('|');
    ok.then(|| (text, url, &tail[end + 1..]))
}

/// A rich answer as mrkdwn parts, each within [`MAX_SECTION`] characters
/// (split first, on the source, measuring what each line becomes).
pub fn rich_parts(markdown: &str) -> Vec<String> {
    let measure = |line: &str, in_code: bool| line_to_mrkdwn(line, in_code).chars().count();
    split_markdown(markdown, MAX_SECTION, &measure)
        .iter()
        .map(|chunk| to_mrkdwn(chunk))
        .collect()
}

/// A plain notice as escaped parts within [`MAX_SECTION`] characters.
pub fn plain_parts(text: &str) -> Vec<String> {
    let measure = |line: &str, _in_code: bool| escape(line).chars().count();
    split_markdown(text, MAX_SECTION, &measure)
        .iter()
        .map(|chunk| escape(chunk))
        .collect()
}

/// A chunk of Markdown as mrkdwn, line by line, knowing where code is.
fn to_mrkdwn(chunk: &str) -> String {
    let mut in_code = false;
    chunk
        .lines()
        .map(|line| {
            let out = line_to_mrkdwn(line, in_code);
            if is_fence(line) {
                in_code = !in_code;
            }
            out
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incoming_entities_are_decoded_and_the_bot_mention_removed() {
        assert_eq!(
            decode_incoming("<@UBOT> is 1 &lt; 2 &amp;&amp; 3 &gt; 2?", Some("UBOT")),
            "is 1 < 2 && 3 > 2?"
        );
        assert_eq!(
            decode_incoming("ask <@U123> in <#C42|general> and <#C7>", Some("UBOT")),
            "ask @U123 in #general and #C7"
        );
        assert_eq!(
            decode_incoming(
                "hey <@UBOT|hearth>, see <https://x.io|x.io> <https://a.b/c|docs> <!here>",
                Some("UBOT")
            ),
            "hey , see x.io (https://x.io) docs (https://a.b/c) @here"
        );
        assert_eq!(decode_incoming("a &amp;lt; b", None), "a &lt; b");
        assert_eq!(decode_incoming("unclosed < here", None), "unclosed < here");
        assert_eq!(
            decode_incoming("two\n<@UBOT>  lines ", Some("UBOT")),
            "two\nlines"
        );
        // An entity holds no `<` (Slack escapes it): one before the `>` is
        // text, and the entity starts at the last one.
        assert_eq!(
            decode_incoming("<https://x¡io<@UBOT>> hi", Some("UBOT")),
            "<https://x¡io> hi"
        );
        assert_eq!(decode_incoming("a < b <@U9> c", None), "a < b @U9 c");
    }

    #[test]
    fn outgoing_text_is_escaped_mrkdwn() {
        assert_eq!(escape("a < b && c > d"), "a &lt; b &amp;&amp; c &gt; d");
        assert_eq!(
            line_to_mrkdwn(
                "**Bold** and ~~gone~~ and [docs](https://x.io/a?b=1&c=2) <@U1>",
                false
            ),
            "*Bold* and ~gone~ and <https://x.io/a?b=1&amp;c=2|docs> &lt;@U1&gt;"
        );
        assert_eq!(line_to_mrkdwn("## Title", false), "*Title*");
        assert_eq!(line_to_mrkdwn("`a<b` **x**", false), "`a&lt;b` *x*");
        assert_eq!(
            line_to_mrkdwn("if a < b && **c**", true),
            "if a &lt; b &amp;&amp; **c**"
        );
        assert_eq!(
            rich_parts("text\n```rust\nlet x = a < b;\n```"),
            vec!["text\n```rust\nlet x = a &lt; b;\n```".to_owned()]
        );
    }

    #[test]
    fn parts_stay_within_a_section_after_escaping() {
        // Every `<` grows to four characters when escaped: split on that.
        let text = "<".repeat(2000) + "\n\n" + &"&".repeat(2000);
        let parts = plain_parts(&text);
        assert!(parts.len() >= 3, "{}", parts.len());
        for p in &parts {
            assert!(p.chars().count() <= MAX_SECTION, "{}", p.chars().count());
        }
        let rich = rich_parts(&format!("```\n{}\n```", "x < y\n".repeat(1200)));
        assert!(rich.len() > 1);
        for p in &rich {
            assert!(p.chars().count() <= MAX_SECTION);
            assert!(
                p.starts_with("```") && p.ends_with("```"),
                "fences balanced"
            );
        }
    }

    proptest::proptest! {
        #[test]
        fn any_text_decodes_and_renders_within_limits(
            text in "([<>&@#!|*~`\\[\\]()a-z \n]|&lt;|&gt;|&amp;|<@U1>|<https://x.io|x>|```|é){0,400}"
        ) {
            let decoded = decode_incoming(&text, Some("U1"));
            // Total (no panic on any input), and the bot's mention never survives
            // as an entity: whatever remains of one came from escaped text.
            proptest::prop_assert_eq!(decoded.trim(), decoded.as_str());
            if !text.contains('&') {
                proptest::prop_assert!(!decoded.contains("<@U1>"));
            }
            for part in rich_parts(&text).iter().chain(plain_parts(&text).iter()) {
                proptest::prop_assert!(part.chars().count() <= MAX_SECTION);
            }
            for part in plain_parts(&text) {
                proptest::prop_assert!(!part.contains('<') && !part.contains('>'));
            }
        }

        #[test]
        fn long_text_splits_within_a_section(n in 1usize..3, line in "[a-z<&> ]{1,200}") {
            let text = format!("{line}\n").repeat(40 * n);
            for part in rich_parts(&text) {
                proptest::prop_assert!(part.chars().count() <= MAX_SECTION);
            }
        }
    }
}
