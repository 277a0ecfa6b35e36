//! Pure fusion functions: two ranked candidate lists in, one explained list out.

use std::collections::HashMap;

use registry_core::retrieval::ScoredId;

use crate::{HybridHit, Leg, LegHit};

/// Joins the legs by asset id, each hit carrying its 1-based rank and raw score per leg.
/// An id listed twice in one leg keeps its best (first) rank.
fn join(text: &[ScoredId], vector: &[ScoredId]) -> Vec<HybridHit> {
    let mut order: Vec<HybridHit> = Vec::with_capacity(text.len() + vector.len());
    let mut at: HashMap<&str, usize> = HashMap::with_capacity(text.len() + vector.len());
    for (leg, list) in [(Leg::Text, text), (Leg::Vector, vector)] {
        for (i, s) in list.iter().enumerate() {
            let idx = *at.entry(s.asset_id.as_str()).or_insert_with(|| {
                order.push(HybridHit {
                    asset_id: s.asset_id.clone(),
                    score: 0.0,
                    text: None,
                    vector: None,
                    found_by: vec![],
                });
                order.len() - 1
            });
            let hit = &mut order[idx];
            let slot = match leg {
                Leg::Text => &mut hit.text,
                Leg::Vector => &mut hit.vector,
            };
            if slot.is_none() {
                *slot = Some(LegHit {
                    rank: i + 1,
                    score: s.score,
                });
                hit.found_by.push(leg);
            }
        }
    }
    order
}

/// Best first; equal fused scores are ordered by asset id so results are deterministic.
fn sort(hits: &mut [HybridHit]) {
    hits.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.asset_id.cmp(&b.asset_id))
    });
}

/// Reciprocal rank fusion: `score = Σ_leg 1 / (k + rank_leg)` (rank 1-based) over the legs that
/// found the id. The lists are taken in the order given (best first).
pub fn rrf_fuse(text: &[ScoredId], vector: &[ScoredId], k: f32) -> Vec<HybridHit> {
    let mut hits = join(text, vector);
    for h in &mut hits {
        h.score = [h.text, h.vector]
            .iter()
            .flatten()
            .map(|l| 1.0 / (k + l.rank as f32))
            .sum();
    }
    sort(&mut hits);
    hits
}

/// The best score of a leg; `None` for an empty leg.
fn best(list: &[ScoredId]) -> Option<f32> {
    list.iter().map(|s| s.score).reduce(f32::max)
}

/// Maps a raw score into [0, 1] against the leg's best, from the scores' theoretical floor (0:
/// a BM25 score is never below it, and a cosine below it is no evidence). Unlike min-max over
/// the candidate list, two candidates of nearly equal score stay nearly equal (min-max would
/// put them at 1 and 0, and no authority boost could reorder them), and a list's weakest
/// candidate keeps what it scored. A leg whose best is not above the floor gives every
/// candidate 1 if all are equal, else 0.
fn normalise(score: f32, best: f32) -> f32 {
    if best > 0.0 {
        score.max(0.0) / best
    } else if score >= best {
        1.0
    } else {
        0.0
    }
}

