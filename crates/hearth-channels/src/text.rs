//! Splitting long Markdown into messages a platform accepts.
//!
//! One splitter for every platform: the caller says how long one line
//! renders (Discord counts characters, Telegram UTF-16 units of the visible
//! text after entity parsing) and this module keeps every chunk within the
//! limit, with its ``` fences balanced. It knows no platform's markup beyond
//! fences; formatting belongs to each platform's module.
//!
//! A fence is a line whose text, after leading whitespace, starts with three
//! backticks: outside a code block it opens one (the rest is the info
//! string), inside one it closes it. The platform renderers use the same
//! rule ([`is_fence`]), so both agree on where code is.

/// The fence added to close a code block cut at a chunk's end.
const CLOSE: &str = "```";

/// Whether `line` is a fence line (opens or closes a code block).
pub(crate) fn is_fence(line: &str) -> bool {
    line.trim_start().starts_with("```")
}

/// Splits `text` into chunks of the source Markdown, each within `limit`.
///
/// `measure(line, in_code)` is the rendered length of one line without its
/// newline; fence lines (the source's and the added ones) are measured with
/// `in_code = true`. The sum of a chunk's line measures plus one per newline
/// is at most `limit`. A chunk that ends inside a code block gets a closing
/// ```` ``` ```` line and the next one reopens the block with the same info
/// string. Splits fall on blank lines when possible (outside code first),
/// else on line boundaries (outside code first), else inside an over-long
/// line at its last whitespace, else at a char boundary; the whitespace at a
/// split point is dropped, nothing else is lost or reordered.
///
/// Input without any non-whitespace text gives no chunk. Only a limit too
/// small for one character plus the fence lines of its code block gives a
/// chunk over it: no split can help then, and dropping text would be worse.
pub fn split_markdown(
    text: &str,
    limit: usize,
    measure: &dyn Fn(&str, bool) -> usize,
) -> Vec<String> {
    plan(text, limit, measure)
        .iter()
        .map(Planned::render)
        .collect()
}

/// One source line and what the splitter needs to know about it.
struct Line<'a> {
    text: &'a str,
    blank: bool,
    fence: bool,
    /// Inside a code block before this line.
    code: bool,
    /// When a code block is open after this line: what closing it costs (a
    /// newline and the larger of the added and the source closing fence, so
    /// either fits); otherwise 0.
    reserve: usize,
    /// The opening fence of the block this line is in (for reopening).
    opener: Option<usize>,
}

impl Line<'_> {
    fn code_after(&self) -> bool {
        self.code != self.fence
    }

    /// The `in_code` flag this line is measured with.
    fn measured_as_code(&self) -> bool {
        self.code || self.fence
    }
}

/// A position in the source: a line, and a byte offset inside it when an
/// over-long line was cut.
#[derive(Clone, Copy)]
struct Cursor {
    line: usize,
    offset: usize,
}

/// A piece of one source line placed in a chunk.
struct Seg<'a> {
    text: &'a str,
    line: usize,
}

/// A chunk before rendering: kept apart so tests can check that the source
/// segments alone give back the input.
struct Planned<'a> {
    reopen: Option<&'a str>,
    segs: Vec<Seg<'a>>,
    close: bool,
}

impl Planned<'_> {
    fn render(&self) -> String {
        let mut out = String::new();
        if let Some(reopen) = self.reopen {
            out.push_str(reopen);
            out.push('\n');
        }
        for (i, seg) in self.segs.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            out.push_str(seg.text);
        }
        if self.close {
            out.push('\n');
            out.push_str(CLOSE);
        }
        out
    }
}

