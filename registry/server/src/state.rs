//! Shared server state. Everything durable lives in the data directory; the state holds only
//! handles, so a restart loses nothing.

use std::sync::Arc;

use registry_core::principal::Principal;
use registry_embed::{EmbedderConfig, MiniLmEmbedder};
use registry_engine::HybridSearcher;
use registry_store_sqlite::{FsBlobStore, SqliteStore, StoreOptions};
use registry_text_index::TantivyTextIndex;
use registry_vector_index::EmbeddedVectorIndex;

use crate::config::Config;
use crate::error::{ApiError, ApiResult};
use crate::extract::principal_for_key;

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
    #[error("cannot open the store: {0}")]
    Store(#[from] registry_store_sqlite::StoreError),
    #[error("cannot load the embedding model: {0}")]
    Model(#[from] registry_embed::EmbedError),
    #[error("cannot open the text index: {0}")]
    TextIndex(#[from] registry_text_index::Error),
    #[error("cannot open the vector index: {0}")]
    VectorIndex(#[from] registry_vector_index::Error),
    #[error("cannot restore the text index from the store: {0}")]
    Recover(registry_core::CoreError),
}

/// How often deferred text-index entries are committed in the background.
const TEXT_FLUSH_EVERY: std::time::Duration = std::time::Duration::from_millis(200);

/// Commits deferred text entries every [`TEXT_FLUSH_EVERY`]; stopped and joined when the state
/// is dropped, so that the index (and its writer lock) is released with the state.
pub struct Flusher {
    text: std::sync::Weak<TantivyTextIndex>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Flusher {
    fn spawn(text: &Arc<TantivyTextIndex>) -> Flusher {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let weak = Arc::downgrade(text);
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("text-flush".into())
            .spawn(move || {
                while !flag.load(std::sync::atomic::Ordering::Acquire) {
                    std::thread::park_timeout(TEXT_FLUSH_EVERY);
                    let Some(text) = weak.upgrade() else { return };
                    if text.has_pending()
                        && let Err(e) = registry_core::retrieval::TextIndex::flush(text.as_ref())
                    {
                        tracing::warn!(error = %e, "deferred text-index commit failed; will retry");
                    }
                }
            });
        let thread = match thread {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::warn!(error = %e, "no background text flusher; searches commit deferred entries");
                None
            }
        };
        Flusher {
            text: Arc::downgrade(text),
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
        if let Some(text) = self.text.upgrade()
            && text.has_pending()
            && let Err(e) = registry_core::retrieval::TextIndex::flush(text.as_ref())
        {
            tracing::warn!(error = %e, "pending text entries not committed at shutdown; restored at the next start");
        }
    }
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
        let store = Arc::new(SqliteStore::open_dir(&dir, StoreOptions::default())?);
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
        let flusher = Flusher::spawn(&text);
        let state = AppState(Arc::new(Inner {
            config,
            store,
            blobs,
            embedder,
            text,
            vectors,
            search,
            _flusher: flusher,
        }));
        state.recover_deferred_text()?;
        Ok(state)
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

    /// Runs blocking work (SQLite, index, model) off the async workers.
    pub async fn blocking<T, F>(&self, f: F) -> ApiResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&AppState) -> ApiResult<T> + Send + 'static,
    {
        let me = self.clone();
        tokio::task::spawn_blocking(move || f(&me)).await?
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