/// Convex combination: `score = alpha · norm(vector) + (1 − alpha) · norm(text)`, where `norm`
/// divides by that leg's best score from a floor of 0 (Bruch et al., "An Analysis of Fusion
/// Functions for Hybrid Retrieval", 2023: theoretical-min normalisation) and a leg that did not
/// find the id counts 0.
pub fn convex_fuse(text: &[ScoredId], vector: &[ScoredId], alpha: f32) -> Vec<HybridHit> {
    let tb = best(text);
    let vb = best(vector);
    let mut hits = join(text, vector);
    for h in &mut hits {
        let t = match (h.text, tb) {
            (Some(l), Some(b)) => normalise(l.score, b),
            _ => 0.0,
        };
        let v = match (h.vector, vb) {
            (Some(l), Some(b)) => normalise(l.score, b),
            _ => 0.0,
        };
        h.score = alpha * v + (1.0 - alpha) * t;
    }
    sort(&mut hits);
    hits
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: &[(&str, f32)]) -> Vec<ScoredId> {
        items
            .iter()
            .map(|(id, s)| ScoredId {
                asset_id: (*id).to_string(),
                score: *s,
            })
            .collect()
    }

    fn ids(hits: &[HybridHit]) -> Vec<&str> {
        hits.iter().map(|h| h.asset_id.as_str()).collect()
    }

    fn close(a: f32, b: f32) -> bool {
        (a - b).abs() < 1e-6
    }

    #[test]
    fn rrf_sums_reciprocal_ranks_over_legs() {
        let text = list(&[("a", 9.0), ("b", 5.0), ("c", 1.0)]);
        let vector = list(&[("c", 0.9), ("a", 0.8), ("d", 0.1)]);
        let hits = rrf_fuse(&text, &vector, 60.0);
        assert_eq!(ids(&hits), ["a", "c", "b", "d"]);
        let a = &hits[0];
        assert!(close(a.score, 1.0 / 61.0 + 1.0 / 62.0));
        assert_eq!(
            a.text,
            Some(LegHit {
                rank: 1,
                score: 9.0
            })
        );
        assert_eq!(
            a.vector,
            Some(LegHit {
                rank: 2,
                score: 0.8
            })
        );
        assert_eq!(a.found_by, [Leg::Text, Leg::Vector]);
        let c = &hits[1];
        assert!(close(c.score, 1.0 / 63.0 + 1.0 / 61.0));
        let d = &hits[3];
        assert_eq!(d.found_by, [Leg::Vector]);
        assert_eq!(d.text, None);
        assert!(close(d.score, 1.0 / 63.0));
    }

    #[test]
    fn rrf_ignores_raw_scores_and_breaks_ties_by_id() {
        // Same ranks, wildly different raw scores: fused scores are equal, order is by id.
        let hits = rrf_fuse(&list(&[("z", 1000.0)]), &list(&[("y", 0.001)]), 60.0);
        assert_eq!(ids(&hits), ["y", "z"]);
        assert!(close(hits[0].score, hits[1].score));
    }

    #[test]
    fn rrf_single_leg_keeps_leg_order() {
        let text = list(&[("a", 3.0), ("b", 2.0), ("c", 1.0)]);
        let hits = rrf_fuse(&text, &[], 60.0);
        assert_eq!(ids(&hits), ["a", "b", "c"]);
        assert!(
            hits.iter()
                .all(|h| h.vector.is_none() && h.found_by == [Leg::Text])
        );
        assert!(rrf_fuse(&[], &[], 60.0).is_empty());
    }

    #[test]
    fn duplicate_id_in_a_leg_keeps_first_rank() {
        let text = list(&[("a", 3.0), ("a", 2.0), ("b", 1.0)]);
        let hits = rrf_fuse(&text, &[], 0.0);
        assert_eq!(ids(&hits), ["a", "b"]);
        assert_eq!(hits[0].text.unwrap().rank, 1);
        assert_eq!(hits[0].found_by, [Leg::Text]);
        assert_eq!(hits[1].text.unwrap().rank, 3);
    }

    #[test]
    fn convex_divides_each_leg_by_its_best() {
        // text: a=10 (1.0), b=6 (0.6), c=2 (0.2); vector: c=0.9 (1.0), d=0.45 (0.5)
        let text = list(&[("a", 10.0), ("b", 6.0), ("c", 2.0)]);
        let vector = list(&[("c", 0.9), ("d", 0.45)]);
        let hits = convex_fuse(&text, &vector, 0.5);
        let score = |id: &str| hits.iter().find(|h| h.asset_id == id).unwrap().score;
        assert!(close(score("a"), 0.5));
        assert!(close(score("b"), 0.3));
        assert!(close(score("c"), 0.6));
        assert!(close(score("d"), 0.25));
        assert_eq!(ids(&hits), ["c", "a", "b", "d"]);
    }

    #[test]
    fn convex_keeps_near_equal_candidates_near_equal() {
        // Min-max would map these to 1 and 0; divided by the best they stay within 2%.
        let text = list(&[("a", 5.1), ("b", 5.0)]);
        let vector = list(&[("b", 0.81), ("a", 0.80)]);
        let hits = convex_fuse(&text, &vector, 0.4);
        assert!((hits[0].score - hits[1].score).abs() < 0.02, "{hits:?}");
        // A negative cosine is no evidence: it counts 0, not less.
        let neg = convex_fuse(&[], &list(&[("v", 0.5), ("w", -0.3)]), 1.0);
        assert!(close(neg[1].score, 0.0));
    }

    #[test]
    fn convex_alpha_extremes_select_one_leg() {
        let text = list(&[("a", 10.0), ("b", 1.0)]);
        let vector = list(&[("b", 0.9), ("a", 0.1)]);
        assert_eq!(ids(&convex_fuse(&text, &vector, 0.0)), ["a", "b"]);
        assert_eq!(ids(&convex_fuse(&text, &vector, 1.0)), ["b", "a"]);
    }

    #[test]
    fn convex_constant_leg_normalises_to_one() {
        let text = list(&[("a", 4.0), ("b", 4.0)]);
        let hits = convex_fuse(&text, &[], 0.3);
        assert!(hits.iter().all(|h| close(h.score, 0.7)));
        let single = convex_fuse(&[], &list(&[("v", -0.2)]), 0.3);
        assert!(close(single[0].score, 0.3));
    }

    #[test]
    fn fused_hits_serialise_as_explanations() {
        let hits = rrf_fuse(&list(&[("a", 2.0)]), &list(&[("a", 0.5)]), 60.0);
        let json = serde_json::to_value(&hits[0]).unwrap();
        assert_eq!(json["asset_id"], "a");
        assert_eq!(json["text"]["rank"], 1);
        assert_eq!(json["vector"]["score"], 0.5);
        assert_eq!(json["found_by"], serde_json::json!(["text", "vector"]));
    }
}
