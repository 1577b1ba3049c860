//! Search by meaning, scored where the vectors are read: each stored vector
//! is compared with the query straight from its stored bytes (f32
//! little-endian) and only the best `keep` ids are held, so a search over
//! 10^5 facts neither copies every vector nor decodes every fact's text.
//! Backend-neutral: both backends feed their rows through [`Nearest`].
//!
//! A search reads two copies of the vectors. First the compact copy (one
//! signed byte per component, [`compact_vector`], kept in its own table so
//! the scan reads nothing else): a quarter of the bytes of the f32 copy,
//! scored approximately to find [`candidates`] ids. Then the f32 copy of
//! those candidates only, scored exactly, so the result is the exact top
//! `keep` whenever the approximation ranks them among the candidates (it
//! errs by well under 1% of a cosine, and the candidates are four times
//! `keep`).

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

/// Floats summed side by side, so the compiler can use vector registers.
const LANES: usize = 8;

/// One scored memory id; the greater is the better match (ties go to the
/// newer memory, the greater id).
#[derive(Debug, Clone, Copy)]
struct Scored {
    similarity: f64,
    id: i64,
}

impl PartialEq for Scored {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Scored {}

impl PartialOrd for Scored {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Scored {
    fn cmp(&self, other: &Self) -> Ordering {
        self.similarity
            .total_cmp(&other.similarity)
            .then(self.id.cmp(&other.id))
    }
}

/// Bytes before the components of a compact vector: its scale and its
/// norm, each an f32 little-endian.
const COMPACT_HEADER: usize = 8;

/// The compact copy of `vector`: its scale (the largest magnitude over 127)
/// and its norm, then each component divided by the scale and rounded, one
/// signed byte each. A zero or non-finite vector gets scale 0 and scores 0.
pub(crate) fn compact_vector(vector: &[f32]) -> Vec<u8> {
    let largest = vector.iter().fold(0.0_f32, |m, x| m.max(x.abs()));
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    let scale = if largest.is_finite() && largest > 0.0 && norm.is_finite() {
        largest / 127.0
    } else {
        0.0
    };
    let mut out = Vec::with_capacity(COMPACT_HEADER + vector.len());
    out.extend_from_slice(&scale.to_le_bytes());
    out.extend_from_slice(&norm.to_le_bytes());
    out.extend(vector.iter().map(|x| {
        let q = if scale > 0.0 {
            (x / scale).round()
        } else {
            0.0
        };
        // In range by construction; `as` saturates (and maps NaN to 0).
        (q.clamp(-127.0, 127.0) as i8).to_le_bytes()[0]
    }));
    out
}

/// How many ids the compact scan hands to exact scoring for a search that
/// keeps `keep`.
pub(crate) fn candidates(keep: usize) -> usize {
    if keep == 0 {
        0
    } else {
        keep.saturating_mul(4).max(32)
    }
}

/// What a [`Nearest`] reads from each row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scoring {
    /// The f32 copy, exactly; only vectors pointing the query's way count.
    Exact,
    /// The compact copy, approximately; every vector counts, so one whose
    /// exact cosine is just above zero is not lost to rounding.
    Compact,
}

/// The `keep` stored vectors most similar to a query, fed one row at a time.
pub(crate) struct Nearest {
    query: Vec<f32>,
    query_norm: f32,
    /// The query's own compact copy, for [`Scoring::Compact`].
    compact_query: Vec<u8>,
    keep: usize,
    scoring: Scoring,
    /// The best so far, worst on top.
    best: BinaryHeap<Reverse<Scored>>,
}

impl Nearest {
    /// Starts a search for `query`, keeping at most `keep`.
    pub(crate) fn new(query: &[f32], keep: usize) -> Self {
        let query_norm = query.iter().map(|x| x * x).sum::<f32>().sqrt();
        Self {
            query: query.to_vec(),
            query_norm,
            compact_query: Vec::new(),
            keep,
            scoring: Scoring::Exact,
            best: BinaryHeap::with_capacity(keep + 1),
        }
    }