fn analyse<'a>(text: &'a str, measure: &dyn Fn(&str, bool) -> usize) -> Vec<Line<'a>> {
    let mut lines: Vec<Line<'a>> = Vec::new();
    let mut opener: Option<usize> = None;
    for (idx, text) in text.split('\n').enumerate() {
        let fence = is_fence(text);
        let code = opener.is_some();
        lines.push(Line {
            text,
            blank: text.trim().is_empty(),
            fence,
            code,
            reserve: 0,
            opener: if fence && !code { Some(idx) } else { opener },
        });
        match (fence, opener) {
            (true, Some(open)) => {
                let reserve = 1 + measure(CLOSE, true).max(measure(text, true));
                set_reserve(&mut lines, open, idx, reserve);
                opener = None;
            }
            (true, None) => opener = Some(idx),
            (false, _) => {}
        }
    }
    if let Some(open) = opener {
        let reserve = 1 + measure(CLOSE, true);
        let end = lines.len();
        set_reserve(&mut lines, open, end, reserve);
    }
    lines
}

/// Gives the lines `from..to` (a block's opening fence and content) the cost
/// of closing their block.
fn set_reserve(lines: &mut [Line<'_>], from: usize, to: usize, reserve: usize) {
    if let Some(block) = lines.get_mut(from..to) {
        for line in block {
            line.reserve = reserve;
        }
    }
}

fn plan<'a>(
    text: &'a str,
    limit: usize,
    measure: &dyn Fn(&str, bool) -> usize,
) -> Vec<Planned<'a>> {
    let lines = analyse(text, measure);
    let mut out = Vec::new();
    let mut at = Cursor { line: 0, offset: 0 };
    loop {
        // Blank lines at a split point are its separator: no chunk starts with one.
        if at.offset == 0 {
            while lines.get(at.line).is_some_and(|l| l.blank) {
                at.line += 1;
            }
        }
        let Some(first) = lines.get(at.line) else {
            break;
        };
        let reopen = if first.code {
            first
                .opener
                .and_then(|o| lines.get(o))
                .map(|l| l.text.trim())
        } else {
            None
        };
        let (chunk, next) = build_chunk(&lines, at, reopen, limit, measure);
        out.push(chunk);
        at = next;
    }
    out
}

/// Fills one chunk from `start`; returns it and where the next one starts
/// (always further on, so the loop in [`plan`] ends).
fn build_chunk<'a>(
    lines: &[Line<'a>],
    start: Cursor,
    reopen: Option<&'a str>,
    limit: usize,
    measure: &dyn Fn(&str, bool) -> usize,
) -> (Planned<'a>, Cursor) {
    let mut segs: Vec<Seg<'a>> = Vec::new();
    // Index of the first segment worth sending (not blank, not a fence).
    let mut first_content: Option<usize> = None;
    let mut cost = reopen.map_or(0, |r| measure(r, true));
    let mut j = start.line;
    loop {
        let Some(line) = lines.get(j) else {
            // End of input: trailing blank lines dropped, an unclosed block closed.
            while segs.last().is_some_and(|s| s.text.trim().is_empty()) {
                segs.pop();
            }
            let close = segs.last().is_some_and(|s| seg_code_after(lines, s));
            let next = Cursor { line: j, offset: 0 };
            let chunk = Planned {
                reopen,
                segs,
                close,
            };
            return (chunk, next);
        };
        let offset = if j == start.line { start.offset } else { 0 };
        let text = line.text.get(offset..).unwrap_or_default();
        let sep = usize::from(!segs.is_empty() || reopen.is_some());
        let reserve = if line.code_after() { line.reserve } else { 0 };
        let m = measure(text, line.measured_as_code());
        let fixed = cost.saturating_add(sep).saturating_add(reserve);
        // The rest of a cut line that reads as a fence must be cut again.
        let fence_like_rest = offset > 0 && is_fence(text);
        if !fence_like_rest && fixed.saturating_add(m) <= limit {
            if first_content.is_none() && !line.fence && !text.trim().is_empty() {
                first_content = Some(segs.len());
            }
            cost = cost.saturating_add(sep).saturating_add(m);
            segs.push(Seg { text, line: j });
            j += 1;
            continue;
        }
        if let Some(first_content) = first_content {
            return cut(lines, segs, first_content, reopen, j);
        }
        let budget = limit.saturating_sub(fixed);
        let hopeless = line.fence
            || text.trim().is_empty()
            || !first_char_fits(text, budget, measure, line.code);
        if !segs.is_empty() && hopeless {
            // Only blank lines and empty blocks so far: they go alone, so
            // this line gets a chunk of its own (with its opening fence).
            let keep = kept(lines, &segs, 0);
            if keep > 0 {
                let next = Cursor {
                    line: segs.get(keep).map_or(j, |s| s.line),
                    offset: 0,
                };
                segs.truncate(keep);
                return finish(lines, segs, reopen, next);
            }
            // Only an opening fence and blank lines: the blank lines are
            // whitespace this line needs the room of.
            let before = segs.len();
            segs.retain(|s| !s.text.trim().is_empty());
            if segs.len() < before {
                cost = segs.iter().enumerate().fold(
                    reopen.map_or(0, |r| measure(r, true)),
                    |c, (i, s)| {
                        let sep = usize::from(i > 0 || reopen.is_some());
                        let code = lines.get(s.line).is_some_and(Line::measured_as_code);
                        c.saturating_add(sep).saturating_add(measure(s.text, code))
                    },
                );
                continue;
            }
            if text.trim().is_empty() {
                j += 1;
                continue;
            }
        }
        if line.fence {
            // A fence that cannot fit even alone: it cannot be split without
            // changing what it means, so it goes over the limit.
            segs.push(Seg { text, line: j });
            cost = cost.saturating_add(sep).saturating_add(m);
            j += 1;
            continue;
        }
        // Nothing worth sending yet and this line alone is too long: cut it.
        // Indentation wider than the budget is dropped, as at a split point.
        let lead = if first_char_fits(text, budget, measure, line.code) {
            0
        } else {
            text.len() - text.trim_start().len()
        };
        let text = text.get(lead..).unwrap_or(text);
        let (piece_end, rest_start) = split_line(text, budget, measure, line.code);
        segs.push(Seg {
            text: text.get(..piece_end).unwrap_or(text),
            line: j,
        });
        let next = if rest_start >= text.len() {
            Cursor {
                line: j + 1,
                offset: 0,
            }
        } else {
            Cursor {
                line: j,
                offset: offset + lead + rest_start,
            }
        };
        return finish(lines, segs, reopen, next);
    }
}

