//! Discovery (the first disclosure level): the discover entries of the current releases in a
//! text index and a vector index, queried together, each leg filtered by visibility inside its
//! index, fused by reciprocal rank; and the index upkeep (the writes that follow a release
//! pointer's move, the rebuild from the stored pointers).

use std::collections::BTreeSet;

use registry_core::asset::{AssetKind, AssetRecord, AssetStatus};
use registry_core::principal::Principal;
use registry_core::retrieval::{IndexKeys, TextDoc, VectorEntry, VisibilityFilter};
use registry_core::store::AssetQuery;

use crate::error::{Error, Result};
use crate::model::{DiscoverView, ReleaseBody};
use crate::service::{DISCOVER_TAG, RELEASE_PREFIX, SkillsService};

/// Longest discovery query, in characters, at every door (as memory and knowledge searches):
/// a longer one answers 413 before any work.
pub const MAX_QUERY_CHARS: usize = 4096;

impl SkillsService {
    /// Discovery: BM25 and dense vectors over the current releases the principal may see.
    pub fn discover(
        &self,
        p: &Principal,
        q: Option<&str>,
        limit: usize,
    ) -> Result<Vec<DiscoverView>> {
        if let Some(len) = q.and_then(|q| registry_core::text::over(q, MAX_QUERY_CHARS)) {
            return Err(Error::new(
                registry_core::ErrorCode::PayloadTooLarge,
                format!("the query has {len} characters; at most {MAX_QUERY_CHARS}"),
            )
            .with_details(
                registry_core::FieldError::new("q")
                    .reason(registry_core::FieldReason::TooLarge)
                    .limit(MAX_QUERY_CHARS),
            ));
        }
        let filter = VisibilityFilter::for_principal(p, &[AssetKind::SkillVersion])
            .with_tags(vec![DISCOVER_TAG.into()]);
        let recs = match q.map(str::trim).filter(|q| !q.is_empty()) {
            Some(q) => {
                let ids = discover_ids(self, q, &filter, limit * 2)?;
                let mut recs = self.store.find(&AssetQuery {
                    ids: Some(ids.clone()),
                    heads_only: true,
                    ..Default::default()
                })?;
                recs.sort_by_key(|r| ids.iter().position(|i| *i == r.meta.id));
                recs
            }
            None => {
                // Page by page under the request's deadline, keeping only the release
                // pointers: the versions' bodies are never all held at once.
                let mut recs = vec![];
                let query = AssetQuery {
                    kind: Some(AssetKind::SkillVersion),
                    scope_keys: Some(p.visible_scope_keys()),
                    statuses: Some(vec![AssetStatus::Active]),
                    heads_only: true,
                    ..Default::default()
                };
                for page in registry_core::store::pages(&*self.store, query) {
                    registry_core::deadline::check()?;
                    recs.extend(page?.into_iter().filter(|r| {
                        r.lookup_key
                            .as_deref()
                            .is_some_and(|k| k.starts_with(RELEASE_PREFIX))
                    }));
                }
                recs.sort_by(|a, b| a.lookup_key.cmp(&b.lookup_key));
                recs
            }
        };
        let mut seen = BTreeSet::new();
        let mut out = vec![];
        // Deepest scope first, so a tenant's skill shadows a global one of the same name.
        let recs: Vec<_> = recs.into_iter().filter(|r| p.can_see(&r.meta)).collect();
        // A name is answered by its most specific scope's release: keep, per name, only the
        // pointer of the deepest scope.
        let deepest: std::collections::HashMap<String, usize> =
            recs.iter().fold(Default::default(), |mut m, r| {
                let name = r.lookup_key.clone().unwrap_or_default();
                let d = r.meta.scope.path_keys().len();
                let e = m.entry(name).or_insert(d);
                *e = (*e).max(d);
                m
            });
        let recs = recs.into_iter().filter(|r| {
            deepest.get(&r.lookup_key.clone().unwrap_or_default())
                == Some(&r.meta.scope.path_keys().len())
        });
        for r in recs {
            let Ok(b) = serde_json::from_value::<ReleaseBody>(r.body) else {
                continue;
            };
            if let Some(t) = b.current
                && seen.insert(b.name.clone())
            {
                out.push(t.entry);
            }
        }
        if q.is_none() {
            out.sort_by(|a, b| a.name.cmp(&b.name));
        }
        out.truncate(limit);
        Ok(out)
    }

    /// Rebuilds the discover index from the stored release pointers (after a crash between a commit
    /// and its index write, or a lost index directory).
    pub fn reindex(&self) -> Result<usize> {
        reindex_with(self, true)
    }

    /// Re-writes the discover entries of the text index only (see [`reindex_with`]).
    pub fn reindex_text(&self) -> Result<usize> {
        reindex_with(self, false)
    }

    /// The discover entries of every current release, as the text index should hold them.
    pub fn current_index_docs(&self) -> Result<Vec<TextDoc>> {
        let recs = self.store.find(&AssetQuery {
            kind: Some(AssetKind::SkillVersion),
            heads_only: true,
            statuses: Some(vec![AssetStatus::Active]),
            ..Default::default()
        })?;
        let mut docs = vec![];
        for r in recs {
            if !r
                .lookup_key
                .as_deref()
                .is_some_and(|k| k.starts_with(RELEASE_PREFIX))
            {
                continue;
            }
            let b: ReleaseBody = serde_json::from_value(r.body.clone()).map_err(Error::internal)?;
            if let Some(t) = b.current {
                docs.push(index_doc(&r, &t.entry));
            }
        }
        Ok(docs)
    }
}

