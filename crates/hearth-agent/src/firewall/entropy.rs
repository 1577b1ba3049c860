//! Character statistics used to tell random tokens from words.
//!
//! Only consulted in key-like context (`api_key=...`), so the thresholds can
//! be moderate: they must reject identifiers, words and paths, not prove
//! randomness.

/// Shannon entropy of `bytes` in bits per byte (0 for empty input).
pub(crate) fn shannon(bytes: &[u8]) -> f64 {
    if bytes.is_empty() {
        return 0.0;
    }
    let mut counts = [0u32; 256];
    for &b in bytes {
        counts[usize::from(b)] += 1;
    }
    let len = bytes.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / len;
            -p * p.log2()
        })
        .sum()
}

/// Which character classes a value uses.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Classes {
    /// Has an ASCII uppercase letter.
    pub upper: bool,
    /// Has an ASCII lowercase letter.
    pub lower: bool,
    /// Has an ASCII digit.
    pub digit: bool,
}

impl Classes {
    /// The classes present in `bytes`.
    pub(crate) fn of(bytes: &[u8]) -> Self {
        let mut c = Self::default();
        for &b in bytes {
            c.upper |= b.is_ascii_uppercase();
            c.lower |= b.is_ascii_lowercase();
            c.digit |= b.is_ascii_digit();
        }
        c
    }

    /// Number of classes present (0 to 3).
    pub(crate) fn count(self) -> u8 {
        u8::from(self.upper) + u8::from(self.lower) + u8::from(self.digit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entropy_bounds() {
        assert_eq!(shannon(b""), 0.0);
        assert_eq!(shannon(b"aaaa"), 0.0);
        assert!((shannon(b"abcd") - 2.0).abs() < 1e-9);
        assert!((shannon(b"0123456789abcdef") - 4.0).abs() < 1e-9);
    }

    #[test]
    fn classes() {
        assert_eq!(Classes::of(b"aB3").count(), 3);
        assert_eq!(Classes::of(b"abc-_").count(), 1);
    }
}
