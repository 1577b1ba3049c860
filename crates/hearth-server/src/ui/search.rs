//! `/ui/threads?q=`: every stored thread searched, by the start of its key
//! and by the words of its history, a page of each at a time (both read
//! from an index: a key range, and the messages' full-text index).

use maud::{Markup, html};
use serde_json::Value;

use super::layout::{empty, time};
use super::session::{Viewer, encode};
use crate::AppState;

/// Rows on one page of each list.
pub const PAGE: u32 = 20;
/// Characters of a message shown around the first word found.
const EXCERPT: usize = 160;

/// `?q=&after=&before=` of a search.
#[derive(Debug, Default)]
pub struct Query<'a> {
    /// What to look for.
    pub q: &'a str,
    /// The last key of the previous page of keys.
    pub after: Option<&'a str>,
    /// The oldest message id of the previous page of messages.
    pub before: Option<i64>,
}

/// The words of a stored message content: its text parts (the content is
/// a JSON array of parts), or the content itself when it is not one.
fn words_of(content: &str) -> String {
    match serde_json::from_str::<Vec<Value>>(content) {
        Ok(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(" "),
        Err(_) => content.to_owned(),
    }
}

/// Up to [`EXCERPT`] characters of `text` around the first of `q`'s words.
fn excerpt(text: &str, q: &str) -> String {
    let lower = text.to_lowercase();
    let at = q
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .find_map(|w| lower.find(&w.to_lowercase()))
        .unwrap_or(0);
    // Positions in the lower-cased copy may differ from the original's in
    // rare scripts: count characters, not bytes.
    let before = lower.get(..at).map_or(0, |s| s.chars().count());
    let start = before.saturating_sub(EXCERPT / 3);
    let mut out: String = text.chars().skip(start).take(EXCERPT).collect();
    if start > 0 {
        out.insert(0, '…');
    }
    if text.chars().count() > start + EXCERPT {
        out.push('…');
    }
    out
}

/// The search's two lists, each with a link to its next page; a member
/// sees only their own threads.
pub async fn results(
    st: &AppState,
    viewer: &Viewer,
    q: &Query<'_>,
) -> Result<Markup, crate::ApiError> {
    let mut keys = st.runtime.find_thread_keys(q.q, q.after, PAGE).await?;
    let mut hits = st.runtime.search_messages(q.q, q.before, PAGE).await?;
    let more_keys = (keys.len() == PAGE as usize)
        .then(|| keys.last().cloned())
        .flatten();
    let older = (hits.len() == PAGE as usize)
        .then(|| hits.last().map(|h| h.id))
        .flatten();
    if let Some(user) = viewer.member() {
        let mut mine = std::collections::BTreeMap::new();
        for key in keys.iter().chain(hits.iter().map(|h| &h.thread_key)) {
            if !mine.contains_key(key) {
                let own = crate::auth::member_owns_thread(&st.runtime, user, key).await?;
                mine.insert(key.clone(), own);
            }
        }
        keys.retain(|k| mine.get(k) == Some(&true));
        hits.retain(|h| mine.get(&h.thread_key) == Some(&true));
    }
    let here = format!("/ui/threads?q={}", encode(q.q));
    Ok(html! {
        section #thread-keys {
            h2 { "Threads whose key starts with “" (q.q) "”" }
            @if keys.is_empty() { (empty("No thread key starts so.")) } @else {
                ul { @for k in &keys { li { a href={ "/ui/threads/" (encode(k)) } { (k) } } } }
            }
            @if let Some(last) = &more_keys {
                p { a href={ (here) "&after=" (encode(last)) } { "More threads" } }
            }
        }
        section #thread-messages {
            h2 { "Messages with the words “" (q.q) "”" }
            @if hits.is_empty() { (empty("No message holds these words.")) } @else {
                div.scroll { table #message-hits {
                    thead { tr { th { "Thread" } th { "Who" } th { "Message" } th { "When" } } }
                    tbody { @for h in &hits { tr {
                        td { a href={ "/ui/threads/" (encode(&h.thread_key)) } { (h.thread_key) } }
                        td { (h.role) }
                        td { (excerpt(&words_of(&h.content), q.q)) }
                        td { (time(h.created_at)) }
                    } } }
                } }
            }
            @if let Some(id) = older {
                p { a href={ (here) "&before=" (id) } { "Older messages" } }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_excerpt_shows_the_text_around_the_first_word_found() {
        let long = format!("{} the Heron stood {}", "a ".repeat(200), "b ".repeat(200));
        let e = excerpt(&long, "heron");
        assert!(
            e.contains("Heron stood") && e.starts_with('…') && e.ends_with('…'),
            "{e}"
        );
        assert_eq!(excerpt("short", "none"), "short");
        assert_eq!(
            words_of(r#"[{"type":"text","text":"hi"},{"type":"tool_call"}]"#),
            "hi"
        );
        assert_eq!(words_of("plain"), "plain");
    }
}
