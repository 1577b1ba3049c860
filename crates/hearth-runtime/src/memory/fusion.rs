//! Merging rankings: reciprocal-rank fusion of the full-text and the vector
//! ranking (the store scores by meaning, `MemoryStore::nearest_memories`).

use std::collections::HashMap;

use hearth_core::records::memory::MemoryRecord;

/// Reciprocal-rank fusion's constant: 60, as in the paper that named it
/// (Cormack et al., 2009); it keeps one list's top hit from drowning out
/// agreement between the two.
pub(crate) const RRF_K: f64 = 60.0;

/// Which ranking found a memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Matched {
    /// Its words only.
    Text,
    /// Its meaning only.
    Vector,
    /// Both.
    Both,
}

impl Matched {
    /// `text`, `vector` or `both`, as the API names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Vector => "vector",
            Self::Both => "both",
        }
    }
}

/// One memory found, with its fused score (higher is better).
#[derive(Debug, Clone, PartialEq)]
pub struct FoundMemory {
    /// The memory.
    pub memory: MemoryRecord,
    /// Fused score; comparable within one search only.
    pub score: f64,
    /// Which ranking found it.
    pub matched: Matched,
}

/// Merges two rankings (each best first) with reciprocal-rank fusion: a
/// memory scores the sum of `1 / (RRF_K + rank)` over the lists it is in
/// (rank from 1), so one found by both beats one found by either alone at
/// the same rank. At most `limit`, best first; ties go to the newer memory.
pub(crate) fn fuse(
    text: Vec<MemoryRecord>,
    vector: Vec<MemoryRecord>,
    limit: usize,
) -> Vec<FoundMemory> {
    let mut by_id: HashMap<i64, FoundMemory> = HashMap::new();
    let lists = [(text, Matched::Text), (vector, Matched::Vector)];
    for (list, kind) in lists {
        for (rank, memory) in list.into_iter().enumerate() {
            #[expect(
                clippy::cast_precision_loss,
                reason = "ranks are at most a few hundred"
            )]
            let add = 1.0 / (RRF_K + (rank + 1) as f64);
            by_id
                .entry(memory.id)
                .and_modify(|f| {
                    f.score += add;
                    if f.matched != kind {
                        f.matched = Matched::Both;
                    }
                })
                .or_insert(FoundMemory {
                    memory,
                    score: add,
                    matched: kind,
                });
        }
    }
    let mut out: Vec<FoundMemory> = by_id.into_values().collect();
    out.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then(b.memory.id.cmp(&a.memory.id))
    });
    out.truncate(limit);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(id: i64) -> MemoryRecord {
        MemoryRecord {
            id,
            user_key: "u".into(),
            thread_key: None,
            text: format!("fact {id}"),
            run_id: None,
            created_at: 0,
            last_used_at: 0,
        }
    }

    fn ids(found: &[FoundMemory]) -> Vec<(i64, Matched)> {
        found.iter().map(|f| (f.memory.id, f.matched)).collect()
    }

    #[test]
    fn fusion_rewards_agreement_and_marks_where_each_came_from() {
        // 2 is second in both lists; 1 and 3 top one list each.
        let found = fuse(vec![m(1), m(2)], vec![m(3), m(2)], 10);
        assert_eq!(
            ids(&found),
            vec![(2, Matched::Both), (3, Matched::Vector), (1, Matched::Text)]
        );
        let both = 2.0 / (RRF_K + 2.0);
        assert!((found[0].score - both).abs() < 1e-12);
        // Equal scores (first of one list each): the newer memory first.
        assert!((found[1].score - found[2].score).abs() < 1e-12);
    }

    #[test]
    fn fusion_of_one_list_keeps_its_order_and_the_limit() {
        let found = fuse(vec![m(7), m(3), m(9)], Vec::new(), 2);
        assert_eq!(ids(&found), vec![(7, Matched::Text), (3, Matched::Text)]);
        let found = fuse(Vec::new(), vec![m(4)], 5);
        assert_eq!(ids(&found), vec![(4, Matched::Vector)]);
        assert!(fuse(Vec::new(), Vec::new(), 5).is_empty());
    }
}
