#![doc = include_str!("../README.md")]

mod analysis;
mod filter;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

pub use analysis::{CjkAnalysis, MAX_CJK_PIECE_CHARS, MAX_TOKEN_BYTES, MAX_TOKENS_PER_TEXT};

use parking_lot::Mutex;
use registry_core::retrieval::{ScoredId, TextDoc, TextIndex, VisibilityFilter};
use registry_core::{AssetId, CoreError, CoreResult};
use tantivy::collector::TopDocs;
use tantivy::directory::{Directory, INDEX_WRITER_LOCK, MmapDirectory};
use tantivy::query::{BooleanQuery, ConstScoreQuery, EmptyQuery, Occur, Query, TermQuery};
use tantivy::schema::{
    Field, FieldType, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions,
    Value,
};
use tantivy::tokenizer::TextAnalyzer;
use tantivy::{
    DocAddress, Index, IndexReader, IndexSettings, IndexWriter, ReloadPolicy, Score,
    TantivyDocument, Term,
};

/// The stored format this build writes. 1: tantivy's simple tokenizer with the English filters
/// (analyzer `registry_en`): a run of CJK characters was one token. 2: the mixed-script analyzer
/// of the [`CjkAnalysis`] recorded with it.
///
/// The format lives in the index's own schema (`meta.json`, written atomically by every commit):
/// the `text` field names its analyzer `registry_v{FORMAT_VERSION}_{analysis}`.
pub const FORMAT_VERSION: u32 = 2;
/// Distinct terms a query asks at most (its first ones); the rest of a longer query is ignored.
pub const MAX_QUERY_TERMS: usize = 1024;
/// The analyzer name of format 1.
const FORMAT_1_ANALYZER: &str = "registry_en";
/// Present in the index directory from the start of [`TantivyTextIndex::rebuild_empty`] until
/// [`TantivyTextIndex::finish_rebuild`]: an index that holds it is incomplete.
pub const REBUILD_MARKER: &str = "rebuild-in-progress";
const WRITER_MEMORY_BYTES: usize = 64 * 1024 * 1024;

/// The index's writer: one indexing thread with the whole budget. Every commit ends each
/// indexing thread's segment and the next document starts a new one, whose set-up (a 4 MB term
/// table, zeroed arena pages, a dozen files) outweighs indexing the few entries a commit of
/// deferred memory writes holds; with two threads a commit of two entries made two segments.
/// Measured with `perf` over LoCoMo writes: the indexing threads took 14% of the CPU, most of it
/// in that set-up.
fn new_writer(index: &Index) -> tantivy::Result<IndexWriter> {
    index.writer_with_num_threads(1, WRITER_MEMORY_BYTES)
}

/// Why an index directory cannot be opened as it is and must be rebuilt from the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RebuildReason {
    /// Written by an older build (format `found`), whose analysis this build no longer has.
    OlderFormat { found: u32 },
    /// This format, with another CJK analysis than the one asked for.
    OtherAnalysis { found: String },
    /// A rebuild began and did not finish: the index holds only part of the entries.
    Interrupted,
}

impl std::fmt::Display for RebuildReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RebuildReason::OlderFormat { found } => {
                write!(
                    f,
                    "it has format {found}, this build writes {FORMAT_VERSION}"
                )
            }
            RebuildReason::OtherAnalysis { found } => write!(f, "it has CJK analysis {found}"),
            RebuildReason::Interrupted => write!(f, "a rebuild of it did not finish"),
        }
    }
}

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
    /// The directory holds an index this build must rebuild before use: see
    /// [`TantivyTextIndex::rebuild_empty`].
    #[error("text index in {dir} must be rebuilt: {reason}")]
    NeedsRebuild { dir: String, reason: RebuildReason },
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
    /// The second text field of [`CjkAnalysis::WordsOrBigrams`]: CJK bigrams only.
    bigrams: Option<Field>,
}

/// Name of the `text` field's analyzer: it records the format and the analysis.
fn analyzer_name(analysis: CjkAnalysis) -> String {
    format!("registry_v{FORMAT_VERSION}_{}", analysis.name())
}

fn bigram_analyzer_name(analysis: CjkAnalysis) -> String {
    format!("{}_bigram_field", analyzer_name(analysis))
}

