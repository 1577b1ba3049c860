//! Errors as people read them: the error's own words and each cause's,
//! joined by `: `, with the Rust type paths and debug dumps some libraries
//! put in their messages (rmcp's `Transport [rmcp::transport::…] error`,
//! `reqwest::Error { kind: .. }`) taken out.

use std::error::Error;

/// `e` and its sources as one line: each source's text after a colon,
/// unless its parent already quoted it; Rust type paths and debug dumps
/// removed (see [`plain`]).
pub fn error_text(e: &(dyn Error + 'static)) -> String {
    let mut text = plain(&e.to_string());
    let mut source = e.source();
    while let Some(s) = source {
        let said = plain(&s.to_string());
        if !said.is_empty() && !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        source = s.source();
    }
    text
}

/// `text` without Rust type paths (`[a::b::C<d::E>]` and `a::b::C` in a
/// sentence) and with debug dumps of structs (`Name { field: .. }`) replaced
/// by the quoted words they hold (`"tcp connect error"`, `"Connection
/// refused"`). The `::` of an IPv6 address (`[::1]`, `fe80::1`) stays.
pub fn plain(text: &str) -> String {
    let text = strip_dumps(text);
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while !rest.is_empty() {
        // A bracketed type name: `Transport [rmcp::…<…>] error`.
        if let Some(after) = rest.strip_prefix('[')
            && let Some(len) = path_len(after)
            && after[len..].starts_with(']')
        {
            // `Transport [..] error` reads `Transport error`.
            if out.ends_with(' ') && after[len + 1..].starts_with(' ') {
                out.pop();
            }
            rest = &after[len + 1..];
            continue;
        }
        let at_word_start = !out
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_');
        if at_word_start && let Some(len) = path_len(rest) {
            // A bare path: its last segment is the type's own name.
            let path = &rest[..len];
            let base = path.split('<').next().unwrap_or(path);
            out.push_str(base.rsplit("::").next().unwrap_or(base));
            rest = &rest[len..];
            continue;
        }
        let mut chars = rest.chars();
        if let Some(c) = chars.next() {
            out.push(c);
        }
        rest = chars.as_str();
    }
    out
}

/// The length of a Rust type path at the start of `s`: two or more
/// `::`-joined identifiers, the first starting with a lower-case letter,
/// the last with an upper-case one, then any `<..>` generics.
fn path_len(s: &str) -> Option<usize> {
    let bytes = s.as_bytes();
    let ident = |from: usize| {
        let mut i = from;
        while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
            i += 1;
        }
        (i > from && !bytes[from].is_ascii_digit()).then_some(i)
    };
    let first = ident(0)?;
    if !bytes[0].is_ascii_lowercase() {
        return None;
    }
    let mut end = first;
    let mut last_start = 0;
    let mut segments = 1;
    while s[end..].starts_with("::") {
        let Some(next) = ident(end + 2) else { break };
        last_start = end + 2;
        end = next;
        segments += 1;
    }
    if segments < 2 || !bytes[last_start].is_ascii_uppercase() {
        return None;
    }
    if bytes.get(end) == Some(&b'<') {
        let mut depth = 0usize;
        for (i, b) in bytes.iter().enumerate().skip(end) {
            match b {
                b'<' => depth += 1,
                b'>' => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(i + 1);
                    }
                }
                _ => {}
            }
        }
        return None;
    }
    Some(end)
}

