//! The second opinion: a logistic regression over the text's multilingual-e5-small vector
//! and the classifier's logit, trained offline with the classifier (`--bin train`) and
//! embedded as `model/vector.json`.
//!
//! The hashed n-grams see words; the vector sees what a sentence is about in any language it
//! was trained on, so a phrasing the corpus has no relative of ("the old ceiling on
//! discounts was retired") can still land near attacks it resembles. Stacked on the
//! classifier's logit it raised the cross-validated block rate at the same kept rate; the
//! figures are in the crate's README. A text is scored whole: its first
//! content tokens ([`VECTOR_TOKENS`]), with the model's query prefix ([`gate_vectors`]).
//!
//! The file is JSON (`format_version`, the embedding model's name and dimension, the token
//! cap, bias, the logit's weight, one weight per vector component, threshold and veto); a
//! file of another version, model or dimension is refused.

use std::sync::LazyLock;

use registry_core::error::CoreResult;
use registry_core::retrieval::Embedder;
use serde::{Deserialize, Serialize};

/// The embedding model whose vectors the second opinion reads.
pub const VECTOR_MODEL_NAME: &str = "multilingual-e5-small";
/// Its dimension.
pub const VECTOR_DIM: usize = 384;
/// Version of `model/vector.json`; a reader refuses any other.
pub const VECTOR_FORMAT: u32 = 1;
/// The classifier's logit enters divided by this.
const LOGIT_SCALE: f32 = 4.0;
/// Content tokens of a text that are embedded: its prefix within them (the model's window is
/// 256 tokens with the query prefix and the special tokens).
pub const VECTOR_TOKENS: usize = 240;

/// The stacked model: `sigmoid(bias + logit·logit(classifier score)/4 + weights·vector)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VectorModel {
    pub format_version: u32,
    /// The embedding model ([`VECTOR_MODEL_NAME`]).
    pub embedding_model: String,
    pub dim: usize,
    /// Content tokens of the text that are embedded (its prefix within them).
    pub max_tokens: usize,
    pub bias: f32,
    /// Weight of the classifier's scaled logit.
    pub logit: f32,
    /// One weight per vector component.
    pub weights: Vec<f32>,
    /// Stacked score at or above which a text is hostile (chosen by cross-validation).
    pub threshold: f32,
    /// Stacked score below which a rule verdict alone is left as steering.
    pub veto: f32,
}

/// The stacked model's inputs: the vector's components (indices `0..dim`) and the
/// classifier's scaled logit (index `dim`).
pub fn features(classifier_score: f32, vector: &[f32]) -> crate::classifier::Features {
    let s = classifier_score.clamp(1e-4, 1.0 - 1e-4);
    let logit = (s / (1.0 - s)).ln() / LOGIT_SCALE;
    vector
        .iter()
        .enumerate()
        .map(|(i, x)| (i as u32, *x))
        .chain([(vector.len() as u32, logit)])
        .collect()
}

fn sigmoid(z: f32) -> f32 {
    1.0 / (1.0 + (-z).exp())
}

impl VectorModel {
    /// The stacked score, or `None` when `vector` is not of this model's dimension.
    pub fn score(&self, classifier_score: f32, vector: &[f32]) -> Option<f32> {
        if vector.len() != self.dim || self.weights.len() != self.dim {
            return None;
        }
        let z = features(classifier_score, vector)
            .iter()
            .fold(self.bias, |z, (i, x)| {
                z + x * self.weights.get(*i as usize).copied().unwrap_or(self.logit)
            });
        Some(sigmoid(z))
    }

    /// Reads the file format; `None` for another version, embedding model or dimension.
    pub fn from_json(s: &str) -> Option<VectorModel> {
        let m: VectorModel = serde_json::from_str(s).ok()?;
        (m.format_version == VECTOR_FORMAT
            && m.embedding_model == VECTOR_MODEL_NAME
            && m.dim == VECTOR_DIM
            && m.weights.len() == VECTOR_DIM
            && m.max_tokens == VECTOR_TOKENS)
            .then_some(m)
    }
}

