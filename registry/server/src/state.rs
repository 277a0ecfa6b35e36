//! Shared server state. Everything durable lives in the data directory; the state holds only
//! handles, so a restart loses nothing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use registry_core::audit::AuditKey;
use registry_core::deadline::Deadline;
use registry_core::locks::KeyedLocks;
use registry_core::principal::Principal;
use registry_embed::{EmbedderConfig, MiniLmEmbedder};
use registry_engine::HybridSearcher;
use registry_store_sqlite::{FsBlobStore, SqliteStore, StoreOptions};
use registry_text_index::TantivyTextIndex;
use registry_vector_index::EmbeddedVectorIndex;

use crate::config::Config;
use crate::error::{ApiError, ApiResult};
use crate::extract::principal_for_key;
use crate::memstats::SqliteStats;

#[derive(Clone)]
pub struct AppState(Arc<Inner>);

pub struct Inner {
    /// Declared first so that it stops, and commits what is pending, before the indexes drop.
    _flusher: Flusher,
    pub config: Config,
    pub store: Arc<SqliteStore>,
    pub blobs: Arc<FsBlobStore>,
    pub embedder: Arc<MiniLmEmbedder>,
    pub text: Arc<TantivyTextIndex>,
    pub vectors: Arc<EmbeddedVectorIndex>,
    /// Hybrid search over `text` and `vectors`, both filtered by scope/ACL before ranking.
    pub search: HybridSearcher,
    /// Memory usage counters (retrievals buffered, flushed by the flusher).
    pub stats: Arc<SqliteStats>,
    /// Keys the audit chain; also signs the checkpoint kept beside it.
    pub audit_key: AuditKey,
    /// Shared by every memory service built over this state: the gate's check-then-write
    /// is serialised per scope.
    pub memory_locks: KeyedLocks,
    /// Skill lifecycle steps are serialised per (scope, name).
    pub skill_locks: KeyedLocks,
    /// Parsed skill archives, so loading one file does not unpack the whole archive again.
    pub archives: crate::skills::ArchiveCache,
    /// Open MCP sessions per key.
    pub mcp_sessions: crate::mcp::SessionLimits,
}

