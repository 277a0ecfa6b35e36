//! Shared server state: the configuration and the services, built once over the embedded
//! backends of the data directory. Everything durable lives there; the state holds only
//! handles, so a restart loses nothing.

use registry_core::hash::sha256_hex;
use registry_core::store::KeyStore;
use std::sync::Arc;
use std::time::{Duration, Instant};

use registry_core::deadline::{Deadline, Shutdown};
use registry_core::principal::Principal;
use registry_core::retrieval::{Embedder, VectorIndex};
use registry_core::store::{BlobStore, Store};
use registry_embed::{EmbedderConfig, ModelChoice, OnnxEmbedder};
use registry_services::{Backends, Options, Services};
use registry_store_postgres::{PgOptions, PgStore};
use registry_store_sqlite::{FsBlobStore, SqliteStore, StoreOptions};
use registry_text_index::TantivyTextIndex;
use registry_vector_index::EmbeddedVectorIndex;
use registry_vector_qdrant::{QdrantOptions, QdrantVectorIndex};

use crate::config::Config;
use crate::error::{ApiError, ApiResult};

#[derive(Clone)]
pub struct AppState(Arc<Inner>);

pub struct Inner {
    /// On a shared store, applies the change log to this node's indexes; stopped first.
    _follower: Option<Follower>,
    /// Declared early so that it stops, and writes what is buffered, before the services drop.
    _flusher: Flusher,
    pub config: Config,
    pub services: Services,
    /// Open MCP sessions per key.
    pub mcp_sessions: crate::slots::SessionLimits,
    /// Open `/v1/events` streams per key.
    pub feed_streams: Arc<crate::slots::StreamSlots>,
    /// Begun when the server stops taking requests ([`crate::serve_until`]): every request's
    /// deadline watches it, so uncommitted blocking work stops at its next check.
    pub shutdown: Shutdown,
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
    #[error("cannot open the PostgreSQL store (setting `store.url`): {0}")]
    PgStore(#[from] registry_store_postgres::StoreError),
    #[error("cannot load the embedding model: {0}")]
    Model(#[from] registry_embed::EmbedError),
    #[error("cannot open the text index: {0}")]
    TextIndex(#[from] registry_text_index::Error),
    #[error("cannot open the vector index: {0}")]
    VectorIndex(#[from] registry_vector_index::Error),
    #[error(
        "the vector index in {dir} holds {found}-dimensional vectors, but the configured \
         embedding model {model} makes {want}-dimensional ones; set embed_model back, or move \
         {dir} aside and run `registry jobs run reindex` to re-embed everything"
    )]
    ModelDimension {
        dir: String,
        model: ModelChoice,
        found: usize,
        want: usize,
    },
    #[error(
        "cannot open the Qdrant vector index at {url} (setting `vectors.qdrant_url`): {message}"
    )]
    Qdrant { url: String, message: String },
    #[error("cannot restore the indexes from the store: {0}")]
    Recover(String),
}

/// How often deferred text-index entries and buffered usage counters are written.
const FLUSH_EVERY: Duration = Duration::from_millis(200);

/// Writes what the services buffer (deferred text entries, usage counters) every
/// [`FLUSH_EVERY`]; stopped and joined when the state is dropped, after a last flush, so that
/// nothing buffered is lost on a clean shutdown.
pub struct Flusher {
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    services: Services,
}

fn flush_once(services: &Services) {
    if let Err(e) = services.flush() {
        tracing::warn!(error = %e, "buffered writes not flushed; will retry");
    }
}