    /// Starts the compact scan of a search that keeps `keep`: it is fed
    /// compact vectors and keeps [`candidates`]`(keep)` ids.
    pub(crate) fn compact(query: &[f32], keep: usize) -> Self {
        let mut scan = Self::new(query, candidates(keep));
        scan.scoring = Scoring::Compact;
        scan.compact_query = compact_vector(query);
        scan
    }

    /// Scores the vector stored as `bytes` for memory `id`. Only vectors
    /// pointing the query's way at all (cosine > 0) can be kept, so an
    /// unrelated fact is not returned just because there are few.
    pub(crate) fn offer(&mut self, id: i64, bytes: &[u8]) {
        if self.keep == 0 {
            return;
        }
        let similarity = match self.scoring {
            Scoring::Exact => cosine_bytes(&self.query, self.query_norm, bytes),
            Scoring::Compact => cosine_compact(&self.compact_query, bytes),
        };
        if self.scoring == Scoring::Exact && similarity <= 0.0 {
            return;
        }
        self.keep_scored(Scored { similarity, id });
    }

    /// Adds what `other`, a search for the same query over other vectors,
    /// kept: the result is what one search over both would have kept.
    #[cfg_attr(
        all(not(feature = "postgres"), not(test)),
        expect(dead_code, reason = "only PostgreSQL's search splits its scan")
    )]
    pub(crate) fn absorb(&mut self, other: Nearest) {
        for Reverse(scored) in other.best {
            self.keep_scored(scored);
        }
    }

    /// Keeps `scored` if it is among the best `keep` so far.
    fn keep_scored(&mut self, scored: Scored) {
        if self.best.len() < self.keep {
            self.best.push(Reverse(scored));
        } else if self
            .best
            .peek()
            .is_some_and(|Reverse(worst)| scored > *worst)
        {
            self.best.pop();
            self.best.push(Reverse(scored));
        }
    }

    /// The kept ids with their similarity, best first.
    pub(crate) fn ranked(self) -> Vec<(i64, f64)> {
        let mut best: Vec<Scored> = self.best.into_iter().map(|Reverse(s)| s).collect();
        best.sort_by(|a, b| b.cmp(a));
        best.into_iter().map(|s| (s.id, s.similarity)).collect()
    }
}

/// Cosine similarity of `query` (whose norm is `query_norm`) and the vector
/// stored as `bytes`; 0 for a vector of another length, a damaged one (not
/// whole f32s) or a zero vector, which then cannot be kept instead of
/// failing the search.
pub(crate) fn cosine_bytes(query: &[f32], query_norm: f32, bytes: &[u8]) -> f64 {
    if bytes.len() != query.len() * 4 || query.is_empty() || query_norm == 0.0 {
        return 0.0;
    }
    let mut dot = [0.0_f32; LANES];
    let mut norm = [0.0_f32; LANES];
    let mut q = query.chunks_exact(LANES);
    let mut v = bytes.chunks_exact(4 * LANES);
    for (qs, vs) in q.by_ref().zip(v.by_ref()) {
        for i in 0..LANES {
            let x = f32::from_le_bytes([vs[4 * i], vs[4 * i + 1], vs[4 * i + 2], vs[4 * i + 3]]);
            dot[i] += qs[i] * x;
            norm[i] += x * x;
        }
    }
    let (mut dot, mut norm) = (dot.iter().sum::<f32>(), norm.iter().sum::<f32>());
    for (qx, c) in q.remainder().iter().zip(v.remainder().chunks_exact(4)) {
        let x = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        dot += qx * x;
        norm += x * x;
    }
    if norm == 0.0 {
        return 0.0;
    }
    f64::from(dot) / (f64::from(query_norm) * f64::from(norm).sqrt())
}

/// The approximate cosine similarity of two compact vectors
/// ([`compact_vector`]); 0 when their lengths differ or one is zero.
fn cosine_compact(query: &[u8], bytes: &[u8]) -> f64 {
    let (Some((qh, qc)), Some((vh, vc))) = (
        query.split_at_checked(COMPACT_HEADER),
        bytes.split_at_checked(COMPACT_HEADER),
    ) else {
        return 0.0;
    };
    if qc.len() != vc.len() || qc.is_empty() {
        return 0.0;
    }
    let scale = |h: &[u8]| f64::from(f32::from_le_bytes([h[0], h[1], h[2], h[3]]));
    let norm = |h: &[u8]| f64::from(f32::from_le_bytes([h[4], h[5], h[6], h[7]]));
    let (sq, sv, nq, nv) = (scale(qh), scale(vh), norm(qh), norm(vh));
    if !(sq > 0.0 && sv > 0.0 && nq > 0.0 && nv > 0.0) {
        return 0.0;
    }
    let dot = dot_i8(qc, vc);
    dot as f64 * sq * sv / (nq * nv)
}

