//! The full-text (BM25) leg of the embedded form: a tantivy index in a directory of the data dir.
//!
//! Every document carries its governance keys (`asset_id`, `kind`, `scope_key`, `acl`, `tag`) as
//! raw-token fields, and every search puts the [`VisibilityFilter`] into the same boolean query
//! as the user's text, so tantivy never scores a document the caller may not see. The text itself
//! is indexed but not stored.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use registry_core::retrieval::{ScoredId, TextDoc, TextIndex, VisibilityFilter};
use registry_core::{AssetId, CoreError, CoreResult};
use tantivy::collector::TopDocs;
use tantivy::directory::MmapDirectory;
use tantivy::query::{BooleanQuery, ConstScoreQuery, EmptyQuery, Occur, Query, TermQuery};
use tantivy::schema::{
    Field, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions, Value,
};
use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer,
};
use tantivy::{
    DocAddress, Index, IndexReader, IndexWriter, ReloadPolicy, Score, TantivyDocument, Term,
};

/// Name under which the English analyzer is registered; the schema refers to it by name, so it is
/// registered again on every open.
const ANALYZER: &str = "registry_en";
const WRITER_MEMORY_BYTES: usize = 64 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("tantivy: {0}")]
    Tantivy(#[from] tantivy::TantivyError),
    #[error("index directory: {0}")]
    Directory(#[from] tantivy::directory::error::OpenDirectoryError),
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    #[error("index schema does not match: {0}")]
    Schema(String),
    #[error("stored document without asset_id")]
    MissingId,
}

pub type Result<T> = std::result::Result<T, Error>;

impl From<Error> for CoreError {
    fn from(e: Error) -> Self {
        CoreError::backend("text-index", e)
    }
}

#[derive(Clone, Copy)]
struct Fields {
    asset_id: Field,
    kind: Field,
    scope_key: Field,
    acl: Field,
    tag: Field,
    text: Field,
}

fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let asset_id = b.add_text_field("asset_id", STRING | STORED | tantivy::schema::FAST);
    let kind = b.add_text_field("kind", STRING);
    let scope_key = b.add_text_field("scope_key", STRING);
    let acl = b.add_text_field("acl", STRING);
    let tag = b.add_text_field("tag", STRING);
    let text_opts = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(ANALYZER)
            .set_index_option(IndexRecordOption::WithFreqsAndPositions),
    );
    let text = b.add_text_field("text", text_opts);
    (
        b.build(),
        Fields {
            asset_id,
            kind,
            scope_key,
            acl,
            tag,
            text,
        },
    )
}

/// Lowercase, drop the Lucene English stop words, Porter-stem: the usual BM25 analyzer.
fn analyzer() -> TextAnalyzer {
    let stop = StopWordFilter::new(Language::English)
        .expect("tantivy is built with its default `stopwords` feature");
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(64))
        .filter(LowerCaser)
        .filter(stop)
        .filter(Stemmer::new(Language::English))
        .build()
}

/// A tantivy index behind the [`TextIndex`] trait.
pub struct TantivyTextIndex {
    dir: PathBuf,
    index: Index,
    fields: Fields,
    reader: IndexReader,
    /// The single writer. `None` only transiently while [`TextIndex::compact`] recycles it.
    writer: Mutex<Option<IndexWriter>>,
    /// Deferred entries, waiting for the next commit (which adds them before its own changes,
    /// so a later delete or upsert of the same id wins). Kept out of the writer so that a
    /// deferred upsert never waits for a commit in progress.
    deferred: Mutex<Vec<TextDoc>>,
    /// Whether `deferred` holds entries.
    pending: AtomicBool,
}

/// Commit payload: the time the commit began, RFC 3339. Every entry deferred before it is in.
const PAYLOAD_PREFIX: &str = "durable-until=";