/// Ends a chunk whose lines no longer fit at the best split point among
/// the segments taken (line `j` is the one that did not fit).
fn cut<'a>(
    lines: &[Line<'a>],
    mut segs: Vec<Seg<'a>>,
    first_content: usize,
    reopen: Option<&'a str>,
    j: usize,
) -> (Planned<'a>, Cursor) {
    // The line each candidate cut leaves first for the next chunk: segments
    // after the first are whole lines, so their line index says it.
    let next_line = |e: usize| segs.get(e).map_or(j, |s| s.line);
    let mut best = (0u8, segs.len());
    for e in first_content + 1..=segs.len() {
        let class = match lines.get(next_line(e)) {
            Some(l) => match (l.code, l.blank) {
                (false, true) => 3,
                (false, false) => 2,
                (true, true) => 1,
                (true, false) => 0,
            },
            None => 0,
        };
        if class >= best.0 {
            best = (class, e);
        }
    }
    let e = kept(
        lines,
        segs.get(..best.1).unwrap_or_default(),
        first_content + 1,
    );
    let next = Cursor {
        line: next_line(e),
        offset: 0,
    };
    segs.truncate(e);
    finish(lines, segs, reopen, next)
}

/// How many of `segs` a chunk keeps (at least `floor`): it never ends on
/// blank lines or on a fence that opens a block, which moves to the next
/// chunk with its code.
fn kept(lines: &[Line<'_>], segs: &[Seg<'_>], floor: usize) -> usize {
    let mut e = segs.len();
    while e > floor
        && segs.get(e - 1).is_some_and(|s| {
            s.text.trim().is_empty() || lines.get(s.line).is_some_and(|l| l.fence && !l.code)
        })
    {
        e -= 1;
    }
    e
}

