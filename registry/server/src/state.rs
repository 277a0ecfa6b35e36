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
        Ok(AppState(Arc::new(Inner {
            config,
            store,
            blobs,
            embedder,
            text,
            vectors,
            search,
        })))
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

    /// The domain that rebuilds summaries when one of their parents is deleted.
    pub fn regenerator(&self) -> Option<&dyn registry_core::deletion::Regenerator> {
        None
    }

    pub async fn authenticate(&self, key: &str) -> Result<Principal, ApiError> {
        let key = key.to_string();
        self.blocking(move |s| principal_for_key(s.store.as_ref(), &key))
            .await
    }
}