impl std::fmt::Debug for TantivyTextIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TantivyTextIndex")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl TantivyTextIndex {
    /// Opens the index in `dir`, creating the directory and an empty index when absent.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref().to_path_buf();
        std::fs::create_dir_all(&dir)?;
        let (schema, fields) = schema();
        let index = Index::open_or_create(MmapDirectory::open(&dir)?, schema.clone())?;
        if index.schema() != schema {
            return Err(Error::Schema(dir.display().to_string()));
        }
        index.tokenizers().register(ANALYZER, analyzer());
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        let writer = index.writer(WRITER_MEMORY_BYTES)?;
        Ok(TantivyTextIndex {
            dir,
            index,
            fields,
            reader,
            writer: Mutex::new(Some(writer)),
            deferred: Mutex::new(Vec::new()),
            pending: AtomicBool::new(false),
        })
    }

    /// Whether deferred entries wait for a commit.
    pub fn has_pending(&self) -> bool {
        self.pending.load(Ordering::Acquire)
    }

    /// Adds the deferred entries, then applies `ops`, then commits with the payload that
    /// [`TextIndex::durable_until`] reads back: the time taken before the deferred entries were
    /// collected, so every entry deferred before it is in this commit.
    fn commit_with(
        &self,
        w: &mut IndexWriter,
        ops: impl FnOnce(&mut IndexWriter) -> Result<()>,
    ) -> Result<()> {
        let started = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
        let docs = {
            let mut d = self.deferred.lock();
            self.pending.store(false, Ordering::Release);
            std::mem::take(&mut *d)
        };
        let result = self
            .add_docs(w, &docs)
            .and_then(|()| ops(w))
            .and_then(|()| {
                w.prepare_commit()
                    .and_then(|mut prepared| {
                        prepared.set_payload(&format!("{PAYLOAD_PREFIX}{started}"));
                        prepared.commit()
                    })
                    .map(|_| ())
                    .map_err(Error::from)
            });
        if result.is_err() && !docs.is_empty() {
            // Put them back ahead of anything deferred since, for the next commit to retry.
            let mut d = self.deferred.lock();
            let newer = std::mem::replace(&mut *d, docs);
            d.extend(newer);
            self.pending.store(true, Ordering::Release);
        }
        result
    }

    fn add_docs(&self, w: &mut IndexWriter, docs: &[TextDoc]) -> Result<()> {
        let f = self.fields;
        for d in docs {
            let k = &d.keys;
            w.delete_term(Term::from_field_text(f.asset_id, &k.asset_id));
            let mut doc = TantivyDocument::default();
            doc.add_text(f.asset_id, &k.asset_id);
            doc.add_text(f.kind, k.kind.as_str());
            doc.add_text(f.scope_key, &k.scope_key);
            for a in &k.acl_keys {
                doc.add_text(f.acl, a);
            }
            for t in &k.tags {
                doc.add_text(f.tag, t);
            }
            doc.add_text(f.text, &d.text);
            w.add_document(doc)?;
        }
        Ok(())
    }

    fn flush_pending(&self) -> Result<()> {
        if !self.has_pending() {
            return Ok(());
        }
        self.with_writer(|w| {
            // Another flush may have committed while this one waited for the writer.
            if self.has_pending() {
                self.commit_with(w, |_| Ok(()))?;
            }
            Ok(())
        })?;
        self.reader.reload()?;
        Ok(())
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Number of searchable segments (merges reduce it).
    pub fn segment_count(&self) -> usize {
        self.reader.searcher().segment_readers().len()
    }

    fn with_writer<T>(&self, f: impl FnOnce(&mut IndexWriter) -> Result<T>) -> Result<T> {
        let mut guard = self.writer.lock();
        let writer = match guard.take() {
            Some(w) => guard.insert(w),
            // A failed compaction left no writer; make a new one.
            None => guard.insert(self.index.writer(WRITER_MEMORY_BYTES)?),
        };
        f(writer)
    }

    /// The analyzer's tokens of `query`, deduplicated, in first-seen order. Query syntax is not
    /// interpreted, so no input can fail to parse.
    fn query_terms(&self, query: &str) -> Vec<Term> {
        let mut analyzer = self
            .index
            .tokenizers()
            .get(ANALYZER)
            .unwrap_or_else(analyzer);
        let mut stream = analyzer.token_stream(query);
        let mut seen = HashSet::new();
        let mut terms = Vec::new();
        while stream.advance() {
            let t = stream.token().text.clone();
            if seen.insert(t.clone()) {
                terms.push(Term::from_field_text(self.fields.text, &t));
            }
        }
        terms
    }

    fn build_query(&self, query: &str, filter: &VisibilityFilter) -> Option<Box<dyn Query>> {
        // A filter with no scope or no ACL key admits nothing.
        if filter.scope_keys.is_empty() || filter.acl_keys.is_empty() {
            return None;
        }
        let terms = self.query_terms(query);
        if terms.is_empty() {
            return None;
        }
        let text: Box<dyn Query> = Box::new(BooleanQuery::new(
            terms
                .into_iter()
                .map(|t| {
                    let q: Box<dyn Query> =
                        Box::new(TermQuery::new(t, IndexRecordOption::WithFreqs));
                    (Occur::Should, q)
                })
                .collect(),
        ));
        let mut clauses = vec![(Occur::Must, text)];
        clauses.push((
            Occur::Must,
            any_of(
                self.fields.scope_key,
                filter.scope_keys.iter().map(String::as_str),
            ),
        ));
        clauses.push((
            Occur::Must,
            any_of(self.fields.acl, filter.acl_keys.iter().map(String::as_str)),
        ));
        if !filter.kinds.is_empty() {
            clauses.push((
                Occur::Must,
                any_of(self.fields.kind, filter.kinds.iter().map(|k| k.as_str())),
            ));
        }
        if !filter.any_tags.is_empty() {
            clauses.push((
                Occur::Must,
                any_of(self.fields.tag, filter.any_tags.iter().map(String::as_str)),
            ));
        }
        if !filter.sensitivity_tags.is_empty() {
            // Within the clearance, or in one of the caller's own scopes.
            let cleared = any_of(
                self.fields.tag,
                filter.sensitivity_tags.iter().map(String::as_str),
            );
            let own = any_of(
                self.fields.scope_key,
                filter.own_scopes.iter().map(String::as_str),
            );
            clauses.push((
                Occur::Must,
                Box::new(BooleanQuery::new(vec![
                    (Occur::Should, cleared),
                    (Occur::Should, own),
                ])),
            ));
        }
        if !filter.purpose_tags.is_empty() {
            clauses.push((
                Occur::Must,
                any_of(
                    self.fields.tag,
                    filter.purpose_tags.iter().map(String::as_str),
                ),
            ));
        }
        Some(Box::new(BooleanQuery::new(clauses)))
    }

    fn hit_id(&self, searcher: &tantivy::Searcher, addr: DocAddress) -> Result<AssetId> {
        let doc: TantivyDocument = searcher.doc(addr)?;
        doc.get_first(self.fields.asset_id)
            .and_then(|v| v.as_str())
            .map(str::to_owned)
            .ok_or(Error::MissingId)
    }

    fn upsert_docs(&self, docs: &[TextDoc]) -> Result<()> {
        if docs.is_empty() {
            return Ok(());
        }
        self.with_writer(|w| self.commit_with(w, |w| self.add_docs(w, docs)))?;
        self.reader.reload()?;
        Ok(())
    }

    fn defer_docs(&self, docs: &[TextDoc]) -> Result<()> {
        if docs.is_empty() {
            return Ok(());
        }
        let mut d = self.deferred.lock();
        d.extend_from_slice(docs);
        self.pending.store(true, Ordering::Release);
        Ok(())
    }

    fn delete_ids(&self, ids: &[AssetId]) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let f = self.fields;
        self.with_writer(|w| {
            self.commit_with(w, |w| {
                for id in ids {
                    w.delete_term(Term::from_field_text(f.asset_id, id));
                }
                Ok(())
            })
        })?;
        self.reader.reload()?;
        Ok(())
    }

    fn search_ids(
        &self,
        query: &str,
        filter: &VisibilityFilter,
        k: usize,
    ) -> Result<Vec<ScoredId>> {
        if k == 0 {
            return Ok(vec![]);
        }
        let Some(q) = self.build_query(query, filter) else {
            return Ok(vec![]);
        };
        // Read your writes: deferred entries become visible before any search.
        self.flush_pending()?;
        let searcher = self.reader.searcher();
        // Collect (score, id) over all segments, then order by score and break ties by asset id,
        // so equal scores come back in a stable order.
        let top = searcher.search(&q, &TopDocs::with_limit(k))?;
        let mut hits = Vec::with_capacity(top.len());
        for (score, addr) in top {
            hits.push(ScoredId {
                asset_id: self.hit_id(&searcher, addr)?,
                score,
            });
        }
        hits.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| a.asset_id.cmp(&b.asset_id))
        });
        Ok(hits)
    }

    fn compact_index(&self) -> Result<()> {
        let mut guard = self.writer.lock();
        // Deferred entries go in before the writer is retired.
        if let Some(w) = guard.as_mut()
            && self.has_pending()
        {
            self.commit_with(w, |_| Ok(()))?;
        }
        // Background merges hold segments; retire the writer so none is running, then merge
        // everything with a fresh one.
        let retired = guard
            .take()
            .map_or(Ok(()), IndexWriter::wait_merging_threads);
        let mut writer: IndexWriter = self.index.writer(WRITER_MEMORY_BYTES)?;
        let result = retired.map_err(Error::from).and_then(|()| {
            let ids = self.index.searchable_segment_ids()?;
            // Holding a `SegmentMeta` keeps its files alive through garbage collection, so the
            // metas are dropped here.
            let needs_merge = ids.len() > 1
                || self
                    .index
                    .searchable_segment_metas()?
                    .iter()
                    .any(|m| m.has_deletes());
            if needs_merge {
                writer.merge(&ids).wait()?;
            }
            self.reader.reload()?;
            writer.garbage_collect_files().wait()?;
            Ok(())
        });
        *guard = Some(writer);
        result
    }
}