/// Fits the stacked model on `(classifier score, vector)` pairs (`ys`: attack) by full-batch
/// Adam on the mean class-balanced log loss plus `l2 / 2 · |w|²` (a small dense problem: 385
/// inputs; stochastic steps on it oscillate). Deterministic. Threshold 0.5, veto 0 until the
/// trainer chooses them.
pub fn fit(xs: &[(f32, &[f32])], ys: &[bool], l2: f64, iterations: usize) -> VectorModel {
    assert_eq!(xs.len(), ys.len());
    let rows: Vec<Vec<f64>> = xs
        .iter()
        .map(|(s, v)| features(*s, v).iter().map(|(_, x)| f64::from(*x)).collect())
        .collect();
    let d = VECTOR_DIM + 1;
    assert!(
        rows.iter().all(|r| r.len() == d),
        "vectors of {VECTOR_DIM} components"
    );
    let pos = ys.iter().filter(|y| **y).count().max(1) as f64;
    let neg = ys.iter().filter(|y| !**y).count().max(1) as f64;
    let n = xs.len().max(1) as f64;
    let (wp, wn) = (n / (2.0 * pos), n / (2.0 * neg));
    // Parameters: d weights, then the bias.
    let mut w = vec![0f64; d + 1];
    let (mut m, mut v) = (vec![0f64; d + 1], vec![0f64; d + 1]);
    let (lr, b1, b2, eps): (f64, f64, f64, f64) = (0.05, 0.9, 0.999, 1e-8);
    let mut g = vec![0f64; d + 1];
    for step in 1..=iterations {
        g.iter_mut().for_each(|x| *x = 0.0);
        for (r, y) in rows.iter().zip(ys) {
            let z = w[d] + r.iter().zip(&w).map(|(x, w)| x * w).sum::<f64>();
            let p = 1.0 / (1.0 + (-z).exp());
            let e = (p - if *y { 1.0 } else { 0.0 }) * if *y { wp } else { wn } / n;
            for (gk, x) in g.iter_mut().zip(r) {
                *gk += e * x;
            }
            g[d] += e;
        }
        for k in 0..d {
            g[k] += l2 * w[k];
        }
        let (c1, c2) = (1.0 - b1.powi(step as i32), 1.0 - b2.powi(step as i32));
        for k in 0..=d {
            m[k] = b1 * m[k] + (1.0 - b1) * g[k];
            v[k] = b2 * v[k] + (1.0 - b2) * g[k] * g[k];
            w[k] -= lr * (m[k] / c1) / ((v[k] / c2).sqrt() + eps);
        }
    }
    VectorModel {
        format_version: VECTOR_FORMAT,
        embedding_model: VECTOR_MODEL_NAME.into(),
        dim: VECTOR_DIM,
        max_tokens: VECTOR_TOKENS,
        bias: w[d] as f32,
        logit: w[VECTOR_DIM] as f32,
        weights: w[..VECTOR_DIM].iter().map(|x| *x as f32).collect(),
        threshold: 0.5,
        veto: 0.0,
    }
}

/// The embedded second opinion. A corrupt file is a build defect, caught by the crate's tests.
pub static VECTOR_MODEL: LazyLock<VectorModel> = LazyLock::new(|| {
    VectorModel::from_json(include_str!("../model/vector.json"))
        .expect("embedded vector model is well-formed")
});

/// The vectors the second opinion reads, one per text: each text's prefix within the model's
/// token cap, embedded as a query. Training and the gate both call this, so they see the same
/// vectors. `embedder` must be [`VECTOR_MODEL_NAME`]; another model is refused with `None`.
pub fn gate_vectors(embedder: &dyn Embedder, texts: &[&str]) -> CoreResult<Option<Vec<Vec<f32>>>> {
    if embedder.info().name != VECTOR_MODEL_NAME || embedder.info().dim != VECTOR_DIM {
        return Ok(None);
    }
    let cap = VECTOR_TOKENS;
    let cut: Vec<&str> = texts
        .iter()
        .map(|t| embedder.prefix_within(t, cap))
        .collect::<CoreResult<_>>()?;
    embedder.embed_query(&cut).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_model_loads_and_refuses_other_files() {
        let m = &*VECTOR_MODEL;
        assert_eq!(m.weights.len(), VECTOR_DIM);
        assert!(m.threshold > 0.0 && m.threshold < 1.0);
        let mut other = m.clone();
        other.embedding_model = "all-MiniLM-L6-v2".into();
        let json = serde_json::to_string(&other).unwrap();
        assert!(VectorModel::from_json(&json).is_none());
        other = m.clone();
        other.format_version = 0;
        assert!(VectorModel::from_json(&serde_json::to_string(&other).unwrap()).is_none());
        assert!(VectorModel::from_json("{}").is_none());
        // A vector of another dimension gives no score rather than a wrong one.
        assert_eq!(m.score(0.5, &[0.0; 8]), None);
        let s = m.score(0.5, &[0.0; VECTOR_DIM]).unwrap();
        assert!((0.0..=1.0).contains(&s));
    }
}
