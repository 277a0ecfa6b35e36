//! Retrieval traits: the embedder, the text index and the vector index.
//!
//! Invariant shared by every index: each entry carries the asset id, kind, scope key and ACL
//! keys, and `search` applies the [`VisibilityFilter`] *inside* the index, before scoring. No
//! entry outside the filter is ever scored, ranked or returned.

use serde::{Deserialize, Serialize};

use crate::asset::{AssetId, AssetKind, AssetMeta, Sensitivity};
use crate::error::CoreResult;
use crate::principal::Principal;

/// Governance keys stored beside every index entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexKeys {
    pub asset_id: AssetId,
    pub kind: AssetKind,
    pub scope_key: String,
    pub acl_keys: Vec<String>,
    /// Filterable labels: the domain's (e.g. `class:semantic`) and the governance tags of
    /// [`governance_tags`] (`sens:<level>`, `purpose:<name>` or `purpose:*`).
    #[serde(default)]
    pub tags: Vec<String>,
}

/// Tag of an entry restricted to no purpose.
pub const ANY_PURPOSE_TAG: &str = "purpose:*";

/// The tag that carries an entry's sensitivity.
pub fn sensitivity_tag(s: Sensitivity) -> String {
    format!("sens:{}", s.as_str())
}

/// The tags every index entry carries so that clearance and purpose filter inside the index:
/// its sensitivity, and its allowed purposes (or [`ANY_PURPOSE_TAG`]).
pub fn governance_tags(m: &AssetMeta) -> Vec<String> {
    let mut tags = vec![sensitivity_tag(m.sensitivity)];
    if m.purposes.is_empty() {
        tags.push(ANY_PURPOSE_TAG.to_string());
    } else {
        tags.extend(m.purposes.iter().map(|p| format!("purpose:{p}")));
    }
    tags
}

impl IndexKeys {
    /// Keys of an asset: its id, kind, scope, ACL and governance tags, plus the domain's tags.
    pub fn of(m: &AssetMeta, kind: AssetKind, mut tags: Vec<String>) -> IndexKeys {
        tags.extend(governance_tags(m));
        IndexKeys {
            asset_id: m.id.clone(),
            kind,
            scope_key: m.scope.key(),
            acl_keys: m.acl.keys(),
            tags,
        }
    }
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
    /// Empty: no restriction; otherwise the entry needs one of these sensitivity tags (those
    /// within the clearance), unless its scope key is one of `own_scopes`.
    pub sensitivity_tags: Vec<String>,
    /// Scopes whose entries pass the sensitivity test at any level (the caller's own).
    pub own_scopes: Vec<String>,
    /// Empty: no restriction; otherwise the entry needs one of these purpose tags
    /// ([`ANY_PURPOSE_TAG`] and the request's purpose).
    pub purpose_tags: Vec<String>,
}

impl VisibilityFilter {
    pub fn for_principal(p: &Principal, kinds: &[AssetKind]) -> Self {
        let mut purpose_tags = vec![ANY_PURPOSE_TAG.to_string()];
        if let Some(x) = &p.purpose {
            purpose_tags.push(format!("purpose:{x}"));
        }
        VisibilityFilter {
            scope_keys: p.visible_scope_keys(),
            acl_keys: p.acl_keys(),
            kinds: kinds.to_vec(),
            any_tags: vec![],
            sensitivity_tags: Sensitivity::ALL
                .into_iter()
                .filter(|s| *s <= p.clearance)
                .map(sensitivity_tag)
                .collect(),
            own_scopes: p.own_scope_keys(),
            purpose_tags,
        }
    }

    pub fn with_tags(mut self, tags: Vec<String>) -> Self {
        self.any_tags = tags;
        self
    }