/// Replaces each debug dump of a struct (`Name { field: .. }`, `Name` a
/// type or path) by the quoted strings inside it joined by `: `.
fn strip_dumps(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find(" { ") {
        let head = &rest[..open];
        let name_start = head
            .rfind(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .map_or(0, |i| i + 1);
        let name = &head[name_start..];
        let last = name.rsplit("::").next().unwrap_or(name);
        let is_type = last.chars().next().is_some_and(char::is_uppercase);
        // `{ field: ` after the name: a struct's debug form.
        let body = &rest[open + 3..];
        let field = body.split_once(": ").is_some_and(|(f, _)| {
            !f.is_empty() && f.chars().all(|c| c.is_ascii_lowercase() || c == '_')
        });
        let Some(close) = matching_brace(&rest[open + 1..]).filter(|_| is_type && field) else {
            out.push_str(&rest[..open + 3]);
            rest = &rest[open + 3..];
            continue;
        };
        out.push_str(&rest[..name_start]);
        let dump = &rest[open + 1..open + 1 + close];
        out.push_str(&quoted(dump).join(": "));
        rest = &rest[open + 1 + close..];
    }
    out.push_str(rest);
    out
}

/// The length up to and including the `}` that closes the `{` `s` starts
/// with, quotes respected.
fn matching_brace(s: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_quote = false;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if in_quote => escaped = true,
            '"' => in_quote = !in_quote,
            '{' if !in_quote => depth += 1,
            '}' if !in_quote => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// The double-quoted strings in `s`, unquoted, URLs left out (a dump's
/// `url: ".."` repeats what the sentence around it says).
fn quoted(s: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = s;
    while let Some(start) = rest.find('"') {
        let body = &rest[start + 1..];
        let mut end = None;
        let mut escaped = false;
        for (i, c) in body.char_indices() {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => {
                    end = Some(i);
                    break;
                }
                _ => {}
            }
        }
        let Some(end) = end else { break };
        let word = &body[..end];
        if !word.contains("://") && !word.is_empty() {
            found.push(word.to_owned());
        }
        rest = &body[end + 1..];
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);

    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl Error for Layer {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            self.1.as_deref().map(|l| l as &(dyn Error + 'static))
        }
    }

    #[test]
    fn an_error_reads_as_its_words_and_its_causes() {
        let e = Layer(
            "error sending request",
            Some(Box::new(Layer(
                "client error (Connect)",
                Some(Box::new(Layer(
                    "tcp connect error: Connection refused (os error 111)",
                    None,
                ))),
            ))),
        );
        assert_eq!(
            error_text(&e),
            "error sending request: client error (Connect): tcp connect error: Connection refused (os error 111)"
        );
        // A cause its parent already quotes is not said twice.
        let e = Layer(
            "handshake failed: boom",
            Some(Box::new(Layer("boom", None))),
        );
        assert_eq!(error_text(&e), "handshake failed: boom");
    }

    #[test]
    fn type_paths_and_debug_dumps_are_taken_out() {
        let rmcp = "handshake failed: Send message error Transport [rmcp::transport::worker::WorkerTransport<rmcp::transport::streamable_http_client::StreamableHttpClientWorker<reqwest::async_impl::client::Client>>] error: Client error: error sending request for url (http://127.0.0.1:1/mcp), when send initialize request";
        assert_eq!(
            plain(rmcp),
            "handshake failed: Send message error Transport error: Client error: error sending request for url (http://127.0.0.1:1/mcp), when send initialize request"
        );
        let dump = r#"worker quit: Client(reqwest::Error { kind: Request, url: "http://127.0.0.1:1/mcp", source: hyper_util::client::legacy::Error(Connect, ConnectError("tcp connect error", 127.0.0.1:1, Os { code: 111, kind: ConnectionRefused, message: "Connection refused" })) })"#;
        let shown = plain(dump);
        assert_eq!(
            shown,
            "worker quit: Client(tcp connect error: Connection refused)"
        );
        for bad in ["::", "Error {", " { "] {
            assert!(!shown.contains(bad), "{shown}");
        }
        assert_eq!(
            plain("cannot parse reqwest::Error here"),
            "cannot parse Error here"
        );
        // Not a type path: IPv6 addresses, JSON, plain words.
        for keep in [
            "connect to [::1]:8080 failed",
            "fe80::1 is link-local",
            r#"the server said {"error": "bad"}"#,
            "a set { of words } in braces",
        ] {
            assert_eq!(plain(keep), keep);
        }
    }
}
