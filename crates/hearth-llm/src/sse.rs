//! An incremental Server-Sent Events decoder: bytes in, `SseEvent`s out.
//!
//! Owned rather than borrowed from a crate because it sits on the hot path of
//! every streamed answer: it copies each line at most once (into the event's
//! `data`), allocates nothing per event beyond that data (and `event`/`id`
//! when the server sends them), nothing at all once warm when the caller hands
//! events back with `recycle`, and bounds the memory a hostile server can make
//! it hold.

use std::str;

/// The default bound on one line and on one event's accumulated data: 16 MiB.
pub const DEFAULT_MAX_SIZE: usize = 16 * 1024 * 1024;

/// Largest buffer `recycle` keeps for reuse, so one huge event does not pin
/// its memory for the rest of the stream.
const RECYCLE_MAX: usize = 64 * 1024;

/// The UTF-8 byte order mark, which the SSE spec says to skip once at the start.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// One dispatched Server-Sent Event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field of this event, when it had one.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// The `id:` field of this event, when it had one (not carried over to
    /// later events: nothing here reconnects, so the last id is not needed).
    pub id: Option<String>,
}

/// Why decoding failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    /// A line was not valid UTF-8.
    #[error("SSE line is not valid UTF-8")]
    InvalidUtf8,
    /// A line, or one event's data, grew past the size limit.
    #[error("SSE line or event exceeds {limit} bytes")]
    TooLarge {
        /// The limit in bytes.
        limit: usize,
    },
}

/// Incremental SSE decoder: `push` bytes as they arrive, then call
/// `next_event` until it returns `Ok(None)`.
///
/// After an error the offending line (or event) is dropped and decoding can
/// go on with the next one; callers talking to a model usually stop instead.
#[derive(Debug)]
pub struct SseDecoder {
    buf: Vec<u8>,
    /// Start of the unconsumed bytes in `buf`.
    pos: usize,
    /// Bytes of `buf[pos..]` already known to hold no line end, so a long line
    /// arriving in small chunks is scanned once, not once per chunk.
    scanned: usize,
    /// The previous line ended with `\r`; a `\n` right after belongs to it.
    skip_lf: bool,
    /// Still deciding whether the stream starts with a BOM.
    at_start: bool,
    /// An oversized line is being thrown away up to its end.
    discarding: bool,
    max_size: usize,
    data: String,
    has_data: bool,
    event: Option<String>,
    id: Option<String>,
    /// Buffers handed back by `recycle`, reused for the next `event`/`id`.
    spare_event: String,
    spare_id: String,
}

impl Default for SseDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl SseDecoder {
    /// A decoder with the default 16 MiB line and event limit.
    pub fn new() -> Self {
        Self::with_max_size(DEFAULT_MAX_SIZE)
    }

    /// A decoder that refuses lines and events larger than `max_size` bytes.
    pub fn with_max_size(max_size: usize) -> Self {
        Self {
            buf: Vec::new(),
            pos: 0,
            scanned: 0,
            skip_lf: false,
            at_start: true,
            discarding: false,
            max_size,
            data: String::new(),
            has_data: false,
            event: None,
            id: None,
            spare_event: String::new(),
            spare_id: String::new(),
        }
    }

