//! The retrieval engine: hybrid search over a text index and a vector index, with fusion and a
//! per-hit explanation.
//!
//! The engine knows only the traits of `registry-core`; the embedded form plugs in tantivy and the
//! in-process vector index, a scale-out form plugs in other backends, and [`contract`] checks that
//! every backend keeps the same semantics.
//!
//! Both legs receive the caller's [`VisibilityFilter`] and apply it inside the index before
//! ranking, so fusion only ever sees admissible ids.

pub mod contract;
mod fusion;

use std::sync::Arc;

use registry_core::asset::AssetId;
use registry_core::retrieval::{
    Embedder, IndexKeys, TextDoc, TextIndex, VectorEntry, VectorIndex, VisibilityFilter,
};
use registry_core::{CoreError, CoreResult};
use serde::Serialize;

pub use fusion::{convex_fuse, rrf_fuse};

/// Texts embedded per call to the embedder while indexing.
pub const EMBED_BATCH: usize = 32;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("convex fusion needs 0 <= alpha <= 1, got {0}")]
    Alpha(f32),
    #[error("reciprocal rank fusion needs k >= 0, got {0}")]
    RrfK(f32),
    #[error("embedder returned {got} vectors for {want} texts")]
    EmbedCount { want: usize, got: usize },
}

pub type Result<T> = std::result::Result<T, Error>;

impl From<Error> for CoreError {
    fn from(e: Error) -> Self {
        match e {
            Error::Alpha(_) | Error::RrfK(_) => CoreError::validation(e.to_string()),
            Error::EmbedCount { .. } => CoreError::backend("engine", e),
        }
    }
}

/// How the two ranked lists become one.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(tag = "method", rename_all = "snake_case")]
pub enum Fusion {
    /// Reciprocal rank fusion: `Σ 1 / (k + rank)` over the legs that found the id.
    Rrf { k: f32 },
    /// `alpha · vector + (1 − alpha) · text`, each leg's scores min-max normalised over its own
    /// candidate list; a leg that did not find the id contributes 0.
    Convex { alpha: f32 },
}

impl Default for Fusion {
    fn default() -> Self {
        Fusion::Rrf { k: 60.0 }
    }
}

impl Fusion {
    fn validate(&self) -> Result<()> {
        match *self {
            Fusion::Rrf { k } if !(k >= 0.0 && k.is_finite()) => Err(Error::RrfK(k)),
            Fusion::Convex { alpha } if !(0.0..=1.0).contains(&alpha) => Err(Error::Alpha(alpha)),
            _ => Ok(()),
        }
    }
}

/// Which legs a search runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Legs {
    #[default]
    Both,
    TextOnly,
    VectorOnly,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchOptions {
    /// Hits returned after fusion.
    pub k: usize,
    /// Hits each leg contributes to fusion.
    pub candidates_per_leg: usize,
    pub fusion: Fusion,
    pub legs: Legs,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            k: 10,
            candidates_per_leg: 100,
            fusion: Fusion::default(),
            legs: Legs::Both,
        }
    }
}

impl SearchOptions {
    pub fn with_k(k: usize) -> Self {
        SearchOptions {
            k,
            ..Default::default()
        }
    }
}

/// One leg's view of a hit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, schemars::JsonSchema)]
pub struct LegHit {
    /// 1-based rank within the leg's candidate list.
    pub rank: usize,
    /// The leg's raw score (BM25 or cosine).
    pub score: f32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Leg {
    Text,
    Vector,
}

/// A fused hit with its explanation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HybridHit {
    pub asset_id: AssetId,
    /// The fused score; hits are sorted by it, best first.
    pub score: f32,
    pub text: Option<LegHit>,
    pub vector: Option<LegHit>,
    pub found_by: Vec<Leg>,
}

/// Hybrid search over any text index, vector index and embedder.
#[derive(Clone)]
pub struct HybridSearcher {
    pub text: Arc<dyn TextIndex>,
    pub vectors: Arc<dyn VectorIndex>,
    pub embedder: Arc<dyn Embedder>,
}

impl std::fmt::Debug for HybridSearcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HybridSearcher")
            .field("model", &self.embedder.info().tag())
            .finish_non_exhaustive()
    }
}

impl HybridSearcher {
    pub fn new(
        text: Arc<dyn TextIndex>,
        vectors: Arc<dyn VectorIndex>,
        embedder: Arc<dyn Embedder>,
    ) -> Self {
        HybridSearcher {
            text,
            vectors,
            embedder,
        }
    }

    pub fn search(
        &self,
        query: &str,
        filter: &VisibilityFilter,
        opts: &SearchOptions,
    ) -> CoreResult<Vec<HybridHit>> {
        self.search_split(query, query, filter, opts)
    }

