//! Tests of the Markdown to Telegram HTML conversion and of the parts'
//! lengths, checked by a small independent reading of the HTML.

use super::*;
use hearth_testkit::fake_telegram::parse_html;
use proptest::prelude::*;

/// Reads Telegram HTML the way these tests need: checks that every tag is
/// one Telegram accepts and that they nest, and returns the visible text.
fn visible_text(html: &str) -> String {
    const TAGS: [&str; 7] = ["b", "i", "s", "code", "pre", "a", "blockquote"];
    let mut stack: Vec<String> = Vec::new();
    let mut text = String::new();
    let mut rest = html;
    while let Some(c) = rest.chars().next() {
        if c == '<' {
            let end = rest.find('>').expect("a tag is closed");
            let tag = &rest[1..end];
            if let Some(name) = tag.strip_prefix('/') {
                assert_eq!(stack.pop().as_deref(), Some(name), "misnested in {html:?}");
            } else {
                let name = tag.split(' ').next().unwrap_or_default();
                assert!(TAGS.contains(&name), "tag {name:?} in {html:?}");
                if stack.iter().any(|t| t == "code" || t == "pre") {
                    assert!(name == "code" && stack.last().map(String::as_str) == Some("pre"));
                }
                stack.push(name.to_owned());
            }
            rest = &rest[end + 1..];
        } else if c == '&' {
            let end = rest.find(';').expect("an entity is closed");
            text.push(match &rest[..=end] {
                "&amp;" => '&',
                "&lt;" => '<',
                "&gt;" => '>',
                "&quot;" => '"',
                other => panic!("entity {other:?} in {html:?}"),
            });
            rest = &rest[end + 1..];
        } else {
            assert!(c != '>', "bare > in {html:?}");
            text.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    assert!(stack.is_empty(), "unclosed {stack:?} in {html:?}");
    text
}

fn utf16(s: &str) -> usize {
    s.encode_utf16().count()
}

#[test]
fn escapes_everywhere() {
    assert_eq!(to_html("a < b && c > d"), "a &lt; b &amp;&amp; c &gt; d");
    assert_eq!(
        to_html("```rust\nif a < b && c > d {}\n```"),
        "<pre><code class=\"language-rust\">if a &lt; b &amp;&amp; c &gt; d {}</code></pre>"
    );
    assert_eq!(to_html("`<br>`"), "<code>&lt;br&gt;</code>");
}

#[test]
fn fences_become_pre_blocks() {
    assert_eq!(to_html("```\nplain\n```"), "<pre>plain</pre>");
    assert_eq!(
        to_html("before\n```py title=x\nprint(1)\n\nprint(2)\n```\nafter"),
        "before\n<pre><code class=\"language-py\">print(1)\n\nprint(2)</code></pre>\nafter"
    );
    // An unclosed fence runs to the end; an empty block shows nothing.
    assert_eq!(to_html("```\ncode"), "<pre>code</pre>");
    assert_eq!(to_html("a\n```\n```\nb"), "a\n\nb");
    // Markup inside code stays literal.
    assert_eq!(to_html("```\n**x** _y_\n```"), "<pre>**x** _y_</pre>");
}

#[test]
fn inline_styles() {
    assert_eq!(
        to_html("**b** __b__ *i* _i_ ~~s~~ ***bi***"),
        "<b>b</b> <b>b</b> <i>i</i> <i>i</i> <s>s</s> <b><i>bi</i></b>"
    );
    assert_eq!(to_html("*a **b** c*"), "<i>a <b>b</b> c</i>");
    assert_eq!(to_html("`**not bold**`"), "<code>**not bold**</code>");
    assert_eq!(
        to_html("**see `x < y`**"),
        "<b>see <code>x &lt; y</code></b>"
    );
    assert_eq!(to_html(r"\*not italic\*"), "*not italic*");
}

#[test]
fn underscores_inside_words_stay() {
    assert_eq!(
        to_html("call snake_case_name or _this_"),
        "call snake_case_name or <i>this</i>"
    );
    assert_eq!(to_html("__init__ and a__b__c"), "<b>init</b> and a__b__c");
    assert_eq!(
        to_html("see https://x.com/a_b_/*c* now"),
        "see https://x.com/a_b_/*c* now"
    );
}

#[test]
fn links() {
    assert_eq!(
        to_html("[the *docs*](https://example.com/a?b=1&c=\"2\")"),
        "<a href=\"https://example.com/a?b=1&amp;c=&quot;2&quot;\">the <i>docs</i></a>"
    );
    assert_eq!(
        to_html("[`code`](https://x.y/(z))"),
        "<a href=\"https://x.y/(z)\">code</a>"
    );
    assert_eq!(
        to_html("[](https://x.y)"),
        "<a href=\"https://x.y\">https://x.y</a>"
    );
    // Only http(s) URLs make links.
    assert_eq!(
        to_html("[x](javascript:alert(1))"),
        "[x](javascript:alert(1))"
    );
    assert_eq!(to_html("[x](tg://user?id=1)"), "[x](tg://user?id=1)");
    assert_eq!(to_html("[a b](https://x.y z)"), "[a b](https://x.y z)");
}

#[test]
fn headings_quotes_and_bullets() {
    assert_eq!(
        to_html("# Title\n> quoted *x*\n>\n> more\ntext"),
        "<b>Title</b>\n<blockquote>quoted <i>x</i>\n\nmore</blockquote>\ntext"
    );
    assert_eq!(to_html("### C# tips ##"), "<b>C# tips</b>");
    assert_eq!(to_html("#hashtag"), "#hashtag");
    assert_eq!(to_html("- one\n  * two"), "• one\n  • two");
}

#[test]
fn unmatched_markers_stay_literal() {
    let text = "2 * 3 = 6, a ** b, ~x~, `open, [no](ftp://x), <tag>, a_b, ** ";
    assert_eq!(
        to_html(text),
        "2 * 3 = 6, a ** b, ~x~, `open, [no](ftp://x), &lt;tag&gt;, a_b, ** "
    );
}

#[test]
fn visible_len_counts_what_telegram_counts() {
    assert_eq!(
        visible_len("**bold** & <tag>", false),
        utf16("bold & <tag>")
    );
    assert_eq!(
        visible_len("[docs](https://example.com/long/path)", false),
        4
    );
    assert_eq!(visible_len("# Title", false), 5);
    assert_eq!(visible_len("> quoted", false), 6);
    assert_eq!(visible_len("😀", false), 2);
    assert_eq!(visible_len("```rust", false), 0);
    assert_eq!(visible_len("```", true), 0);
    assert_eq!(visible_len("a < **b**", true), 9);
}

#[test]
fn escaping_never_pushes_a_part_over() {
    let text = "<&>".repeat(3000);
    let parts = render_parts(&text);
    assert!(parts.len() >= 3, "{}", parts.len());
    let mut seen = String::new();
    for part in &parts {
        let visible = visible_text(part);
        assert!(utf16(&visible) <= MESSAGE_LIMIT, "{}", utf16(&visible));
        seen.push_str(&visible);
    }
    assert_eq!(seen, text);
    // The first part is full by the visible count, far over it in HTML.
    assert_eq!(
        utf16(&visible_text(&parts[0])),
        MESSAGE_LIMIT,
        "{:?}",
        parts
            .iter()
            .map(|p| utf16(&visible_text(p)))
            .collect::<Vec<_>>()
    );
    assert!(parts[0].len() > 3 * MESSAGE_LIMIT);
}

#[test]
fn astral_characters_count_twice() {
    let text = "😀".repeat(3000);
    let parts = render_parts(&text);
    assert_eq!(parts.len(), 2);
    assert_eq!(utf16(&parts[0]), MESSAGE_LIMIT);
    assert_eq!(parts.concat(), text);
    let plain = plain_parts(&text);
    assert_eq!(plain, parts);
}

#[test]
fn a_long_code_block_is_split_into_closed_blocks() {
    let code: String = (0..400).map(|i| format!("print({i}) # <{i}>\n")).collect();
    let text = format!("Here:\n\n```python\n{code}```\nDone.");
    let parts = render_parts(&text);
    assert!(parts.len() >= 3, "{}", parts.len());
    assert_eq!(parts[0], "Here:");
    for part in &parts[1..] {
        assert!(
            part.starts_with("<pre><code class=\"language-python\">"),
            "{part}"
        );
        assert!(utf16(&visible_text(part)) <= MESSAGE_LIMIT);
    }
    assert!(
        parts
            .last()
            .is_some_and(|p| p.ends_with("</code></pre>\nDone."))
    );
}

#[test]
fn paragraphs_are_kept_whole() {
    let para = format!("{}.", "word ".repeat(150).trim_end());
    let text = [para.as_str(); 12].join("\n\n");
    let parts = render_parts(&text);
    assert!(parts.len() > 1);
    for part in &parts {
        assert!(
            part.starts_with("word") && part.ends_with("word."),
            "{part}"
        );
    }
}

#[test]
fn plain_parts_are_within_the_limit() {
    let text = "a <b> & c ".repeat(2000);
    let parts = plain_parts(&text);
    assert!(parts.len() >= 5);
    for part in &parts {
        assert!(utf16(part) <= MESSAGE_LIMIT);
        assert!(part.contains("<b>"), "plain text is not escaped");
    }
    assert!(plain_parts(" \n ").is_empty());
    assert!(render_parts("```\n\n```").is_empty());
}

fn markdownish() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        6 => "[a-z]{1,10}",
        3 => Just(" ".to_owned()),
        2 => Just("\n".to_owned()),
        1 => Just("\n\n".to_owned()),
        1 => "\n```[a-z]{0,3}\n",
        1 => prop_oneof![Just("*"), Just("**"), Just("_"), Just("__"), Just("~~"), Just("`")]
            .prop_map(str::to_owned),
        1 => prop_oneof![Just("\n# "), Just("\n> "), Just("\n- "), Just("["), Just("]"),
                         Just("](https://x.y/a_b)"), Just("\\"), Just("<"), Just("&"), Just(">")]
            .prop_map(str::to_owned),
        1 => "[é😀中&<]{1,4}",
    ];
    proptest::collection::vec(token, 0..2500).prop_map(|t| t.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn parts_are_valid_html_within_the_limit(text in markdownish()) {
        for part in render_parts(&text) {
            let visible = visible_text(&part);
            prop_assert!(utf16(&visible) <= MESSAGE_LIMIT, "{} units", utf16(&visible));
            prop_assert!(!visible.trim().is_empty());
            // The fake Telegram server, which hearth's tests talk to, reads
            // the part the same way.
            let parsed = parse_html(&part);
            prop_assert_eq!(parsed.map(|p| p.text), Ok(visible), "{}", part);
        }
    }

    #[test]
    fn any_line_converts_to_valid_html(line in "\\PC{0,80}") {
        let html = to_html(&line);
        let visible = visible_text(&html);
        prop_assert_eq!(parse_html(&html).map(|p| p.text), Ok(visible.clone()), "{}", html);
        let counted = line.split('\n').map(|l| visible_len(l, false)).sum::<usize>();
        prop_assert!(utf16(&visible) <= counted + line.matches('\n').count());
    }
}