    /// Appends received bytes; they may split lines or characters anywhere.
    pub fn push(&mut self, chunk: &[u8]) {
        if chunk.is_empty() {
            return;
        }
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        } else if self.pos > 0 {
            // Compacting only the unfinished tail keeps the buffer at about one
            // line plus one chunk, whatever the stream's length.
            self.buf.copy_within(self.pos.., 0);
            self.buf.truncate(self.buf.len() - self.pos);
            self.pos = 0;
        }
        self.buf.extend_from_slice(chunk);
    }

    /// True when bytes of an unfinished line or event are held: a stream that
    /// ends now was cut mid-event.
    pub fn has_pending(&self) -> bool {
        self.pos < self.buf.len() || self.has_data || self.event.is_some() || self.id.is_some()
    }

    /// The next complete event, `Ok(None)` when more bytes are needed.
    pub fn next_event(&mut self) -> Result<Option<SseEvent>, SseError> {
        if self.at_start {
            let avail = &self.buf[self.pos..];
            let n = avail.len().min(BOM.len());
            if avail[..n] != BOM[..n] {
                self.at_start = false;
            } else if n == BOM.len() {
                self.pos += BOM.len();
                self.at_start = false;
            } else {
                return Ok(None);
            }
        }
        loop {
            if self.skip_lf && self.pos < self.buf.len() {
                if self.buf[self.pos] == b'\n' {
                    self.pos += 1;
                }
                self.skip_lf = false;
            }
            let rest = &self.buf[self.pos..];
            let Some(rel) = find_eol(&rest[self.scanned..]).map(|i| i + self.scanned) else {
                self.scanned = rest.len();
                if self.discarding {
                    self.pos = self.buf.len();
                    self.scanned = 0;
                } else if rest.len() > self.max_size {
                    self.pos = self.buf.len();
                    self.scanned = 0;
                    self.discarding = true;
                    self.reset_event();
                    return Err(SseError::TooLarge {
                        limit: self.max_size,
                    });
                }
                return Ok(None);
            };
            let start = self.pos;
            let end = start + rel;
            let terminator = self.buf[end];
            self.pos = end + 1;
            self.scanned = 0;
            if terminator == b'\r' {
                // The `\n` of a CRLF may not have arrived yet.
                self.skip_lf = true;
            }
            if self.discarding {
                self.discarding = false;
                continue;
            }
            if rel > self.max_size {
                self.reset_event();
                return Err(SseError::TooLarge {
                    limit: self.max_size,
                });
            }
            if rel == 0 {
                if let Some(ev) = self.dispatch() {
                    return Ok(Some(ev));
                }
                continue;
            }
            let Ok(line) = str::from_utf8(&self.buf[start..end]) else {
                self.reset_event();
                return Err(SseError::InvalidUtf8);
            };
            let (field, value) = match line.find(':') {
                Some(0) => continue,
                Some(i) => {
                    let v = &line[i + 1..];
                    (&line[..i], v.strip_prefix(' ').unwrap_or(v))
                }
                None => (line, ""),
            };
            match field {
                "data" => {
                    let extra = value.len() + usize::from(self.has_data);
                    if self.data.len() + extra > self.max_size {
                        self.reset_event();
                        return Err(SseError::TooLarge {
                            limit: self.max_size,
                        });
                    }
                    if self.has_data {
                        self.data.push('\n');
                    }
                    self.data.push_str(value);
                    self.has_data = true;
                }
                "event" => self.event = Some(reuse(&mut self.spare_event, value)),
                // The spec ignores ids holding NUL.
                "id" if !value.contains('\0') => {
                    self.id = Some(reuse(&mut self.spare_id, value));
                }
                _ => {}
            }
        }
    }

    /// Hands a dispatched event's buffers back for the next events to reuse.
    /// Optional: a caller that recycles every event makes decoding allocate
    /// nothing per event once the buffers have grown to the stream's events.
    pub fn recycle(&mut self, event: SseEvent) {
        // Capacity 0 means no data has been collected since the dispatch.
        if self.data.capacity() == 0 && event.data.capacity() <= RECYCLE_MAX {
            let mut data = event.data;
            data.clear();
            self.data = data;
        }
        for (spare, old) in [
            (&mut self.spare_event, event.event),
            (&mut self.spare_id, event.id),
        ] {
            if let Some(old) = old
                && old.capacity() > spare.capacity()
                && old.capacity() <= RECYCLE_MAX
            {
                *spare = old;
            }
        }
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        if !self.has_data {
            // The spec drops events without data, along with their fields.
            self.event = None;
            self.id = None;
            return None;
        }
        self.has_data = false;
        Some(SseEvent {
            event: self.event.take(),
            data: std::mem::take(&mut self.data),
            id: self.id.take(),
        })
    }

    fn reset_event(&mut self) {
        self.data.clear();
        self.has_data = false;
        self.event = None;
        self.id = None;
    }
}