/// The sum of products of two equal-length runs of signed bytes.
fn dot_i8(a: &[u8], b: &[u8]) -> i64 {
    #[cfg(target_arch = "x86_64")]
    {
        #[expect(
            unsafe_code,
            reason = "calling a #[target_feature] function; release builds optimise for size, \
                      which turns the compiler's own vectorising off"
        )]
        // SAFETY: `sse2::dot` needs only SSE2, which every x86_64 CPU has
        // (it is part of the target's baseline).
        unsafe {
            sse2::dot(a, b)
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    dot_i8_scalar(a, b)
}

/// [`dot_i8`] one byte at a time: the reference, and the code where there
/// is no SSE2.
#[cfg_attr(target_arch = "x86_64", cfg(test))]
fn dot_i8_scalar(a: &[u8], b: &[u8]) -> i64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| i64::from(i8::from_le_bytes([*x])) * i64::from(i8::from_le_bytes([*y])))
        .sum()
}

/// [`dot_i8`] sixteen bytes at a time with SSE2's packed multiply-add, which
/// scores a 384-byte vector in a few dozen instructions: the scan of 10^5
/// compact vectors is then bound by reading them, not by arithmetic.
#[cfg(target_arch = "x86_64")]
mod sse2 {
    use std::arch::x86_64::{
        __m128i, _mm_add_epi32, _mm_cvtsi128_si32, _mm_madd_epi16, _mm_set_epi64x,
        _mm_setzero_si128, _mm_shuffle_epi32, _mm_srai_epi16, _mm_unpackhi_epi8, _mm_unpacklo_epi8,
    };

    /// Blocks summed in 32-bit lanes before they are added up in 64 bits:
    /// each block adds at most 4 * 128^2 = 2^16 to a lane, so 2^14 blocks
    /// stay at 2^30, below `i32::MAX`.
    const BLOCKS_PER_FLUSH: usize = 1 << 14;

    /// Sixteen bytes as a vector, read without a raw pointer.
    #[target_feature(enable = "sse2")]
    fn load(bytes: &[u8]) -> __m128i {
        let half = |i: usize| {
            let mut b = [0_u8; 8];
            b.copy_from_slice(&bytes[i..i + 8]);
            i64::from_le_bytes(b)
        };
        _mm_set_epi64x(half(8), half(0))
    }

    /// The four 32-bit lanes of `v` added up (in 64 bits: together they may
    /// pass `i32::MAX`).
    #[target_feature(enable = "sse2")]
    fn lanes(v: __m128i) -> i64 {
        i64::from(_mm_cvtsi128_si32(v))
            + i64::from(_mm_cvtsi128_si32(_mm_shuffle_epi32::<1>(v)))
            + i64::from(_mm_cvtsi128_si32(_mm_shuffle_epi32::<2>(v)))
            + i64::from(_mm_cvtsi128_si32(_mm_shuffle_epi32::<3>(v)))
    }

