//! Backslash-escaped text seen unescaped.
//!
//! JSON inside a string (a fetched page holding a service-account file, a
//! tool result serialized into another tool result) reaches the scanner with
//! its escapes still in: `\"private_key\": \"-----BEGIN PRIVATE KEY-----\\nMIIE`.
//! The matchers are written for plain text, so the scanner also scans the
//! text with one, two and three levels of escapes decoded, and maps what it finds
//! back to the escaped bytes.

/// One level of JSON-style backslash escapes decoded: the decoded bytes, and
/// for each decoded byte the offset in `text` where its escape (or literal
/// byte) starts, plus a final entry `text.len()`. `None` when `text` has no
/// escape to decode.
///
/// Only escapes that decode to ASCII are decoded (`\uXXXX` above 0x7f stays
/// as it is), so every decoded byte maps to one source sequence and the view
/// stays valid UTF-8 when `text` is. Unknown escapes (`C:\Users`) stay as
/// they are.
pub(super) fn unescape(text: &[u8]) -> Option<(Vec<u8>, Vec<usize>)> {
    // Find the first escape that decodes before allocating: text with only
    // stray backslashes (Windows paths) costs no copy.
    let first = (0..text.len()).find(|&i| text[i] == b'\\' && decode(text, i).is_some())?;
    let mut out = Vec::with_capacity(text.len());
    let mut map = Vec::with_capacity(text.len() + 1);
    out.extend_from_slice(&text[..first]);
    map.extend(0..first);
    let mut decoded = false;
    let mut i = first;
    while i < text.len() {
        let (byte, len) = match text[i] {
            b'\\' => decode(text, i).map_or((b'\\', 1), |d| {
                decoded = true;
                d
            }),
            c => (c, 1),
        };
        out.push(byte);
        map.push(i);
        i += len;
    }
    map.push(text.len());
    decoded.then_some((out, map))
}

/// The byte an escape at `i` (a backslash) stands for, and its length.
fn decode(text: &[u8], i: usize) -> Option<(u8, usize)> {
    let byte = match *text.get(i + 1)? {
        c @ (b'\\' | b'"' | b'\'' | b'/') => c,
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        b'u' => {
            let hex = text.get(i + 2..i + 6)?;
            let s = std::str::from_utf8(hex).ok()?;
            let v = u8::from_str_radix(s.strip_prefix("00")?, 16).ok()?;
            return v.is_ascii().then_some((v, 6));
        }
        _ => return None,
    };
    Some((byte, 2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_json_escapes_and_maps_offsets() {
        let (out, map) = unescape(br#"a\"b\\n\n\u003d\u00e9C:\Users"#).unwrap();
        assert_eq!(out, b"a\"b\\n\n=\\u00e9C:\\Users");
        assert_eq!(out.len() + 1, map.len());
        // `"` came from offset 1 (its backslash), `=` from the `\u003d` at 9.
        assert_eq!(map[1], 1);
        assert_eq!(map[6], 9);
        assert_eq!(
            *map.last().unwrap(),
            br#"a\"b\\n\n\u003d\u00e9C:\Users"#.len()
        );
    }

    #[test]
    fn nothing_to_decode_is_none() {
        assert!(unescape(b"plain text").is_none());
        assert!(unescape(br"C:\Users\me").is_none());
    }
}