impl std::ops::Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot open the data directory {dir}: {source}")]
    DataDir { dir: String, source: std::io::Error },
    #[error("{0}")]
    Config(#[from] crate::config::ConfigError),
    #[error("cannot open the store: {0}")]
    Store(#[from] registry_store_sqlite::StoreError),
    #[error("cannot load the embedding model: {0}")]
    Model(#[from] registry_embed::EmbedError),
    #[error("cannot open the text index: {0}")]
    TextIndex(#[from] registry_text_index::Error),
    #[error("cannot open the vector index: {0}")]
    VectorIndex(#[from] registry_vector_index::Error),
    #[error("cannot restore the indexes from the store: {0}")]
    Recover(registry_core::CoreError),
}

/// How often deferred text-index entries and buffered usage counters are written.
const FLUSH_EVERY: Duration = Duration::from_millis(200);

/// Commits deferred text entries and buffered usage counters every [`FLUSH_EVERY`]; stopped
/// and joined when the state is dropped, so that the index (and its writer lock) is released
/// with the state and nothing buffered is lost on a clean shutdown.
pub struct Flusher {
    text: std::sync::Weak<TantivyTextIndex>,
    stats: std::sync::Weak<SqliteStats>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn flush_once(text: &TantivyTextIndex, stats: &SqliteStats) {
    if text.has_pending()
        && let Err(e) = registry_core::retrieval::TextIndex::flush(text)
    {
        tracing::warn!(error = %e, "deferred text-index commit failed; will retry");
    }
    if stats.has_pending()
        && let Err(e) = stats.flush()
    {
        tracing::warn!(error = %e, "usage counters not written; will retry");
    }
}

impl Flusher {
    fn spawn(text: &Arc<TantivyTextIndex>, stats: &Arc<SqliteStats>) -> Flusher {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (wt, ws) = (Arc::downgrade(text), Arc::downgrade(stats));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("flusher".into())
            .spawn(move || {
                while !flag.load(std::sync::atomic::Ordering::Acquire) {
                    std::thread::park_timeout(FLUSH_EVERY);
                    let (Some(text), Some(stats)) = (wt.upgrade(), ws.upgrade()) else {
                        return;
                    };
                    flush_once(&text, &stats);
                }
            });
        let thread = match thread {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::warn!(error = %e, "no background flusher; searches commit deferred entries");
                None
            }
        };
        Flusher {
            text: Arc::downgrade(text),
            stats: Arc::downgrade(stats),
            stop,
            thread,
        }
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
        if let (Some(text), Some(stats)) = (self.text.upgrade(), self.stats.upgrade()) {
            flush_once(&text, &stats);
        }
    }
}

/// The format of the index entries this build writes. 2: every entry carries the governance
/// tags (`sens:…`, `purpose:…`) that clearance and purpose filter on.
pub const INDEX_FORMAT: u32 = 2;
const INDEX_FORMAT_FILE: &str = "index-format";

/// Opens the embedded store with the configured audit key (creating the key on first start).
pub fn open_store(config: &Config, readers: usize) -> Result<SqliteStore, StartError> {
    let key = config.load_audit_key()?;
    Ok(SqliteStore::open_dir(
        &config.data_dir,
        StoreOptions {
            readers,
            audit_key: Some(key),
        },
    )?)
}

impl AppState {
    /// Opens (and migrates) everything under `config.data_dir`.
    pub fn open(config: Config) -> Result<AppState, StartError> {
        let dir = config.data_dir.clone();
        let io = |source| StartError::DataDir {
            dir: dir.display().to_string(),
            source,
        };
        std::fs::create_dir_all(&dir).map_err(io)?;
        let audit_key = config.load_audit_key()?;
        let store = Arc::new(open_store(&config, StoreOptions::default().readers)?);
        let blobs = Arc::new(FsBlobStore::open(dir.join("blobs")).map_err(io)?);
        let embedder = Arc::new(MiniLmEmbedder::new(EmbedderConfig {
            model_dir: config.model_dir.clone(),
            batch_size: config.embed_batch,
            threads: Some(config.embed_threads),
            ..EmbedderConfig::default()
        })?);
        let text = Arc::new(TantivyTextIndex::open(dir.join("text"))?);
        let vectors = Arc::new(EmbeddedVectorIndex::open(
            dir.join("vectors"),
            registry_embed::DIM,
        )?);
        let search = HybridSearcher::new(text.clone(), vectors.clone(), embedder.clone());
        let stats = Arc::new(SqliteStats::new(store.clone()));
        let flusher = Flusher::spawn(&text, &stats);
        let state = AppState(Arc::new(Inner {
            mcp_sessions: crate::mcp::SessionLimits::new(config.mcp_max_sessions_per_key),
            config,
            store,
            blobs,
            embedder,
            text,
            vectors,
            search,
            stats,
            audit_key,
            memory_locks: KeyedLocks::new(),
            skill_locks: KeyedLocks::new(),
            archives: crate::skills::ArchiveCache::default(),
            _flusher: flusher,
        }));
        state.upgrade_index_format()?;
        state.recover_deferred_text()?;
        Ok(state)
    }

    /// Re-labels every index entry written by an older build with today's keys, from the
    /// store (text re-written, vectors kept: no re-embedding), then records the format.
    fn upgrade_index_format(&self) -> Result<(), StartError> {
        use registry_core::retrieval::{TextDoc, TextIndex};
        let marker = self.config.data_dir.join(INDEX_FORMAT_FILE);
        let found: u32 = std::fs::read_to_string(&marker)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(1);
        if found >= INDEX_FORMAT {
            return Ok(());
        }
        let recover = StartError::Recover;
        let mut entries = crate::jobs::memory_service(self)
            .current_index_entries()
            .map_err(|e| recover(registry_core::CoreError::backend("memory", e)))?;
        entries.extend(
            crate::routes::knowledge::service(self)
                .current_index_entries()
                .map_err(|e| recover(e.into()))?,
        );
        let skills = crate::skills::current_index_docs(self)
            .map_err(|e| recover(registry_core::CoreError::backend("skills", e.message)))?;
        let n = entries.len() + skills.len();
        for batch in entries.chunks(1000) {
            let keys: Vec<_> = batch.iter().map(|(k, _)| k.clone()).collect();
            self.vectors.relabel(&keys)?;
            let docs: Vec<TextDoc> = batch
                .iter()
                .map(|(keys, text)| TextDoc {
                    keys: keys.clone(),
                    text: text.clone(),
                })
                .collect();
            self.text.upsert(&docs).map_err(recover)?;
        }
        for batch in skills.chunks(1000) {
            self.text.upsert(batch).map_err(recover)?;
        }
        std::fs::write(&marker, INDEX_FORMAT.to_string()).map_err(|source| {
            StartError::DataDir {
                dir: marker.display().to_string(),
                source,
            }
        })?;
        if n > 0 {
            tracing::info!(
                entries = n,
                from = found,
                to = INDEX_FORMAT,
                "re-labelled the indexes"
            );
        }
        Ok(())
    }

    /// Memory writes defer their text-index commit (the store is the durable copy). Entries the
    /// last commit did not include are re-written from the store, with a margin for writes that
    /// were between their store commit and their index write when the commit began (60 s).
    fn recover_deferred_text(&self) -> Result<(), StartError> {
        use registry_core::retrieval::TextIndex;
        let since = match self.text.durable_until().map_err(StartError::Recover)? {
            Some(t) => t - chrono::Duration::seconds(60),
            None => chrono::DateTime::<chrono::Utc>::UNIX_EPOCH,
        };
        let n = crate::jobs::memory_service(self)
            .reindex_text_since(since)
            .map_err(|e| StartError::Recover(registry_core::CoreError::backend("memory", e)))?;
        if n > 0 {
            tracing::info!(memories = n, %since, "re-wrote text entries written since the last index commit");
        }
        Ok(())
    }

    /// Runs blocking work (SQLite, index, model) off the async workers, under the request's
    /// deadline: when it passes first, the answer is 408 `REQUEST_TIMEOUT` and the work is
    /// cancelled before it commits anything; once the work has committed, the answer waits
    /// for its real outcome. Dropping the returned future (a client gone) cancels it alike.
    pub async fn blocking<T, F>(&self, f: F) -> ApiResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&AppState) -> ApiResult<T> + Send + 'static,
    {
        let ctx = crate::request::current();
        let at = ctx.as_ref().map_or_else(
            || Instant::now() + Duration::from_secs(self.config.request_timeout_secs),
            |c| c.deadline,
        );
        let deadline = Deadline::at(at);
        let guard = CancelOnDrop(Some(deadline.clone()));
        let me = self.clone();
        let d = deadline.clone();
        let mut handle =
            tokio::task::spawn_blocking(move || crate::request::run_as(ctx, || d.run(|| f(&me))));
        let out = match tokio::time::timeout_at(at.into(), &mut handle).await {
            Ok(joined) => joined?,
            Err(_) if deadline.cancel() => {
                Err(ApiError::from(registry_core::CoreError::DeadlineExceeded))
            }
            // Committed already: its outcome is the answer.
            Err(_) => handle.await?,
        };
        guard.disarm();
        out
    }

    /// The domain that rebuilds summaries when one of their parents is deleted: consolidated
    /// memories are rebuilt by the memory service (the impl is in `crate::jobs`).
    pub fn regenerator(&self) -> Option<&dyn registry_core::deletion::Regenerator> {
        Some(self)
    }

    pub async fn authenticate(&self, key: &str) -> Result<Principal, ApiError> {
        let key = key.to_string();
        self.blocking(move |s| principal_for_key(s.store.as_ref(), &key))
            .await
    }
}

/// Cancels the work of a request whose future is dropped before it finished.
struct CancelOnDrop(Option<Deadline>);

impl CancelOnDrop {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(d) = self.0.take() {
            d.cancel();
        }
    }
}