/// Like [`SkillsService::reindex`] with `embed`; without it, only the text index is written (a
/// node following a shared vector index, which the writing node filled).
fn reindex_with(s: &SkillsService, embed: bool) -> Result<usize> {
    let recs = s.store.find(&AssetQuery {
        kind: Some(AssetKind::SkillVersion),
        heads_only: true,
        ..Default::default()
    })?;
    let mut docs = vec![];
    let mut gone = vec![];
    for r in recs {
        if !r
            .lookup_key
            .as_deref()
            .is_some_and(|k| k.starts_with(RELEASE_PREFIX))
        {
            continue;
        }
        let b: ReleaseBody = serde_json::from_value(r.body.clone()).map_err(Error::internal)?;
        match b.current {
            Some(t) => docs.push(index_doc(&r, &t.entry)),
            None => gone.push(r.meta.id.clone()),
        }
    }
    for chunk in docs.chunks(256) {
        if embed {
            upsert_docs(s, chunk)?;
        } else {
            s.text.upsert(chunk)?;
        }
    }
    s.text.delete(&gone)?;
    if embed {
        s.vectors.delete(&gone)?;
    }
    Ok(docs.len())
}

pub(crate) enum IndexOp {
    Upsert(TextDoc),
    Delete(String),
}

pub(crate) fn apply_index(s: &SkillsService, op: IndexOp) -> Result<()> {
    match op {
        IndexOp::Upsert(d) => upsert_docs(s, &[d])?,
        IndexOp::Delete(id) => {
            s.text.delete(std::slice::from_ref(&id))?;
            s.vectors.delete(&[id])?;
        }
    }
    Ok(())
}

/// Writes discover entries into both indexes: the text as it is, and its embedding.
fn upsert_docs(s: &SkillsService, docs: &[TextDoc]) -> Result<()> {
    let texts: Vec<&str> = docs.iter().map(|d| d.text.as_str()).collect();
    let tag = s.embedder.info().tag();
    let mut entries = Vec::with_capacity(docs.len());
    for (batch, texts) in docs.chunks(32).zip(texts.chunks(32)) {
        let fitted: Vec<&str> = texts
            .iter()
            .map(|t| {
                s.embedder
                    .prefix_within(t, s.embedder.info().max_tokens.saturating_sub(16))
            })
            .collect::<std::result::Result<_, _>>()?;
        for (d, v) in batch.iter().zip(s.embedder.embed(&fitted)?) {
            entries.push(VectorEntry {
                keys: d.keys.clone(),
                vector: v,
                model: tag.clone(),
            });
        }
    }
    s.text.upsert(docs)?;
    s.vectors.upsert(&entries)?;
    Ok(())
}

/// Reciprocal-rank constant of discovery's fusion (the engine's default).
const RRF_K: f32 = 60.0;
/// How far below the best cosine a vector-only hit may be and still be listed.
const DENSE_ONLY_MARGIN: f32 = 0.05;

/// Ids of the discover entries for `q`, best first: the text and vector legs, each filtered by
/// `filter` inside its index, fused by reciprocal rank.
fn discover_ids(
    s: &SkillsService,
    q: &str,
    filter: &VisibilityFilter,
    k: usize,
) -> Result<Vec<String>> {
    let text = s.text.search(q, filter, k)?;
    let qv = s.embedder.embed_query(&[q])?.pop().unwrap_or_default();
    let mut dense = s.vectors.search(&qv, filter, k)?;
    // A vector leg ranks every entry; one the text leg did not find is kept only when it is
    // about as close as the closest, so a query matching nothing does not list everything.
    let best = dense.first().map_or(0.0, |h| h.score);
    dense.retain(|h| {
        h.score >= best - DENSE_ONLY_MARGIN || text.iter().any(|t| t.asset_id == h.asset_id)
    });
    let mut fused: std::collections::HashMap<String, f32> = Default::default();
    for leg in [&text, &dense] {
        for (rank, h) in leg.iter().enumerate() {
            *fused.entry(h.asset_id.clone()).or_default() += 1.0 / (RRF_K + rank as f32 + 1.0);
        }
    }
    let mut ids: Vec<(String, f32)> = fused.into_iter().collect();
    ids.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Ok(ids.into_iter().map(|(id, _)| id).collect())
}

fn discover_text(e: &DiscoverView) -> String {
    format!(
        "{} {} {}",
        e.name.replace('-', " "),
        e.description,
        e.applicability.join(" ")
    )
}

pub(crate) fn index_doc(rec: &AssetRecord, entry: &DiscoverView) -> TextDoc {
    TextDoc {
        keys: IndexKeys::of(
            &rec.meta,
            AssetKind::SkillVersion,
            vec![DISCOVER_TAG.to_string()],
        ),
        text: discover_text(entry),
    }
}
