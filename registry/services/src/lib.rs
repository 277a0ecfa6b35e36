#![doc = include_str!("../README.md")]

pub mod audit;
pub mod deletion;
pub mod drafts;
pub mod erasure;
pub mod error;
pub mod feed;
pub mod follow;
pub mod impact;
pub mod jobs;
pub mod overview;

use std::path::PathBuf;
use std::sync::Arc;

use registry_core::audit::AuditKey;
use registry_core::locks::KeyedLocks;
use registry_core::retrieval::{Embedder, TextDoc, TextIndex, VectorIndex};
use registry_core::store::{AssetStore, BlobStore, Store};
use registry_engine::HybridSearcher;
use registry_knowledge::{KnowledgeConfig, KnowledgeService};
use registry_memory::MemoryService;
use registry_skills::SkillsService;

pub use deletion::Deletions;
pub use drafts::{DraftFromMemory, DraftPolicy};
pub use error::{Error, Result};
pub use follow::{ClusterOptions, FollowReport};
pub use impact::Impact;
pub use jobs::{JOBS, JobReport, RetentionPolicy};

/// The storage and index backends a deployment plugs in (the embedded form: SQLite, tantivy,
/// the in-process vector index; the scale-out form: PostgreSQL and Qdrant).
#[derive(Clone)]
pub struct Backends {
    pub store: Arc<dyn Store>,
    pub blobs: Arc<dyn BlobStore>,
    pub text: Arc<dyn TextIndex>,
    pub vectors: Arc<dyn VectorIndex>,
    pub embedder: Arc<dyn Embedder>,
    /// The model the write gate's instruction detector takes its second opinion from
    /// (multilingual-e5-small: `registry_detect::vector`); the search embedder when it is that
    /// model. `None`: the detector's classifier decides alone.
    pub gate_embedder: Option<Arc<dyn Embedder>>,
}

/// What the services need besides the backends.
#[derive(Debug, Clone)]
pub struct Options {
    /// Keys the audit chain; the services sign checkpoints with it.
    pub audit_key: AuditKey,
    /// Where the newest signed checkpoint is kept, outside the database.
    pub audit_anchor: PathBuf,
    pub retention: RetentionPolicy,
    /// Several nodes on one store: liveness and how long a purge waits for the others.
    pub cluster: ClusterOptions,
}

/// Every domain service, built once over one set of backends. Every door (HTTP, MCP, the
/// console, the CLI, the scheduled jobs) calls these, never each other.
#[derive(Clone)]
pub struct Services {
    pub backends: Backends,
    pub search: HybridSearcher,
    pub memory: MemoryService,
    pub knowledge: Arc<KnowledgeService>,
    pub skills: SkillsService,
    pub context: registry_context::ContextService,
    pub tasks: registry_tasks::TaskService,
    pub deletions: Arc<Deletions>,
    pub audit: Arc<audit::AuditService>,
    pub options: Options,
    /// Which procedural memories may become skill drafts (the server sets it from its
    /// configuration).
    pub draft_policy: DraftPolicy,
}

impl std::fmt::Debug for Services {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Services").finish_non_exhaustive()
    }
}

/// The format of the index entries this build writes. 2: every entry carries the governance
/// tags (`sens:…`, `purpose:…`) clearance and purpose filter on. 3: skill discover entries
/// have a vector too (semantic discovery).
pub const INDEX_FORMAT: u32 = 3;