    /// [`Self::search`] with a query of its own for each leg: a caller that rewrites the query
    /// for BM25 (dropping words that only make it a question) keeps the whole sentence for the
    /// embedding. Both legs get the same filter.
    pub fn search_split(
        &self,
        text_query: &str,
        vector_query: &str,
        filter: &VisibilityFilter,
        opts: &SearchOptions,
    ) -> CoreResult<Vec<HybridHit>> {
        opts.fusion.validate()?;
        if opts.k == 0 {
            return Ok(vec![]);
        }
        let n = opts.candidates_per_leg.max(opts.k);
        // The two legs are independent: the text leg runs on a thread of its own while this
        // one embeds the query and scans the vectors (the two together cost about as much).
        let (text_hits, vector_hits) = std::thread::scope(|s| {
            let text = match opts.legs {
                Legs::Both | Legs::TextOnly => {
                    Some(s.spawn(|| self.text.search(text_query, filter, n)))
                }
                Legs::VectorOnly => None,
            };
            let vectors = match opts.legs {
                Legs::Both | Legs::VectorOnly => self
                    .embed_query_one(vector_query)
                    .and_then(|q| self.vectors.search(&q, filter, n)),
                Legs::TextOnly => Ok(vec![]),
            };
            let text = match text {
                Some(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
                None => Ok(vec![]),
            };
            (text, vectors)
        });
        let (text_hits, vector_hits) = (text_hits?, vector_hits?);
        let mut hits = match opts.fusion {
            Fusion::Rrf { k } => rrf_fuse(&text_hits, &vector_hits, k),
            Fusion::Convex { alpha } => convex_fuse(&text_hits, &vector_hits, alpha),
        };
        hits.truncate(opts.k);
        Ok(hits)
    }

    /// A query's embedding ([`Embedder::embed_query`]: a model trained with a query prefix gets
    /// it, e.g. multilingual-e5's `query: `).
    /// A query longer than the model's window is embedded by its prefix within it
    /// ([`Embedder::within_window`]); the text leg searches it whole.
    pub fn embed_query_one(&self, text: &str) -> CoreResult<Vec<f32>> {
        one(self
            .embedder
            .embed_query(&[self.embedder.within_window(text)?])?)
    }

    /// The embedding of one text that is stored and searched (a memory): [`Embedder::embed`].
    /// A text longer than the model's window is embedded by its prefix within it
    /// ([`Embedder::within_window`]); the text leg indexes it whole.
    pub fn embed_one(&self, text: &str) -> CoreResult<Vec<f32>> {
        one(self.embedder.embed(&[self.embedder.within_window(text)?])?)
    }

    pub fn index_asset(&self, keys: IndexKeys, text: String) -> CoreResult<()> {
        self.index_batch(&[(keys, text)])
    }

    /// Embeds (in batches of [`EMBED_BATCH`]) and writes both legs; each leg gets one write.
    /// Re-indexing an id replaces it in both legs.
    pub fn index_batch(&self, items: &[(IndexKeys, String)]) -> CoreResult<()> {
        if items.is_empty() {
            return Ok(());
        }
        let model = self.embedder.info().tag();
        let mut entries = Vec::with_capacity(items.len());
        for chunk in items.chunks(EMBED_BATCH) {
            let texts: Vec<&str> = chunk
                .iter()
                .map(|(_, t)| self.embedder.within_window(t))
                .collect::<CoreResult<_>>()?;
            let vectors = self.embedder.embed(&texts)?;
            if vectors.len() != texts.len() {
                return Err(Error::EmbedCount {
                    want: texts.len(),
                    got: vectors.len(),
                }
                .into());
            }
            for ((keys, _), vector) in chunk.iter().zip(vectors) {
                entries.push(VectorEntry {
                    keys: keys.clone(),
                    vector,
                    model: model.clone(),
                });
            }
        }
        self.vectors.upsert(&entries)?;
        let docs: Vec<TextDoc> = items
            .iter()
            .map(|(keys, text)| TextDoc {
                keys: keys.clone(),
                text: text.clone(),
            })
            .collect();
        self.text.upsert(&docs)
    }

    /// Removes ids from both legs.
    pub fn remove(&self, ids: &[AssetId]) -> CoreResult<()> {
        self.text.delete(ids)?;
        self.vectors.delete(ids)
    }
}

/// The single vector of an embedding call for one text.
fn one(mut v: Vec<Vec<f32>>) -> CoreResult<Vec<f32>> {
    if v.len() != 1 {
        return Err(Error::EmbedCount {
            want: 1,
            got: v.len(),
        }
        .into());
    }
    Ok(v.remove(0))
}
