//! Retrieval traits: the embedder, the text index and the vector index.
//!
//! Invariant shared by every index: each entry carries the asset id, kind, scope key and ACL
//! keys, and `search` applies the [`VisibilityFilter`] *inside* the index, before scoring. No
//! entry outside the filter is ever scored, ranked or returned.

use serde::{Deserialize, Serialize};

use crate::asset::{AssetId, AssetKind};
use crate::error::CoreResult;
use crate::principal::Principal;

/// Governance keys stored beside every index entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexKeys {
    pub asset_id: AssetId,
    pub kind: AssetKind,
    pub scope_key: String,
    pub acl_keys: Vec<String>,
    /// Extra filterable labels (e.g. `class:semantic`).
    #[serde(default)]
    pub tags: Vec<String>,
}

/// What a caller may see. Built from the principal, never from request text.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VisibilityFilter {
    /// The asset's scope key must be one of these.
    pub scope_keys: Vec<String>,
    /// At least one of the asset's ACL keys must be one of these.
    pub acl_keys: Vec<String>,
    /// Empty: any kind.
    pub kinds: Vec<AssetKind>,
    /// Empty: no restriction; otherwise the entry needs at least one of these tags.
    pub any_tags: Vec<String>,
}

impl VisibilityFilter {
    pub fn for_principal(p: &Principal, kinds: &[AssetKind]) -> Self {
        VisibilityFilter {
            scope_keys: p.visible_scope_keys(),
            acl_keys: p.acl_keys(),
            kinds: kinds.to_vec(),
            any_tags: vec![],
        }
    }

    pub fn with_tags(mut self, tags: Vec<String>) -> Self {
        self.any_tags = tags;
        self
    }

    /// The reference semantics every index must reproduce.
    pub fn admits(&self, k: &IndexKeys) -> bool {
        self.scope_keys.contains(&k.scope_key)
            && k.acl_keys.iter().any(|a| self.acl_keys.contains(a))
            && (self.kinds.is_empty() || self.kinds.contains(&k.kind))
            && (self.any_tags.is_empty() || k.tags.iter().any(|t| self.any_tags.contains(t)))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextDoc {
    pub keys: IndexKeys,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VectorEntry {
    pub keys: IndexKeys,
    pub vector: Vec<f32>,
    /// `name@digest` of the model that made the vector.
    pub model: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoredId {
    pub asset_id: AssetId,
    pub score: f32,
}

/// Identity of an embedding model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelInfo {
    pub name: String,
    /// sha256 of the model file.
    pub digest: String,
    pub dim: usize,
    pub max_tokens: usize,
}

impl ModelInfo {
    /// The tag stored beside every vector this model made.
    pub fn tag(&self) -> String {
        format!(
            "{}@{}",
            self.name,
            &self.digest[..self.digest.len().min(16)]
        )
    }
}

pub trait Embedder: Send + Sync {
    fn info(&self) -> &ModelInfo;
    /// Unit-length vectors, one per text, in order.
    fn embed(&self, texts: &[&str]) -> CoreResult<Vec<Vec<f32>>>;
    /// Tokens the model's tokenizer makes of `text` (without truncation).
    fn count_tokens(&self, text: &str) -> CoreResult<usize>;
}

/// A full-text (BM25) index.
pub trait TextIndex: Send + Sync {
    /// Adds or replaces entries by asset id; searchable when this returns.
    fn upsert(&self, docs: &[TextDoc]) -> CoreResult<()>;
    /// Adds or replaces entries without waiting for them to be made durable in the index: they
    /// are searchable by the next [`Self::search`] (which makes pending entries visible first)
    /// and durable by the next [`Self::flush`]. For callers whose source of truth is durable
    /// already and who can re-index after a crash ([`Self::durable_until`]).
    fn upsert_deferred(&self, docs: &[TextDoc]) -> CoreResult<()> {
        self.upsert(docs)
    }
    /// Makes every deferred entry durable and searchable.
    fn flush(&self) -> CoreResult<()> {
        Ok(())
    }
    /// Entries deferred before this time are durable (`None`: nothing is known). A caller that
    /// defers re-indexes what it wrote since then (less a margin) after a restart.
    fn durable_until(&self) -> CoreResult<Option<chrono::DateTime<chrono::Utc>>> {
        Ok(None)
    }
    /// Removes entries; they never match again once this returns.
    fn delete(&self, ids: &[AssetId]) -> CoreResult<()>;
    fn search(&self, query: &str, filter: &VisibilityFilter, k: usize)
    -> CoreResult<Vec<ScoredId>>;
    /// Merges segments so that deleted entries are physically gone from disk.
    fn compact(&self) -> CoreResult<()>;
    fn len(&self) -> CoreResult<u64>;
    fn is_empty(&self) -> CoreResult<bool> {
        Ok(self.len()? == 0)
    }
}

/// A dense-vector index.
pub trait VectorIndex: Send + Sync {
    /// Adds or replaces entries by asset id; durable and searchable when this returns.
    fn upsert(&self, entries: &[VectorEntry]) -> CoreResult<()>;
    fn delete(&self, ids: &[AssetId]) -> CoreResult<()>;
    /// Cosine similarity (vectors are unit length), best first.
    fn search(
        &self,
        vector: &[f32],
        filter: &VisibilityFilter,
        k: usize,
    ) -> CoreResult<Vec<ScoredId>>;
    /// Physically removes deleted vectors from storage.
    fn compact(&self) -> CoreResult<()>;
    /// Ids whose vectors were made by a model other than `model_tag` (for re-embedding).
    fn ids_not_made_by(&self, model_tag: &str, limit: usize) -> CoreResult<Vec<AssetId>>;
    fn len(&self) -> CoreResult<u64>;
    fn is_empty(&self) -> CoreResult<bool> {
        Ok(self.len()? == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_needs_scope_acl_kind_and_tag() {
        let p = Principal::new("acme", "ann");
        let f = VisibilityFilter::for_principal(&p, &[AssetKind::Memory]);
        let mut k = IndexKeys {
            asset_id: "x".into(),
            kind: AssetKind::Memory,
            scope_key: "t:acme".into(),
            acl_keys: vec!["public".into()],
            tags: vec!["class:semantic".into()],
        };
        assert!(f.admits(&k));
        assert!(
            !f.clone()
                .with_tags(vec!["class:episodic".into()])
                .admits(&k)
        );
        k.scope_key = "t:globex".into();
        assert!(!f.admits(&k));
        k.scope_key = "t:acme".into();
        k.acl_keys = vec!["group:hr".into()];
        assert!(!f.admits(&k));
    }
}