impl Flusher {
    fn spawn(services: Services) -> Flusher {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let svc = services.clone();
        let thread = std::thread::Builder::new()
            .name("flusher".into())
            .spawn(move || {
                while !flag.load(std::sync::atomic::Ordering::Acquire) {
                    std::thread::park_timeout(FLUSH_EVERY);
                    flush_once(&svc);
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
            stop,
            thread,
            services,
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
        flush_once(&self.services);
    }
}

const INDEX_FORMAT_FILE: &str = "index-format";

/// This node's name in a shared store's change log, kept in its data directory (the indexes
/// there are what the name's position in the log describes).
const NODE_ID_FILE: &str = "node-id";

/// How often a node drops log entries every live node has applied.
const PRUNE_EVERY: Duration = Duration::from_secs(60);

/// The node id of `dir`, made on first use.
fn node_id(dir: &std::path::Path) -> std::io::Result<String> {
    let path = dir.join(NODE_ID_FILE);
    match std::fs::read_to_string(&path) {
        Ok(s) if !s.trim().is_empty() => Ok(s.trim().to_string()),
        Ok(_) | Err(_) => {
            std::fs::create_dir_all(dir)?;
            let host = std::env::var("HOSTNAME").unwrap_or_default();
            let id = format!(
                "{}{}{}",
                host,
                if host.is_empty() { "" } else { "-" },
                &uuid::Uuid::now_v7().simple().to_string()[20..]
            );
            std::fs::write(&path, &id)?;
            Ok(id)
        }
    }
}

/// Applies the shared store's change log to this node's indexes every `follow_interval_ms`,
/// and drops entries every live node has applied every [`PRUNE_EVERY`]; stopped and joined when
/// the state is dropped.
pub struct Follower {
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Follower {
    fn spawn(services: Services, every: Duration, live_within: Duration) -> std::io::Result<Self> {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("follower".into())
            .spawn(move || {
                let mut pruned = Instant::now();
                while !flag.load(std::sync::atomic::Ordering::Acquire) {
                    if let Err(e) = services.follow_once() {
                        tracing::warn!(error = %e, "change log not applied; will retry");
                    }
                    if pruned.elapsed() >= PRUNE_EVERY
                        && let Some(c) = services.backends.store.cluster()
                    {
                        pruned = Instant::now();
                        if let Err(e) = c.prune(live_within) {
                            tracing::warn!(error = %e, "change log not pruned");
                        }
                    }
                    std::thread::park_timeout(every);
                }
            })?;
        Ok(Follower {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

/// Opens the configured store with the configured audit key (creating the key on first start):
/// PostgreSQL when `store.url` is set, else the embedded SQLite database in the data directory.
pub fn open_store(config: &Config, readers: usize) -> Result<Arc<dyn Store>, StartError> {
    Ok(open_stores(config, readers)?.0)
}

/// A store, and the blob store that goes with it when it is not the data directory's files.
pub type OpenedStore = (Arc<dyn Store>, Option<Arc<dyn BlobStore>>);

/// As [`open_store`], with the blob store that goes with it: PostgreSQL's `blobs` table when
/// the store is shared (every node serves what one stored), `None` for the files in the data
/// directory.
pub fn open_stores(config: &Config, readers: usize) -> Result<OpenedStore, StartError> {
    let key = config.load_audit_key()?;
    if let Some(url) = config
        .store
        .url
        .as_deref()
        .filter(|_| config.store.is_postgres())
    {
        let dir = &config.data_dir;
        let node = node_id(dir).map_err(|source| StartError::DataDir {
            dir: dir.display().to_string(),
            source,
        })?;
        let store = PgStore::connect(PgOptions {
            schema: config.store.schema.clone(),
            pool_size: config.store.pool_size,
            audit_key: Some(key),
            node_id: Some(node),
            ..PgOptions::new(url)
        })?;
        let store = Arc::new(store);
        let blobs = Arc::new(registry_store_postgres::PgBlobStore::new(store.clone()));
        return Ok((store, Some(blobs)));
    }
    let sqlite = SqliteStore::open_dir(
        &config.data_dir,
        StoreOptions {
            readers,
            audit_key: Some(key),
        },
    )?;
    Ok((Arc::new(sqlite), None))
}

fn cluster_options(config: &Config) -> registry_services::ClusterOptions {
    registry_services::ClusterOptions {
        live_within: Duration::from_secs(config.store.node_timeout_secs),
        purge_propagation: Duration::from_secs(config.store.purge_propagation_secs),
    }
}

/// Opens the vector index with the dimension of `model`; an index made for another
/// dimension stops the start with what to do.
fn open_vectors(
    dir: &std::path::Path,
    model: ModelChoice,
) -> Result<EmbeddedVectorIndex, StartError> {
    let path = dir.join("vectors");
    match EmbeddedVectorIndex::open(&path, model.spec().dim) {
        Err(registry_vector_index::Error::Dimension { want, got }) => {
            Err(StartError::ModelDimension {
                dir: path.display().to_string(),
                model,
                found: want,
                want: got,
            })
        }
        other => Ok(other?),
    }
}

/// The vector index the services use, and the same index as Qdrant's when it is Qdrant.
type OpenedVectors = (Arc<dyn VectorIndex>, Option<Arc<QdrantVectorIndex>>);

/// The vector index the configuration names: Qdrant's collection for `embedder`'s model, or
/// the embedded index in the data directory.
fn open_vector_index(
    config: &Config,
    embedder: &OnnxEmbedder,
) -> Result<OpenedVectors, StartError> {
    let Some(url) = config.vectors.qdrant() else {
        let embedded = open_vectors(&config.data_dir, config.embed_model)?;
        return Ok((Arc::new(embedded), None));
    };
    let info = embedder.info();
    let mut options = QdrantOptions::new(url, info.dim, info.tag());
    options.api_key = config.vectors.qdrant_api_key()?;
    options.collection_prefix = config.vectors.qdrant_collection_prefix.clone();
    options.timeout = Duration::from_secs(config.vectors.qdrant_timeout_secs);
    let q = QdrantVectorIndex::connect(options).map_err(|e| StartError::Qdrant {
        url: url.to_string(),
        message: e.to_string(),
    })?;
    tracing::info!(
        collection = q.collection(),
        server = q.server_version(),
        "vectors in Qdrant"
    );
    let q = Arc::new(q);
    Ok((q.clone(), Some(q)))
}

/// The embedding models a registry runs: the search model and the write gate's second opinion
/// (the same session when the search model is multilingual-e5-small). Loading them is most of
/// a small registry's start: 19 small integration tests took 61 s on 2 cores loading them per
/// test and 20 s loading them once.
#[derive(Clone)]
pub struct Models {
    pub embedder: Arc<OnnxEmbedder>,
    pub gate_embedder: Arc<dyn Embedder>,
}

impl Models {
    /// Verifies and loads the models `config` names (`embed_model`, `model_dir`, and the
    /// sessions, threads, batch and query cache settings).
    pub fn load(config: &Config) -> Result<Models, StartError> {
        let embedder = Arc::new(OnnxEmbedder::new(EmbedderConfig {
            model: config.embed_model,
            model_dir: config.model_dir.clone(),
            batch_size: config.embed_batch,
            // `embed_sessions` sessions of `embed_threads` ONNX Runtime threads each (default
            // one session of two). Tried: as many one-thread sessions, a batch spread over
            // them: SciFact ingest 18.0 → 19.3 chunks/s, but a memory write (its text embedded
            // on one thread) about 1.5 ms slower at p50 and knowledge queries 5 ms; writes are
            // the hot path. More sessions let concurrent requests embed side by side on a
            // machine with more cores.
            threads: Some(config.embed_threads),
            sessions: config.embed_sessions,
            query_cache: config.embed_query_cache,
            ..EmbedderConfig::default()
        })?);
        // The write gate's second opinion reads multilingual-e5-small vectors: the search
        // model when it is that one, otherwise a session of its own (about 8 ms of one core
        // per memory write).
        let gate_embedder: Arc<dyn Embedder> =
            if config.embed_model == ModelChoice::MultilingualE5Small {
                embedder.clone()
            } else {
                Arc::new(OnnxEmbedder::new(EmbedderConfig {
                    model_dir: config.model_dir.clone(),
                    threads: Some(config.embed_threads),
                    query_cache: 0,
                    ..EmbedderConfig::for_model(registry_detect::vector::VECTOR_MODEL_NAME)?
                })?)
            };
        Ok(Models {
            embedder,
            gate_embedder,
        })
    }
}

impl AppState {
    /// Opens (and migrates) everything under `config.data_dir`: the embedded backends (SQLite,
    /// blobs, tantivy, the vector index, the local model) and the services over them.
    pub fn open(config: Config) -> Result<AppState, StartError> {
        let models = Models::load(&config)?;
        Self::open_with_models(config, models)
    }

    /// [`Self::open`] with models loaded already ([`Models::load`] for this configuration's
    /// model settings): one process serving several registries (the tests) loads them once.
    pub fn open_with_models(config: Config, models: Models) -> Result<AppState, StartError> {
        if models.embedder.spec().name != config.embed_model.spec().name {
            return Err(StartError::Config(crate::config::ConfigError::Invalid {
                setting: "embed_model",
                message: format!(
                    "the loaded model is {}, the configuration names {}",
                    models.embedder.spec().name,
                    config.embed_model
                ),
            }));
        }
        let dir = config.data_dir.clone();
        let io = |source| StartError::DataDir {
            dir: dir.display().to_string(),
            source,
        };
        std::fs::create_dir_all(&dir).map_err(io)?;
        let (store, shared_blobs) = open_stores(&config, StoreOptions::default().readers)?;
        // A text index of an older stored format (or analysis), or one whose rebuild was
        // interrupted, is emptied here and rebuilt from the store below, before serving.
        let text = match TantivyTextIndex::open(dir.join("text")) {
            Err(registry_text_index::Error::NeedsRebuild { reason, .. }) => {
                tracing::warn!(%reason, "rebuilding the text index from the store");
                TantivyTextIndex::rebuild_empty(dir.join("text"))?
            }
            other => other?,
        };
        let text = Arc::new(text);
        let Models {
            embedder,
            gate_embedder,
        } = models;
        let (vectors, qdrant) = open_vector_index(&config, &embedder)?;
        let backends = Backends {
            store,
            blobs: match shared_blobs {
                Some(b) => b,
                None => Arc::new(FsBlobStore::open(dir.join("blobs")).map_err(io)?),
            },
            text: text.clone(),
            vectors,
            embedder,
            gate_embedder: Some(gate_embedder),
        };
        let mut services = Services::new(
            backends,
            Options {
                audit_key: config.load_audit_key()?,
                audit_anchor: config.audit_anchor_path(),
                retention: config.retention.clone(),
                cluster: cluster_options(&config),
            },
        );
        services.skills.set_observe_policy(config.skills.policy());
        services.draft_policy = config.drafts;
        let recover = |e: registry_services::Error| StartError::Recover(e.message);
        if text.needs_rebuild() {
            let n = services.rebuild_text_index().map_err(recover)?;
            text.finish_rebuild()?;
            tracing::info!(entries = n, "rebuilt the text index from the store");
        }
        let marker = dir.join(INDEX_FORMAT_FILE);
        let found: u32 = std::fs::read_to_string(&marker)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(1);
        let n = services.upgrade_index_format(found).map_err(recover)?;
        if found < registry_services::INDEX_FORMAT {
            std::fs::write(&marker, registry_services::INDEX_FORMAT.to_string()).map_err(io)?;
            if n > 0 {
                tracing::info!(entries = n, from = found, "re-labelled the indexes");
            }
        }
        // Vectors another model made (the configured model changed) are re-embedded before
        // serving: a query vector is never compared with another model's vectors.
        if services.has_foreign_vectors().map_err(recover)? {
            tracing::warn!(model = %config.embed_model, "re-embedding vectors another model made");
            let report = services.run_job("reindex").map_err(recover)?;
            if let Some(e) = report.error {
                return Err(StartError::Recover(format!("re-embedding failed: {e}")));
            }
            tracing::info!(counts = %report.counts, "re-embedded with the configured model");
        }
        let n = services.recover_deferred_text().map_err(recover)?;
        if n > 0 {
            tracing::info!(
                memories = n,
                "re-wrote text entries written since the last index commit"
            );
        }
        // A shared store: catch up with what the other nodes wrote meanwhile (or rebuild from
        // the store), then keep following.
        let follower = match services.catch_up().map_err(recover)? {
            None => None,
            Some(r) => {
                tracing::info!(
                    applied_seq = r.applied_seq,
                    changes = r.changes,
                    "caught up with the change log"
                );
                let opts = cluster_options(&config);
                let every = Duration::from_millis(config.store.follow_interval_ms);
                Some(Follower::spawn(services.clone(), every, opts.live_within).map_err(io)?)
            }
        };
        // An empty vector index over a store that holds memories or chunks (a new Qdrant
        // collection after a change of model, a vector directory lost) is filled from the
        // store before serving.
        if services.vectors_missing().map_err(recover)? {
            tracing::warn!("the vector index is empty: embedding everything from the store");
            let n = services.rebuild_indexes().map_err(recover)?;
            tracing::info!(entries = n, "filled the vector index from the store");
        }
        if let Some(q) = &qdrant {
            // A purge reaches this collection only: no other model's may keep a vector.
            let dropped = q.drop_other_models().map_err(|e| StartError::Qdrant {
                url: config.vectors.qdrant().unwrap_or_default().to_string(),
                message: e.to_string(),
            })?;
            if !dropped.is_empty() {
                tracing::warn!(?dropped, "dropped the collections of other models");
            }
        }
        Ok(AppState(Arc::new(Inner {
            mcp_sessions: crate::slots::SessionLimits::new(config.mcp_max_sessions_per_key),
            shutdown: Shutdown::new(),
            feed_streams: Default::default(),
            _follower: follower,
            _flusher: Flusher::spawn(services.clone()),
            config,
            services,
        })))
    }

    /// Runs blocking work (the store, the indexes, the model) off the async workers, under the
    /// request's deadline: when it passes first, the answer is 408 `REQUEST_TIMEOUT` and the
    /// work is cancelled before it commits anything; once the work has committed, the answer
    /// waits for its real outcome. Dropping the returned future (a client gone) cancels it
    /// alike, and so does the server's shutdown.
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
        let deadline = Deadline::at(at).with_shutdown(&self.shutdown);
        let guard = registry_core::deadline::CancelOnDrop::new(deadline.clone());
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

    pub async fn authenticate(&self, key: &str) -> Result<Principal, ApiError> {
        let key = key.to_string();
        self.blocking(move |s| principal_for_key(s.services.backends.store.as_ref(), &key))
            .await
    }
}

/// Cancels the work of a request whose future is dropped before it finished.
/// Looks a key up by its sha256; revoked and unknown keys both answer 401.
pub(crate) fn principal_for_key(store: &dyn KeyStore, key: &str) -> Result<Principal, ApiError> {
    principal_for_key_hash(store, &sha256_hex(key))?.ok_or_else(ApiError::unauthenticated)
}

/// The principal of the key with this sha256 (`None`: unknown or revoked). The console resolves
/// its sessions' keys through this, so both doors see the same principal.
pub fn principal_for_key_hash(
    store: &dyn KeyStore,
    key_hash: &str,
) -> Result<Option<Principal>, ApiError> {
    let Some(rec) = store.find_key(key_hash)?.filter(|r| r.revoked_at.is_none()) else {
        return Ok(None);
    };
    Ok(Some(Principal::of_key(&rec)))
}