    /// See [`super::dot_i8`].
    #[target_feature(enable = "sse2")]
    pub(super) fn dot(a: &[u8], b: &[u8]) -> i64 {
        let (mut ca, mut cb) = (a.chunks_exact(16), b.chunks_exact(16));
        let (mut total, mut acc, mut blocks) = (0_i64, _mm_setzero_si128(), 0);
        for (x, y) in ca.by_ref().zip(cb.by_ref()) {
            let (x, y) = (load(x), load(y));
            // Each byte next to itself, shifted right arithmetically: the
            // bytes widened to 16 bits with their sign.
            let (xl, yl) = (
                _mm_srai_epi16::<8>(_mm_unpacklo_epi8(x, x)),
                _mm_srai_epi16::<8>(_mm_unpacklo_epi8(y, y)),
            );
            let (xh, yh) = (
                _mm_srai_epi16::<8>(_mm_unpackhi_epi8(x, x)),
                _mm_srai_epi16::<8>(_mm_unpackhi_epi8(y, y)),
            );
            acc = _mm_add_epi32(acc, _mm_madd_epi16(xl, yl));
            acc = _mm_add_epi32(acc, _mm_madd_epi16(xh, yh));
            blocks += 1;
            if blocks == BLOCKS_PER_FLUSH {
                total += lanes(acc);
                (acc, blocks) = (_mm_setzero_si128(), 0);
            }
        }
        total += lanes(acc);
        for (x, y) in ca.remainder().iter().zip(cb.remainder()) {
            total += i64::from(i8::from_le_bytes([*x])) * i64::from(i8::from_le_bytes([*y]));
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::vector_to_bytes;

    fn cos(a: &[f32], b: &[f32]) -> f64 {
        let norm = a.iter().map(|x| x * x).sum::<f32>().sqrt();
        cosine_bytes(a, norm, &vector_to_bytes(b))
    }

    #[test]
    fn cosine_is_one_for_the_same_direction_and_zero_when_it_cannot_say() {
        assert!((cos(&[1.0, 2.0], &[2.0, 4.0]) - 1.0).abs() < 1e-6);
        assert!(cos(&[1.0, 0.0], &[0.0, 1.0]).abs() < 1e-12);
        assert!((cos(&[1.0, 0.0], &[-1.0, 0.0]) + 1.0).abs() < 1e-6);
        assert_eq!(cos(&[1.0], &[1.0, 0.0]), 0.0);
        assert_eq!(cos(&[0.0, 0.0], &[1.0, 0.0]), 0.0);
        assert_eq!(cos(&[1.0, 0.0], &[0.0, 0.0]), 0.0);
        assert_eq!(cos(&[], &[]), 0.0);
        // Not whole f32s: a damaged row.
        assert_eq!(cosine_bytes(&[1.0], 1.0, &[0, 0, 128]), 0.0);
    }

    #[test]
    fn cosine_of_long_vectors_matches_the_plain_sum() {
        // Longer than the lanes and not a multiple of them.
        let a: Vec<f32> = (0..19).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..19).map(|i| (i as f32 * 0.11).cos()).collect();
        let (mut dot, mut na, mut nb) = (0.0_f64, 0.0_f64, 0.0_f64);
        for (x, y) in a.iter().zip(&b) {
            dot += f64::from(*x) * f64::from(*y);
            na += f64::from(*x) * f64::from(*x);
            nb += f64::from(*y) * f64::from(*y);
        }
        let plain = dot / (na.sqrt() * nb.sqrt());
        assert!(
            (cos(&a, &b) - plain).abs() < 1e-5,
            "{} vs {plain}",
            cos(&a, &b)
        );
    }

    #[test]
    fn keeps_the_most_similar_best_first_and_drops_the_unrelated() {
        let mut n = Nearest::new(&[1.0, 0.0], 2);
        n.offer(1, &vector_to_bytes(&[0.0, 1.0])); // orthogonal: dropped
        n.offer(2, &vector_to_bytes(&[1.0, 1.0]));
        n.offer(3, &vector_to_bytes(&[1.0, 0.1]));
        n.offer(4, &vector_to_bytes(&[-1.0, 0.0])); // opposite: dropped
        n.offer(5, &vector_to_bytes(&[1.0, 0.5]));
        let ids: Vec<i64> = n.ranked().into_iter().map(|(id, _)| id).collect();
        assert_eq!(ids, vec![3, 5]);
        let mut none = Nearest::new(&[1.0, 0.0], 0);
        none.offer(1, &vector_to_bytes(&[1.0, 0.0]));
        assert!(none.ranked().is_empty());
    }

    #[test]
    fn ties_go_to_the_newer_memory() {
        let mut n = Nearest::new(&[1.0, 0.0], 2);
        for id in [7, 9, 8] {
            n.offer(id, &vector_to_bytes(&[2.0, 0.0]));
        }
        let ids: Vec<i64> = n.ranked().into_iter().map(|(id, _)| id).collect();
        assert_eq!(ids, vec![9, 8]);
    }

    /// A reproducible spread of vectors (xorshift), some pointing away.
    fn vectors(n: usize, dim: usize, seed: u64) -> Vec<Vec<f32>> {
        let mut x = seed | 1;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 2001) as f32 / 1000.0 - 1.0
        };
        (0..n).map(|_| (0..dim).map(|_| next()).collect()).collect()
    }

    #[test]
    fn compact_cosine_is_within_a_hundredth_of_the_exact_one() {
        let all = vectors(200, 37, 7);
        let query = &all[0];
        let norm = query.iter().map(|x| x * x).sum::<f32>().sqrt();
        let cq = compact_vector(query);
        for v in &all[1..] {
            let exact = cosine_bytes(query, norm, &vector_to_bytes(v));
            let approx = cosine_compact(&cq, &compact_vector(v));
            assert!((exact - approx).abs() < 0.01, "{exact} vs {approx}");
        }
        assert_eq!(cosine_compact(&cq, &compact_vector(&[0.0; 37])), 0.0);
        assert_eq!(cosine_compact(&cq, &compact_vector(&[1.0; 36])), 0.0);
        assert_eq!(cosine_compact(&cq, &[1, 2, 3]), 0.0);
        let nan = compact_vector(&[f32::NAN; 37]);
        assert_eq!(cosine_compact(&cq, &nan), 0.0);
        assert_eq!(cosine_compact(&nan, &cq), 0.0);
    }

    #[test]
    fn the_compact_scan_then_exact_scoring_finds_the_exact_best() {
        let all = vectors(3000, 64, 11);
        let query = vectors(1, 64, 99).remove(0);
        let keep = 10;
        let mut exact = Nearest::new(&query, keep);
        let mut scan = Nearest::compact(&query, keep);
        for (id, v) in (0..).zip(&all) {
            exact.offer(id, &vector_to_bytes(v));
            scan.offer(id, &compact_vector(v));
        }
        let mut rescored = Nearest::new(&query, keep);
        for (id, _) in scan.ranked() {
            rescored.offer(id, &vector_to_bytes(&all[usize::try_from(id).unwrap()]));
        }
        assert_eq!(rescored.ranked(), exact.ranked());
    }

    #[test]
    fn two_scans_of_halves_absorbed_keep_what_one_scan_keeps() {
        let all = vectors(1000, 16, 5);
        let query = vectors(1, 16, 77).remove(0);
        let mut one = Nearest::compact(&query, 10);
        let (mut even, mut odd) = (Nearest::compact(&query, 10), Nearest::compact(&query, 10));
        for (id, v) in (0..).zip(&all) {
            let c = compact_vector(v);
            one.offer(id, &c);
            if id % 2 == 0 { &mut even } else { &mut odd }.offer(id, &c);
        }
        even.absorb(odd);
        assert_eq!(even.ranked(), one.ranked());
    }

    #[test]
    fn the_compact_scan_keeps_candidates_pointing_away_too() {
        let mut scan = Nearest::compact(&[1.0, 0.0], 1);
        scan.offer(1, &compact_vector(&[-1.0, 0.0]));
        scan.offer(2, &compact_vector(&[0.0, 1.0]));
        assert_eq!(scan.ranked().len(), 2);
        assert_eq!(candidates(0), 0);
        assert_eq!(candidates(100), 400);
    }

    #[test]
    fn the_packed_dot_product_equals_the_plain_one() {
        let mut x: u32 = 12345;
        let mut byte = move || {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            (x >> 16) as u8
        };
        for len in [0, 1, 15, 16, 17, 384, 1000] {
            let a: Vec<u8> = (0..len).map(|_| byte()).collect();
            let b: Vec<u8> = (0..len).map(|_| byte()).collect();
            assert_eq!(dot_i8(&a, &b), dot_i8_scalar(&a, &b), "length {len}");
        }
        // The extremes, long enough to need more than one flush.
        let min = vec![0x80_u8; 16 * (1 << 15) + 40];
        assert_eq!(dot_i8(&min, &min), dot_i8_scalar(&min, &min));
        let max = vec![0x7f_u8; 16 * (1 << 15) + 40];
        assert_eq!(dot_i8(&min, &max), dot_i8_scalar(&min, &max));
    }
}
