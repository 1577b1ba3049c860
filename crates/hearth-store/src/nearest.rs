//! Search by meaning, scored where the vectors are read: each stored vector
//! is compared with the query straight from its stored bytes (f32
//! little-endian) and only the best `keep` ids are held, so a search over
//! 10^5 facts neither copies every vector nor decodes every fact's text.
//! Backend-neutral: both backends feed their rows through [`Nearest`].

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

/// The `keep` stored vectors most similar to a query, fed one row at a time.
pub(crate) struct Nearest {
    query: Vec<f32>,
    query_norm: f32,
    keep: usize,
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
            keep,
            best: BinaryHeap::with_capacity(keep + 1),
        }
    }

    /// Scores the vector stored as `bytes` for memory `id`. Only vectors
    /// pointing the query's way at all (cosine > 0) can be kept, so an
    /// unrelated fact is not returned just because there are few.
    pub(crate) fn offer(&mut self, id: i64, bytes: &[u8]) {
        if self.keep == 0 {
            return;
        }
        let similarity = cosine_bytes(&self.query, self.query_norm, bytes);
        if similarity <= 0.0 {
            return;
        }
        let scored = Scored { similarity, id };
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
}