/// `value` in `spare`'s buffer (taken), allocating only when it is too small.
fn reuse(spare: &mut String, value: &str) -> String {
    let mut s = std::mem::take(spare);
    s.clear();
    s.push_str(value);
    s
}

/// Position of the first `\r` or `\n`, eight bytes at a time.
fn find_eol(hay: &[u8]) -> Option<usize> {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    const LF: u64 = LO * b'\n' as u64;
    const CR: u64 = LO * b'\r' as u64;
    let mut chunks = hay.chunks_exact(8);
    let mut offset = 0;
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let w = u64::from_le_bytes(word);
        let a = w ^ LF;
        let b = w ^ CR;
        // Classic "has a zero byte" test: may report false positives above a
        // real match, never misses one, so a hit is confirmed bytewise below.
        let zero = (a.wrapping_sub(LO) & !a & HI) | (b.wrapping_sub(LO) & !b & HI);
        if zero != 0
            && let Some(i) = chunk.iter().position(|&c| c == b'\n' || c == b'\r')
        {
            return Some(offset + i);
        }
        offset += 8;
    }
    chunks
        .remainder()
        .iter()
        .position(|&c| c == b'\n' || c == b'\r')
        .map(|i| offset + i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(dec: &mut SseDecoder) -> Vec<SseEvent> {
        let mut out = Vec::new();
        while let Some(ev) = dec.next_event().unwrap() {
            out.push(ev);
        }
        out
    }

    fn decode(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut dec = SseDecoder::new();
        let mut out = Vec::new();
        for c in chunks {
            dec.push(c);
            out.extend(decode_all(&mut dec));
        }
        out
    }

    fn data(d: &str) -> SseEvent {
        SseEvent {
            data: d.to_owned(),
            ..SseEvent::default()
        }
    }

    const SAMPLE: &str = "\u{FEFF}: comment\r\n\
        event: delta\r\n\
        id: 7\r\n\
        data: héllo 🌍\r\n\
        data:second\r\n\
        \r\n\
        data: lf only\n\n\
        data: cr only\r\r\
        event: nodata\n\n\
        data\n\n\
        data:  two spaces\n\
        retry: 100\n\
        unknown: x\n\
        \n\
        data: [DONE]\n\n";

    fn sample_events() -> Vec<SseEvent> {
        vec![
            SseEvent {
                event: Some("delta".into()),
                data: "héllo 🌍\nsecond".into(),
                id: Some("7".into()),
            },
            data("lf only"),
            data("cr only"),
            data(""),
            data(" two spaces"),
            data("[DONE]"),
        ]
    }

    #[test]
    fn decodes_fields_line_endings_and_comments() {
        assert_eq!(decode(&[SAMPLE.as_bytes()]), sample_events());
    }

    #[test]
    fn splitting_at_every_position_gives_the_same_events() {
        let bytes = SAMPLE.as_bytes();
        let expected = sample_events();
        for i in 0..=bytes.len() {
            assert_eq!(
                decode(&[&bytes[..i], &bytes[i..]]),
                expected,
                "split at {i}"
            );
            for j in i..=bytes.len() {
                let got = decode(&[&bytes[..i], &bytes[i..j], &bytes[j..]]);
                assert_eq!(got, expected, "split at {i},{j}");
            }
        }
        let singles: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(decode(&singles), expected);
    }

    #[test]
    fn crlf_split_between_cr_and_lf_is_one_line_end() {
        let got = decode(&[b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"]);
        assert_eq!(got, vec![data("a\nb")]);
    }

    #[test]
    fn incomplete_event_is_held_back() {
        let mut dec = SseDecoder::new();
        dec.push(b"data: x\n");
        assert_eq!(dec.next_event().unwrap(), None);
        assert!(dec.has_pending());
        dec.push(b"\n");
        assert_eq!(dec.next_event().unwrap(), Some(data("x")));
        assert!(!dec.has_pending());
    }

    #[test]
    fn invalid_utf8_is_an_error_and_decoding_resumes() {
        let mut dec = SseDecoder::new();
        dec.push(b"data: \xff\xfe\n\ndata: ok\n\n");
        assert_eq!(dec.next_event(), Err(SseError::InvalidUtf8));
        // The blank line after the bad one has nothing to dispatch.
        assert_eq!(dec.next_event().unwrap(), Some(data("ok")));
    }

    #[test]
    fn oversized_line_is_an_error_not_growth() {
        let mut dec = SseDecoder::with_max_size(16);
        dec.push(b"data: 0123456789");
        assert_eq!(dec.next_event().unwrap(), None);
        dec.push(b"abcdefghij");
        assert_eq!(dec.next_event(), Err(SseError::TooLarge { limit: 16 }));
        dec.push(b"still the same line");
        assert_eq!(dec.next_event().unwrap(), None);
        assert!(dec.buf.len() <= 32, "buffer kept {} bytes", dec.buf.len());
        dec.push(b"\n\ndata: ok\n\n");
        assert_eq!(dec.next_event().unwrap(), Some(data("ok")));
    }

    #[test]
    fn oversized_event_is_an_error() {
        let mut dec = SseDecoder::with_max_size(12);
        dec.push(b"data: 12345\ndata: 67890\ndata: abcde\n\n");
        assert_eq!(dec.next_event(), Err(SseError::TooLarge { limit: 12 }));
        assert_eq!(dec.next_event().unwrap(), None);
    }

    #[test]
    fn recycled_buffers_are_reused_and_events_unchanged() {
        let mut dec = SseDecoder::new();
        let mut plain = SseDecoder::new();
        dec.push(SAMPLE.as_bytes());
        plain.push(SAMPLE.as_bytes());
        let mut got = Vec::new();
        while let Some(ev) = dec.next_event().unwrap() {
            got.push(ev.clone());
            dec.recycle(ev);
        }
        assert_eq!(got, sample_events());
        assert_eq!(got, decode_all(&mut plain));
        dec.push(b"event: e\nid: 1\ndata: abc\n\n");
        let ev = dec.next_event().unwrap().unwrap();
        let (data, event) = (ev.data.as_ptr(), ev.event.as_ref().unwrap().as_ptr());
        dec.recycle(ev);
        dec.push(b"event: f\nid: 2\ndata: xyz\n\n");
        let ev = dec.next_event().unwrap().unwrap();
        assert_eq!((ev.data.as_str(), ev.event.as_deref()), ("xyz", Some("f")));
        assert_eq!(ev.id.as_deref(), Some("2"));
        assert_eq!(ev.data.as_ptr(), data);
        assert_eq!(ev.event.as_ref().unwrap().as_ptr(), event);
    }

    #[test]
    fn find_eol_matches_naive_scan() {
        let mut hay = vec![b'a'; 40];
        assert_eq!(find_eol(&hay), None);
        for i in 0..hay.len() {
            for c in [b'\n', b'\r'] {
                hay[i] = c;
                assert_eq!(find_eol(&hay), Some(i));
                hay[i] = b'a';
            }
        }
        // Bytes that trip the zero-byte test's false positives.
        let tricky = [0x0bu8, 0x0e, 0x8a, 0x8d, 0x0c, 0x01, 0x00, 0x0b, 0x0a];
        assert_eq!(find_eol(&tricky), Some(8));
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..200 {
            let mut dec = SseDecoder::with_max_size(64);
            for _ in 0..20 {
                let mut chunk = Vec::new();
                for _ in 0..(seed % 50) {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    let b = match seed % 8 {
                        0 => b'\n',
                        1 => b'\r',
                        2 => b':',
                        _ => (seed >> 8) as u8,
                    };
                    chunk.push(b);
                }
                dec.push(&chunk);
                // Every error consumes input, so this always reaches Ok(None).
                while !matches!(dec.next_event(), Ok(None)) {}
            }
        }
    }
}