/// Whether `rest` starts with Markdown that means something at a line's
/// start only.
fn starts_block(rest: &str) -> bool {
    rest.starts_with(['>', '#'])
        || ["```", "- ", "* ", "+ "]
            .iter()
            .any(|p| rest.starts_with(p))
}

/// Whether `text` up to its first non-whitespace char fits `budget`.
fn first_char_fits(
    text: &str,
    budget: usize,
    measure: &dyn Fn(&str, bool) -> usize,
    code: bool,
) -> bool {
    let end = text
        .char_indices()
        .find(|(_, c)| !c.is_whitespace())
        .map_or(text.len(), |(i, c)| i + c.len_utf8());
    text.get(..end).is_some_and(|p| measure(p, code) <= budget)
}

/// Closes the chunk's code block if it ends inside one: with the source's
/// own closing fence when it is next (the reserve left room for it), else
/// with an added one.
fn finish<'a>(
    lines: &[Line<'a>],
    mut segs: Vec<Seg<'a>>,
    reopen: Option<&'a str>,
    mut next: Cursor,
) -> (Planned<'a>, Cursor) {
    let mut close = segs.last().is_some_and(|s| seg_code_after(lines, s));
    if close && next.offset == 0 {
        let mut n = next.line;
        while lines.get(n).is_some_and(|l| l.blank) {
            n += 1;
        }
        if let Some(fence) = lines.get(n).filter(|l| l.fence) {
            segs.push(Seg {
                text: fence.text,
                line: n,
            });
            next = Cursor {
                line: n + 1,
                offset: 0,
            };
            close = false;
        }
    }
    let chunk = Planned {
        reopen,
        segs,
        close,
    };
    (chunk, next)
}