/// The format and analysis named by a stored `text` analyzer; `None` for a name no build of
/// this crate wrote.
fn parse_analyzer_name(name: &str) -> Option<(u32, &str)> {
    if name == FORMAT_1_ANALYZER {
        return Some((1, ""));
    }
    let (version, analysis) = name.strip_prefix("registry_v")?.split_once('_')?;
    Some((version.parse().ok()?, analysis))
}

fn text_field_options(analyzer: &str) -> TextOptions {
    TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(analyzer)
            .set_index_option(IndexRecordOption::WithFreqsAndPositions),
    )
}

fn schema(analysis: CjkAnalysis) -> (Schema, Fields) {
    let mut b = Schema::builder();
    let asset_id = b.add_text_field("asset_id", STRING | STORED | tantivy::schema::FAST);
    let kind = b.add_text_field("kind", STRING);
    let scope_key = b.add_text_field("scope_key", STRING);
    let acl = b.add_text_field("acl", STRING);
    let tag = b.add_text_field("tag", STRING);
    let text = b.add_text_field("text", text_field_options(&analyzer_name(analysis)));
    let bigrams = analysis.bigram_field_emit().map(|_| {
        b.add_text_field(
            "text_bigrams",
            text_field_options(&bigram_analyzer_name(analysis)),
        )
    });
    (
        b.build(),
        Fields {
            asset_id,
            kind,
            scope_key,
            acl,
            tag,
            text,
            bigrams,
        },
    )
}

/// The analyzer name of the stored schema's `text` field.
fn stored_analyzer(schema: &Schema) -> Option<String> {
    let field = schema.get_field("text").ok()?;
    match schema.get_field_entry(field).field_type() {
        FieldType::Str(o) => o.get_indexing_options().map(|i| i.tokenizer().to_string()),
        _ => None,
    }
}

/// Whether an existing index may be opened with `analysis`, and why not.
fn check_format(stored: &Schema, analysis: CjkAnalysis, dir: &Path) -> Result<()> {
    let (expected, _) = schema(analysis);
    if *stored == expected {
        return Ok(());
    }
    let schema_error = || Error::Schema(dir.display().to_string());
    let name = stored_analyzer(stored).ok_or_else(schema_error)?;
    let (version, found) = parse_analyzer_name(&name).ok_or_else(schema_error)?;
    let reason = match version {
        v if v < FORMAT_VERSION => RebuildReason::OlderFormat { found: v },
        FORMAT_VERSION if found != analysis.name() => RebuildReason::OtherAnalysis {
            found: found.to_string(),
        },
        // A newer build's index, or this format with other fields: not ours to wipe.
        _ => return Err(schema_error()),
    };
    Err(Error::NeedsRebuild {
        dir: dir.display().to_string(),
        reason,
    })
}

fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

/// Whether `name` is a file tantivy keeps in an index directory (metas and segment files).
fn is_index_file(name: &str) -> bool {
    name == "meta.json"
        || name == ".managed.json"
        || name.split_once('.').is_some_and(|(stem, _)| {
            stem.len() == 32 && stem.bytes().all(|b| b.is_ascii_hexdigit())
        })
}

/// A tantivy index behind the [`TextIndex`] trait.
pub struct TantivyTextIndex {
    dir: PathBuf,
    index: Index,
    fields: Fields,
    analysis: CjkAnalysis,
    /// The analyzer of `fields.text`, and of `fields.bigrams` when there is one.
    analyzers: Vec<(Field, TextAnalyzer)>,
    /// From [`TantivyTextIndex::rebuild_empty`] until [`TantivyTextIndex::finish_rebuild`].
    rebuilding: AtomicBool,
    reader: IndexReader,
    /// The single writer. `None` only transiently while [`TextIndex::compact`] recycles it.
    writer: Mutex<Option<IndexWriter>>,
    /// Deferred entries, waiting for the next commit (which adds them before its own changes,
    /// so a later delete or upsert of the same id wins). Kept out of the writer so that a
    /// deferred upsert never waits for a commit in progress.
    deferred: Mutex<Vec<TextDoc>>,
    /// Whether `deferred` holds entries.
    pending: AtomicBool,
    /// Commits that took deferred entries and are not yet visible to the reader. A search that
    /// sees neither pending entries nor such a commit reads every write acknowledged before it.
    in_flight: std::sync::atomic::AtomicUsize,
    /// What each visibility filter admits, per segment (see [`filter`]).
    filters: std::sync::Arc<filter::FilterCache>,
}