fn any_of<'a>(field: Field, values: impl Iterator<Item = &'a str>) -> Box<dyn Query> {
    let mut seen = HashSet::new();
    let clauses: Vec<(Occur, Box<dyn Query>)> = values
        .filter(|v| seen.insert(*v))
        .map(|v| {
            let q: Box<dyn Query> = Box::new(TermQuery::new(
                Term::from_field_text(field, v),
                IndexRecordOption::Basic,
            ));
            (Occur::Should, q)
        })
        .collect();
    let inner: Box<dyn Query> = if clauses.is_empty() {
        Box::new(EmptyQuery)
    } else {
        Box::new(BooleanQuery::new(clauses))
    };
    // A filter clause must not move the BM25 score.
    Box::new(ConstScoreQuery::new(inner, 0.0 as Score))
}

impl TextIndex for TantivyTextIndex {
    fn upsert(&self, docs: &[TextDoc]) -> CoreResult<()> {
        Ok(self.upsert_docs(docs)?)
    }

    fn delete(&self, ids: &[AssetId]) -> CoreResult<()> {
        Ok(self.delete_ids(ids)?)
    }

    fn upsert_deferred(&self, docs: &[TextDoc]) -> CoreResult<()> {
        Ok(self.defer_docs(docs)?)
    }

    fn flush(&self) -> CoreResult<()> {
        Ok(self.flush_pending()?)
    }

    fn durable_until(&self) -> CoreResult<Option<chrono::DateTime<chrono::Utc>>> {
        let metas = self.index.load_metas().map_err(Error::from)?;
        Ok(metas
            .payload
            .as_deref()
            .and_then(|p| p.strip_prefix(PAYLOAD_PREFIX))
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&chrono::Utc)))
    }

    fn search(
        &self,
        query: &str,
        filter: &VisibilityFilter,
        k: usize,
    ) -> CoreResult<Vec<ScoredId>> {
        Ok(self.search_ids(query, filter, k)?)
    }

    fn compact(&self) -> CoreResult<()> {
        Ok(self.compact_index()?)
    }

    fn len(&self) -> CoreResult<u64> {
        Ok(self.reader.searcher().num_docs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_asset_id_is_stored() {
        let (schema, _) = schema();
        let stored: Vec<&str> = schema
            .fields()
            .filter(|(_, e)| e.is_stored())
            .map(|(_, e)| e.name())
            .collect();
        assert_eq!(stored, ["asset_id"]);
    }
}