    /// The reference semantics every index must reproduce.
    pub fn admits(&self, k: &IndexKeys) -> bool {
        let has = |set: &[String]| k.tags.iter().any(|t| set.contains(t));
        self.scope_keys.contains(&k.scope_key)
            && k.acl_keys.iter().any(|a| self.acl_keys.contains(a))
            && (self.kinds.is_empty() || self.kinds.contains(&k.kind))
            && (self.any_tags.is_empty() || has(&self.any_tags))
            && (self.sensitivity_tags.is_empty()
                || has(&self.sensitivity_tags)
                || self.own_scopes.contains(&k.scope_key))
            && (self.purpose_tags.is_empty() || has(&self.purpose_tags))
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
    /// Whether the model was trained on Chinese, Japanese and Korean text. A model that was not
    /// (all-MiniLM-L6-v2) maps such text to vectors that carry next to no meaning, so a search
    /// in those scripts should not let its vector leg vote.
    #[serde(default)]
    pub cjk: bool,
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
    /// Unit-length vectors, one per text, in order, for texts that are stored and searched
    /// (memories, chunks, skill descriptions).
    fn embed(&self, texts: &[&str]) -> CoreResult<Vec<Vec<f32>>>;
    /// Unit-length vectors for search queries, comparable with [`Self::embed`]'s. Models trained
    /// with a query prefix apply it here; for the others this is [`Self::embed`].
    fn embed_query(&self, texts: &[&str]) -> CoreResult<Vec<Vec<f32>>> {
        self.embed(texts)
    }
    /// Tokens the model sees when [`Self::embed`] embeds `text` (special tokens and any document
    /// prefix included, without truncation).
    fn count_tokens(&self, text: &str) -> CoreResult<usize>;
    /// Tokens of `text` without the special tokens a model adds around a sequence: counts of
    /// texts joined by blank lines add up. Default: [`Self::count_tokens`].
    fn content_tokens(&self, text: &str) -> CoreResult<usize> {
        self.count_tokens(text)
    }
    /// Content tokens ([`Self::content_tokens`]) a text may hold and still fit the model's
    /// window as [`Self::embed`] and [`Self::embed_query`] see it, their prefixes and special
    /// tokens counted out. Default: the whole window.
    fn content_window(&self) -> usize {
        self.info().max_tokens
    }
    /// The part of `text` the model reads: its longest prefix within [`Self::content_window`]
    /// (the whole text when it fits). [`Self::embed`] refuses a longer text rather than cut it,
    /// so that a chunker never loses text unseen; a caller that embeds a whole memory or query
    /// passes this, and the lexical index still holds every word.
    fn within_window<'t>(&self, text: &'t str) -> CoreResult<&'t str> {
        // Every token but a leading word marker covers at least one byte, so a text of fewer
        // bytes than the window fits without being tokenized here.
        let window = self.content_window();
        if text.len() < window {
            return Ok(text);
        }
        self.prefix_within(text, window)
    }
    /// The longest prefix of `text` (cut at a char boundary) within `max` content tokens.
    fn prefix_within<'t>(&self, text: &'t str, max: usize) -> CoreResult<&'t str> {
        let bounds: Vec<usize> = text
            .char_indices()
            .map(|(i, _)| i)
            .chain([text.len()])
            .collect();
        let (mut lo, mut hi) = (0usize, bounds.len() - 1);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if self.content_tokens(&text[..bounds[mid]])? <= max {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        Ok(&text[..bounds[lo]])
    }
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
    /// Replaces the governance keys of entries already stored, keeping their vectors (an index
    /// whose entries predate a change of tags is re-labelled without re-embedding). Ids not in
    /// the index are skipped; returns how many were re-labelled.
    fn relabel(&self, keys: &[IndexKeys]) -> CoreResult<usize>;
    /// Ids whose vectors were made by a model other than `model_tag` (for re-embedding).
    fn ids_not_made_by(&self, model_tag: &str, limit: usize) -> CoreResult<Vec<AssetId>>;
    /// The ids among `ids` that have no vector here (an index write that failed after its store
    /// commit, say): the reindex job embeds them again.
    fn missing(&self, ids: &[AssetId]) -> CoreResult<Vec<AssetId>>;
    fn len(&self) -> CoreResult<u64>;
    fn is_empty(&self) -> CoreResult<bool> {
        Ok(self.len()? == 0)
    }
    /// Whether every node of a shared store reaches this same index (a vector database), so
    /// that the node taking a write is the only one to embed it: the others follow the change
    /// log into their own text index only. `false` for an index in the node's data directory.
    fn shared(&self) -> bool {
        false
    }
    /// How `delete` and `compact` remove the bytes, when it differs from the embedded index's
    /// vacuumed pages: a deletion receipt carries it beside the vector index's level.
    fn purge_method(&self) -> Option<&'static str> {
        None
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
            tags: vec![
                "class:semantic".into(),
                "sens:internal".into(),
                "purpose:*".into(),
            ],
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

    #[test]
    fn filter_applies_clearance_except_own_scopes_and_purpose() {
        let mut p = Principal::new("acme", "ann");
        p.clearance = Sensitivity::Internal;
        let f = VisibilityFilter::for_principal(&p, &[]);
        let keys = |scope: &str, tags: &[&str]| IndexKeys {
            asset_id: "x".into(),
            kind: AssetKind::Memory,
            scope_key: scope.into(),
            acl_keys: vec!["public".into()],
            tags: tags.iter().map(|t| t.to_string()).collect(),
        };
        assert!(f.admits(&keys("t:acme", &["sens:internal", "purpose:*"])));
        assert!(!f.admits(&keys("t:acme", &["sens:confidential", "purpose:*"])));
        assert!(f.admits(&keys("t:acme/u:ann", &["sens:secret", "purpose:*"])));
        assert!(!f.admits(&keys("t:acme", &["sens:public", "purpose:hr"])));
        // Entries without governance tags (an index older than them) are admitted by nobody.
        assert!(!f.admits(&keys("t:acme", &[])));
        p.purpose = Some("hr".into());
        let f = VisibilityFilter::for_principal(&p, &[]);
        assert!(f.admits(&keys("t:acme", &["sens:public", "purpose:hr"])));
    }
}