/// Uncounts a commit of deferred entries when it ends (made visible, or failed and put back).
struct InFlight<'a>(&'a std::sync::atomic::AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
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
    /// Opens the index in `dir` with the default [`CjkAnalysis`], creating the directory and an
    /// empty index when absent. An index of an older format, of another analysis or left by an
    /// unfinished rebuild is refused with [`Error::NeedsRebuild`].
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(dir, CjkAnalysis::default())
    }

    /// [`TantivyTextIndex::open`] with the given CJK analysis.
    pub fn open_with(dir: impl AsRef<Path>, analysis: CjkAnalysis) -> Result<Self> {
        let dir = dir.as_ref().to_path_buf();
        std::fs::create_dir_all(&dir)?;
        if dir.join(REBUILD_MARKER).exists() {
            return Err(Error::NeedsRebuild {
                dir: dir.display().to_string(),
                reason: RebuildReason::Interrupted,
            });
        }
        let directory = MmapDirectory::open(&dir)?;
        let index = if Index::exists(&directory).map_err(tantivy::TantivyError::from)? {
            let index = Index::open(directory)?;
            check_format(&index.schema(), analysis, &dir)?;
            index
        } else {
            Index::create(directory, schema(analysis).0, IndexSettings::default())?
        };
        Self::from_index(dir, index, analysis, false)
    }

    /// Replaces whatever index `dir` holds (of any format) by an empty one of this build's
    /// format and the default analysis, for the caller to re-add every entry from its store and
    /// then call [`TantivyTextIndex::finish_rebuild`]. Until then the directory is marked
    /// ([`REBUILD_MARKER`]), so a crash part-way makes the next [`TantivyTextIndex::open`] answer
    /// [`RebuildReason::Interrupted`] instead of serving a partial index.
    ///
    /// Fails, touching nothing, while any writer holds the index (this process or another);
    /// files in `dir` that are not tantivy's are left alone.
    pub fn rebuild_empty(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref().to_path_buf();
        let analysis = CjkAnalysis::default();
        std::fs::create_dir_all(&dir)?;
        let directory = MmapDirectory::open(&dir)?;
        let lock = directory.acquire_lock(&INDEX_WRITER_LOCK).map_err(|e| {
            tantivy::TantivyError::LockFailure(e, Some(format!("rebuilding {}", dir.display())))
        })?;
        let marker = dir.join(REBUILD_MARKER);
        std::fs::File::create(&marker)?.sync_all()?;
        sync_dir(&dir)?;
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            if entry.file_type()?.is_file() && entry.file_name().to_str().is_some_and(is_index_file)
            {
                std::fs::remove_file(entry.path())?;
            }
        }
        sync_dir(&dir)?;
        let index = Index::create(directory, schema(analysis).0, IndexSettings::default())?;
        drop(lock);
        Self::from_index(dir, index, analysis, true)
    }

    /// Ends a rebuild begun by [`TantivyTextIndex::rebuild_empty`]: commits what is deferred and
    /// removes the marker, so the index opens again. Call it once every entry is re-added.
    pub fn finish_rebuild(&self) -> Result<()> {
        self.with_writer(|w| self.commit_with(w, |_| Ok(())))?;
        self.reader.reload()?;
        match std::fs::remove_file(self.dir.join(REBUILD_MARKER)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
            _ => {}
        }
        sync_dir(&self.dir)?;
        self.rebuilding.store(false, Ordering::Release);
        Ok(())
    }

    /// Whether this index was emptied by [`TantivyTextIndex::rebuild_empty`] and the rebuild has
    /// not been finished: it does not hold every entry yet.
    pub fn needs_rebuild(&self) -> bool {
        self.rebuilding.load(Ordering::Acquire)
    }

    /// The stored format of this index: always [`FORMAT_VERSION`], since an older one does not
    /// open.
    pub fn format_version(&self) -> u32 {
        FORMAT_VERSION
    }

    /// The CJK analysis of this index.
    pub fn analysis(&self) -> CjkAnalysis {
        self.analysis
    }

    fn from_index(
        dir: PathBuf,
        index: Index,
        analysis: CjkAnalysis,
        rebuilding: bool,
    ) -> Result<Self> {
        let (schema, fields) = schema(analysis);
        if index.schema() != schema {
            return Err(Error::Schema(dir.display().to_string()));
        }
        // The schema names its analyzers, so they are registered again on every open.
        let mut analyzers = vec![(fields.text, analysis::analyzer(analysis.text_emit()))];
        index
            .tokenizers()
            .register(&analyzer_name(analysis), analyzers[0].1.clone());
        if let (Some(field), Some(emit)) = (fields.bigrams, analysis.bigram_field_emit()) {
            let a = analysis::analyzer(emit);
            index
                .tokenizers()
                .register(&bigram_analyzer_name(analysis), a.clone());
            analyzers.push((field, a));
        }
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        let writer = new_writer(&index)?;
        Ok(TantivyTextIndex {
            dir,
            index,
            fields,
            analysis,
            analyzers,
            rebuilding: AtomicBool::new(rebuilding),
            reader,
            writer: Mutex::new(Some(writer)),
            deferred: Mutex::new(Vec::new()),
            pending: AtomicBool::new(false),
            in_flight: std::sync::atomic::AtomicUsize::new(0),
            filters: std::sync::Arc::new(filter::FilterCache::new(filter::MAX_CACHED_BYTES)),
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
            // Counted before `pending` clears, and uncounted only once the reader sees the
            // commit: a concurrent search never finds both at rest while entries are hidden.
            self.in_flight.fetch_add(1, Ordering::AcqRel);
            self.pending.store(false, Ordering::Release);
            std::mem::take(&mut *d)
        };
        let _in_flight = InFlight(&self.in_flight);
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
            })
            .and_then(|()| Ok(self.reader.reload()?));
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
            if let Some(bigrams) = f.bigrams {
                doc.add_text(bigrams, &d.text);
            }
            w.add_document(doc)?;
        }
        Ok(())
    }

    fn flush_pending(&self) -> Result<()> {
        if !self.has_pending() && self.in_flight.load(Ordering::Acquire) == 0 {
            return Ok(());
        }
        // Pending entries, or a commit of them under way elsewhere (the flusher): the writer
        // lock waits for that commit to finish and be visible.
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
            None => guard.insert(new_writer(&self.index)?),
        };
        f(writer)
    }

    /// The analyzers' tokens of `query`, deduplicated, in first-seen order, at most
    /// [`MAX_QUERY_TERMS`]. Query syntax is not interpreted, so no input can fail to parse.
    fn query_terms(&self, query: &str) -> Vec<Term> {
        let mut seen = HashSet::new();
        let mut terms = Vec::new();
        for (field, analyzer) in &self.analyzers {
            let mut analyzer = analyzer.clone();
            let mut stream = analyzer.token_stream(query);
            while terms.len() < MAX_QUERY_TERMS && stream.advance() {
                let t = Term::from_field_text(*field, &stream.token().text);
                if seen.insert(t.clone()) {
                    terms.push(t);
                }
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
        // The filter's clauses, answered per segment from the cache of admitted documents.
        let mut clauses = vec![];
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
        let admitted = filter::CachedFilter::new(
            Box::new(BooleanQuery::new(clauses)),
            format!("{filter:?}"),
            self.filters.clone(),
        );
        Some(Box::new(BooleanQuery::new(vec![
            (Occur::Must, text),
            (Occur::Must, Box::new(admitted)),
        ])))
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
        let mut writer: IndexWriter = new_writer(&self.index)?;
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
        let (schema, _) = schema(CjkAnalysis::WordsOrBigrams);
        let stored: Vec<&str> = schema
            .fields()
            .filter(|(_, e)| e.is_stored())
            .map(|(_, e)| e.name())
            .collect();
        assert_eq!(stored, ["asset_id"]);
    }

    #[test]
    fn a_query_asks_a_bounded_number_of_terms() {
        let dir = tempfile::tempdir().unwrap();
        let ix = TantivyTextIndex::open_with(dir.path(), CjkAnalysis::WordsOrBigrams).unwrap();
        let query: String = (0..5000).map(|i| format!("w{i} 字{i} ")).collect();
        assert_eq!(ix.query_terms(&query).len(), MAX_QUERY_TERMS);
        assert_eq!(
            ix.query_terms("部署 deploy").len(),
            3,
            "deploy, 部署 in both fields"
        );
    }
}
