//! Reads the rows of `COPY (SELECT <bigint>, <bytea> ...) TO STDOUT (FORMAT
//! binary)` as they stream in, without a `Row` per row: a search by meaning
//! scans the blocks of 10^5 compact vectors (40 MB at 384 dimensions) and
//! scores each block as its bytes arrive (binary format: PostgreSQL's `COPY`
//! reference, "Binary Format").

use crate::error::StoreError;

/// The signature that starts a binary `COPY` stream.
const SIGNATURE: &[u8; 11] = b"PGCOPY\n\xff\r\n\0";

/// Where a [`Pairs`] reader stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Header,
    Rows,
    Done,
}

/// A reader of `(bigint, bytea)` rows fed the stream a chunk at a time.
#[derive(Debug)]
pub(super) struct Pairs {
    /// The start of a row (or of the header) that a chunk cut.
    carry: Vec<u8>,
    state: State,
}

fn corrupt(what: &str) -> StoreError {
    StoreError::Corrupt(format!("reading a binary COPY stream: {what}"))
}

impl Pairs {
    /// A reader expecting the stream's header.
    pub(super) fn new() -> Self {
        Self {
            carry: Vec::new(),
            state: State::Header,
        }
    }

    /// Reads what `chunk` completes, calling `each` with every whole row's
    /// two values (rows whose bytes are NULL are skipped).
    pub(super) fn feed(
        &mut self,
        chunk: &[u8],
        mut each: impl FnMut(i64, &[u8]),
    ) -> Result<(), StoreError> {
        if self.carry.is_empty() {
            let used = self.parse(chunk, &mut each)?;
            self.carry.extend_from_slice(&chunk[used..]);
        } else {
            let mut joined = std::mem::take(&mut self.carry);
            joined.extend_from_slice(chunk);
            let used = self.parse(&joined, &mut each)?;
            joined.drain(..used);
            self.carry = joined;
        }
        Ok(())
    }

    /// Ends the stream: its trailer must have been read, and nothing after.
    pub(super) fn finish(self) -> Result<(), StoreError> {
        if self.state != State::Done || !self.carry.is_empty() {
            return Err(corrupt("the stream ended inside a row"));
        }
        Ok(())
    }

    /// Reads every whole item of `buf`; returns how many bytes it used.
    fn parse(
        &mut self,
        buf: &[u8],
        each: &mut impl FnMut(i64, &[u8]),
    ) -> Result<usize, StoreError> {
        let mut at = 0;
        loop {
            match self.state {
                State::Done => {
                    return if at == buf.len() {
                        Ok(at)
                    } else {
                        Err(corrupt("bytes after the trailer"))
                    };
                }
                State::Header => {
                    let Some(fixed) = buf.get(at..at + 19) else {
                        return Ok(at);
                    };
                    if &fixed[..11] != SIGNATURE {
                        return Err(corrupt("no PGCOPY signature"));
                    }
                    let ext = be_u32(&fixed[15..19]) as usize;
                    if buf.len() < at + 19 + ext {
                        return Ok(at);
                    }
                    at += 19 + ext;
                    self.state = State::Rows;
                }
                State::Rows => {
                    let Some(count) = buf.get(at..at + 2) else {
                        return Ok(at);
                    };
                    match i16::from_be_bytes([count[0], count[1]]) {
                        -1 => {
                            at += 2;
                            self.state = State::Done;
                        }
                        2 => match row(&buf[at + 2..])? {
                            Some((id, bytes, used)) => {
                                if let Some(bytes) = bytes {
                                    each(id, bytes);
                                }
                                at += 2 + used;
                            }
                            None => return Ok(at),
                        },
                        n => return Err(corrupt(&format!("a row of {n} fields, not 2"))),
                    }
                }
            }
        }
    }
}

fn be_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// One row read whole: the id, the bytes (`None` when NULL) and the length
/// of the row's fields.
type WholeRow<'a> = (i64, Option<&'a [u8]>, usize);

/// One row's two fields from the start of `buf`; `None` when `buf` holds
/// only part of it.
fn row(buf: &[u8]) -> Result<Option<WholeRow<'_>>, StoreError> {
    let Some(head) = buf.get(..12) else {
        return Ok(None);
    };
    if i32::from_be_bytes([head[0], head[1], head[2], head[3]]) != 8 {
        return Err(corrupt("the id is not a bigint"));
    }
    let mut id = [0_u8; 8];
    id.copy_from_slice(&head[4..12]);
    let id = i64::from_be_bytes(id);
    let Some(len) = buf.get(12..16) else {
        return Ok(None);
    };
    let len = i32::from_be_bytes([len[0], len[1], len[2], len[3]]);
    if len < 0 {
        return Ok(Some((id, None, 16)));
    }
    let len = len as usize;
    Ok(buf
        .get(16..16 + len)
        .map(|bytes| (id, Some(bytes), 16 + len)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream of `rows` as PostgreSQL writes it.
    fn stream(rows: &[(i64, Option<&[u8]>)]) -> Vec<u8> {
        let mut out = SIGNATURE.to_vec();
        out.extend_from_slice(&0_u32.to_be_bytes());
        out.extend_from_slice(&3_u32.to_be_bytes());
        out.extend_from_slice(b"ext");
        for (id, bytes) in rows {
            out.extend_from_slice(&2_i16.to_be_bytes());
            out.extend_from_slice(&8_i32.to_be_bytes());
            out.extend_from_slice(&id.to_be_bytes());
            match bytes {
                Some(b) => {
                    out.extend_from_slice(&i32::try_from(b.len()).unwrap().to_be_bytes());
                    out.extend_from_slice(b);
                }
                None => out.extend_from_slice(&(-1_i32).to_be_bytes()),
            }
        }
        out.extend_from_slice(&(-1_i16).to_be_bytes());
        out
    }

    #[test]
    fn rows_cut_anywhere_between_chunks_are_read_whole() {
        let rows: [(i64, Option<&[u8]>); 4] = [
            (1, Some(b"abc")),
            (-7, None),
            (1 << 40, Some(b"")),
            (9, Some(&[0xff; 300])),
        ];
        let all = stream(&rows);
        for size in [1, 2, 7, 19, 64, all.len()] {
            let mut pairs = Pairs::new();
            let mut got: Vec<(i64, Vec<u8>)> = Vec::new();
            for chunk in all.chunks(size) {
                pairs
                    .feed(chunk, |id, b| got.push((id, b.to_vec())))
                    .unwrap();
            }
            pairs.finish().unwrap();
            let want: Vec<(i64, Vec<u8>)> = rows
                .iter()
                .filter_map(|(id, b)| b.map(|b| (*id, b.to_vec())))
                .collect();
            assert_eq!(got, want, "chunks of {size}");
        }
    }

    #[test]
    fn a_damaged_or_cut_stream_is_an_error() {
        let all = stream(&[(1, Some(b"abc"))]);
        let mut cut = Pairs::new();
        cut.feed(&all[..all.len() - 3], |_, _| {}).unwrap();
        assert!(cut.finish().is_err());
        let mut bad = all.clone();
        bad[0] = b'X';
        assert!(Pairs::new().feed(&bad, |_, _| {}).is_err());
        let mut three = all.clone();
        three[22..24].copy_from_slice(&3_i16.to_be_bytes());
        assert!(Pairs::new().feed(&three, |_, _| {}).is_err());
        let mut after = all;
        after.push(0);
        assert!(Pairs::new().feed(&after, |_, _| {}).is_err());
    }
}