impl Services {
    pub fn new(backends: Backends, options: Options) -> Services {
        let b = &backends;
        let search = HybridSearcher::new(b.text.clone(), b.vectors.clone(), b.embedder.clone());
        let store: Arc<dyn AssetStore> = b.store.clone();
        let memory = MemoryService::new(store.clone(), search.clone(), b.store.clone())
            .with_locks(KeyedLocks::new())
            .with_gate_embedder(b.gate_embedder.clone())
            .with_task_log(b.store.clone());
        let knowledge = Arc::new(KnowledgeService::new(
            store.clone(),
            search.clone(),
            KnowledgeConfig::default(),
        ));
        let deletions = Arc::new(
            Deletions::new(b.clone(), memory.clone()).with_cluster(options.cluster.clone()),
        );
        let skills = SkillsService::new(
            store.clone(),
            b.blobs.clone(),
            b.text.clone(),
            b.vectors.clone(),
            b.embedder.clone(),
            deletions.clone(),
        );
        let tasks = registry_tasks::TaskService::new(
            b.store.clone(),
            b.blobs.clone(),
            b.embedder.clone(),
            deletions.clone(),
        );
        let context = registry_context::ContextService::new(
            memory.clone(),
            knowledge.clone(),
            skills.clone(),
            search.clone(),
            store,
            b.store.clone(),
            tasks.clone(),
        );
        let audit = Arc::new(audit::AuditService::new(
            b.store.clone(),
            options.audit_key.clone(),
            options.audit_anchor.clone(),
        ));
        Services {
            backends,
            search,
            memory,
            knowledge,
            skills,
            context,
            tasks,
            deletions,
            audit,
            options,
            draft_policy: DraftPolicy::default(),
        }
    }

    /// Re-labels every index entry written with an older format (`found` < [`INDEX_FORMAT`])
    /// from the store: text entries re-written, vectors kept (no re-embedding). Returns how
    /// many entries were re-labelled.
    pub fn upgrade_index_format(&self, found: u32) -> Result<usize> {
        if found >= INDEX_FORMAT {
            return Ok(0);
        }
        let mut n = 0;
        if found < 2 {
            n += self.rewrite_text_entries(true)?;
        }
        if found < 3 {
            // Skill discover entries gain their vector (embedded from the stored entries).
            n += self.skills.reindex()?;
        }
        Ok(n)
    }

    /// Re-writes every text entry from the store (memories, knowledge chunks, skills), for a
    /// text index that was emptied because its stored format or analysis changed (see
    /// `TantivyTextIndex::rebuild_empty`). Vectors are untouched. Returns how many entries were
    /// written.
    pub fn rebuild_text_index(&self) -> Result<usize> {
        let n = self.rewrite_text_entries(false)?;
        self.backends.text.flush()?;
        Ok(n)
    }

    /// Re-writes the text entry of every current memory, chunk and skill from the store, in
    /// batches of 1,000; with `relabel_vectors`, their vectors' labels too. Returns the count.
    fn rewrite_text_entries(&self, relabel_vectors: bool) -> Result<usize> {
        let mut entries = self.memory.current_index_entries()?;
        entries.extend(self.knowledge.current_index_entries()?);
        let skills = self.skills.current_index_docs()?;
        let n = entries.len() + skills.len();
        for batch in entries.chunks(1000) {
            if relabel_vectors {
                let keys: Vec<_> = batch.iter().map(|(k, _)| k.clone()).collect();
                self.backends.vectors.relabel(&keys)?;
            }
            let docs: Vec<TextDoc> = batch
                .iter()
                .map(|(keys, text)| TextDoc {
                    keys: keys.clone(),
                    text: text.clone(),
                })
                .collect();
            self.backends.text.upsert(&docs)?;
        }
        for batch in skills.chunks(1000) {
            self.backends.text.upsert(batch)?;
        }
        Ok(n)
    }

    /// Memory writes defer their text-index commit (the store is the durable copy): entries the
    /// index's last commit did not include are re-written from the store, with a margin for
    /// writes that were between their store commit and their index write when the commit began
    /// (60 s). Returns how many were re-written.
    pub fn recover_deferred_text(&self) -> Result<usize> {
        let since = match self.backends.text.durable_until()? {
            Some(t) => t - chrono::Duration::seconds(60),
            None => chrono::DateTime::<chrono::Utc>::UNIX_EPOCH,
        };
        Ok(self.memory.reindex_text_since(since)?)
    }

    /// Writes what waits in buffers (deferred text entries, usage counters).
    pub fn flush(&self) -> Result<()> {
        self.backends.text.flush()?;
        self.backends.store.flush_usage()?;
        Ok(())
    }
}