/// Whether a code block is open after this segment.
fn seg_code_after(lines: &[Line<'_>], seg: &Seg<'_>) -> bool {
    lines.get(seg.line).is_some_and(Line::code_after)
}

/// Where to cut an over-long (non-fence) line so its first piece measures
/// at most `budget`: returns the piece's end and where the rest starts
/// (whitespace after the cut skipped). A rest that would start like a block
/// is avoided when the budget allows; when it does not, a fence-like rest is
/// cut again inside its backticks, since a piece must never read as a fence.
/// At least one non-whitespace char is taken even when none fits.
fn split_line(
    text: &str,
    budget: usize,
    measure: &dyn Fn(&str, bool) -> usize,
    code: bool,
) -> (usize, usize) {
    let fits = |end: usize| text.get(..end).is_some_and(|p| measure(p, code) <= budget);
    let fence_like = is_fence(text);
    // Possible piece ends, ascending; `end_of(k)` ends the k-char prefix.
    // A fence-like rest is cut within its first two backticks.
    let mut ends: Vec<usize> = text
        .char_indices()
        .map(|(i, _)| i)
        .skip(1)
        .chain([text.len()])
        .collect();
    if fence_like {
        ends.truncate(2);
    } else if fits(text.len()) {
        return (text.len(), text.len());
    }
    let end_of = |k: usize| match k.checked_sub(1) {
        Some(i) => ends.get(i).copied().unwrap_or(text.len()),
        None => 0,
    };
    let rest_from = |start: usize| {
        let rest = text.get(start..).unwrap_or_default();
        let trimmed = rest.trim_start();
        if trimmed.is_empty() {
            text.len()
        } else {
            start + (rest.len() - trimmed.len())
        }
    };
    // A rest that starts like a block (a fence, quote, heading or bullet)
    // would render as one in the next chunk.
    let rest_is_block = |start: usize| text.get(start..).is_some_and(starts_block);
    // Binary search for a long fitting prefix. A measure need not grow with
    // the prefix (an unmatched `**` counts until its closer arrives), so the
    // search only keeps `lo` fitting and `hi` not.
    let (mut lo, mut hi) = (0, ends.len());
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(end_of(mid)) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    if fits(end_of(hi)) {
        lo = hi;
    }
    // A piece of indentation alone would be a blank message.
    let min_k = text
        .chars()
        .position(|c| !c.is_whitespace())
        .map_or(ends.len(), |i| i + 1);

    // Whitespace cut, not too early or the chunk would be mostly empty.
    if lo >= min_k {
        let best = end_of(lo);
        let whitespace = text
            .get(..best)
            .unwrap_or_default()
            .char_indices()
            .rev()
            .filter(|&(q, c)| c.is_whitespace() && q >= best / 2)
            .take(16);
        for (q, _) in whitespace {
            let piece = text.get(..q).unwrap_or_default().trim_end();
            let rest = rest_from(q);
            if !piece.trim().is_empty() && fits(piece.len()) && !rest_is_block(rest) {
                return (piece.len(), rest);
            }
        }
    }
    // Char cut: the longest fitting piece whose rest is not fence-like.
    let fallback = end_of(lo.max(min_k));
    let end = (min_k..=lo)
        .rev()
        .map(end_of)
        .find(|&e| !rest_is_block(rest_from(e)))
        .unwrap_or(fallback);
    (end, rest_from(end))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn chars(line: &str, _: bool) -> usize {
        line.chars().count()
    }

    /// Recomputes a rendered chunk's cost the way the splitter promises it.
    fn chunk_cost(chunk: &str, measure: &dyn Fn(&str, bool) -> usize) -> (usize, bool) {
        let lines = analyse(chunk, measure);
        let cost = lines
            .iter()
            .map(|l| measure(l.text, l.measured_as_code()))
            .sum::<usize>()
            + lines.len().saturating_sub(1);
        let open = lines.last().is_some_and(Line::code_after);
        (cost, open)
    }

    fn non_ws(s: &str) -> String {
        s.chars().filter(|c| !c.is_whitespace()).collect()
    }

    /// Checks every promise of [`split_markdown`] on one input.
    fn check(text: &str, limit: usize, measure: &dyn Fn(&str, bool) -> usize, strict: bool) {
        let planned = plan(text, limit, measure);
        let rendered: Vec<String> = planned.iter().map(Planned::render).collect();
        assert_eq!(rendered, split_markdown(text, limit, measure));
        let joined: String = planned
            .iter()
            .flat_map(|p| p.segs.iter().map(|s| s.text))
            .collect::<Vec<_>>()
            .join("\n");
        assert_eq!(
            non_ws(&joined),
            non_ws(text),
            "text lost or reordered: {rendered:?}"
        );
        if text.trim().is_empty() {
            assert!(rendered.is_empty());
        }
        for (i, chunk) in rendered.iter().enumerate() {
            assert!(!chunk.trim().is_empty(), "chunk {i} is blank: {rendered:?}");
            let (cost, open) = chunk_cost(chunk, measure);
            assert!(!open, "chunk {i} ends inside a fence: {chunk:?}");
            if strict {
                assert!(cost <= limit, "chunk {i} costs {cost} > {limit}: {chunk:?}");
            }
        }
    }

    #[test]
    fn short_text_is_one_chunk() {
        assert_eq!(
            split_markdown("hello\n\nworld", 100, &chars),
            ["hello\n\nworld"]
        );
        assert!(split_markdown("", 100, &chars).is_empty());
        assert!(split_markdown(" \n\n \n", 100, &chars).is_empty());
    }

    #[test]
    fn prefers_paragraph_boundaries() {
        let text = "aaaa bbbb\ncccc\n\ndddd eeee\nffff";
        // 14 chars for the first paragraph; the whole is 30.
        assert_eq!(
            split_markdown(text, 22, &chars),
            ["aaaa bbbb\ncccc", "dddd eeee\nffff"]
        );
    }

    #[test]
    fn falls_back_to_lines_then_whitespace_then_chars() {
        assert_eq!(
            split_markdown("aaaa\nbbbb\ncccc", 9, &chars),
            ["aaaa\nbbbb", "cccc"]
        );
        assert_eq!(
            split_markdown("aaa bbb ccc ddd", 8, &chars),
            ["aaa bbb", "ccc ddd"]
        );
        assert_eq!(
            split_markdown("abcdefghij", 4, &chars),
            ["abcd", "efgh", "ij"]
        );
        // The rest of a cut line never starts like a quote, heading or list.
        assert_eq!(split_markdown("aaaa > bbbb", 6, &chars), ["aaaa >", "bbbb"]);
        assert_eq!(
            split_markdown("aa bb > cc dd", 8, &chars),
            ["aa bb >", "cc dd"]
        );
        // Multibyte chars are never cut inside.
        assert_eq!(split_markdown("ééééé", 2, &chars), ["éé", "éé", "é"]);
    }

    #[test]
    fn a_cut_code_block_is_closed_and_reopened() {
        let text = "intro\n\n```rust\nlet a = 1;\nlet b = 2;\nlet c = 3;\n```\nafter";
        let chunks = split_markdown(text, 33, &chars);
        assert_eq!(
            chunks,
            [
                "intro",
                "```rust\nlet a = 1;\nlet b = 2;\n```",
                "```rust\nlet c = 3;\n```\nafter",
            ]
        );
        check(text, 33, &chars, true);
    }

    #[test]
    fn the_source_closing_fence_is_used_when_it_comes_next() {
        // The blank lines do not fit; the closing fence after them does.
        let text = "```\naaaa\n\n\n```\nzzzz";
        assert_eq!(split_markdown(text, 12, &chars), ["```\naaaa\n```", "zzzz"]);
    }

    #[test]
    fn an_unclosed_fence_is_closed() {
        assert_eq!(
            split_markdown("x\n```py\ncode", 100, &chars),
            ["x\n```py\ncode\n```"]
        );
    }

    #[test]
    fn the_rest_of_a_cut_line_never_opens_a_fence() {
        let text = "aaaa ```bbbb";
        for limit in 1..14 {
            check(text, limit, &chars, limit >= 1);
            for chunk in split_markdown(text, limit, &chars) {
                assert!(!chunk.contains('\n'), "limit {limit}: {chunk:?}");
            }
        }
    }

    #[test]
    fn a_measure_that_shrinks_with_more_text_is_respected() {
        // `**` pairs count nothing once closed, like rendered bold.
        let measure = |line: &str, _: bool| {
            let pairs = line.matches("**").count() / 2;
            line.chars().count() - pairs * 4
        };
        check("**aaaa** **bbbb** **cccc** dddd", 10, &measure, true);
    }

    #[test]
    fn tiny_limits_never_lose_text() {
        let text = "```rust\nfn main() {}\n```\n# Title\n\ntext with words";
        for limit in 0..40 {
            check(text, limit, &chars, limit >= 13);
        }
    }

    fn markdownish() -> impl Strategy<Value = String> {
        let token = prop_oneof![
            4 => "[a-z]{1,12}",
            2 => Just(" ".to_owned()),
            2 => Just("\n".to_owned()),
            1 => Just("\n\n".to_owned()),
            1 => "\n```[a-z]{0,4}\n",
            1 => Just("\n```\n".to_owned()),
            1 => Just("`".to_owned()),
            1 => "[é😀中]{1,3}",
            1 => Just("  ".to_owned()),
        ];
        proptest::collection::vec(token, 0..80).prop_map(|t| t.concat())
    }

    proptest! {
        #[test]
        fn chunks_fit_balance_and_keep_the_text(text in markdownish(), limit in 20usize..120) {
            // Two fence lines longer than the limit allows cannot be helped.
            let strict = text.split('\n').all(|l| !is_fence(l) || l.chars().count() <= 8);
            check(&text, limit, &chars, strict);
            let utf16 = |l: &str, _: bool| l.encode_utf16().count();
            check(&text, limit, &utf16, strict);
            // Code counted double: the reserve must follow the measure.
            let heavy = |l: &str, code: bool| l.chars().count() * if code { 2 } else { 1 };
            check(&text, limit + 30, &heavy, strict);
        }

        #[test]
        fn never_panics_on_any_text(text in "\\PC{0,200}", limit in 0usize..50) {
            check(&text, limit, &chars, false);
        }
    }
}
