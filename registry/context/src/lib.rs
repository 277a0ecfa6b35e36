#![doc = include_str!("../README.md")]

pub mod compile;
pub mod error;
pub mod replay;

use std::sync::Arc;

use registry_core::principal::Principal;
use registry_core::retrieval::Embedder;
use registry_core::store::{AssetStore, ManifestStore};
use registry_engine::HybridSearcher;
use registry_knowledge::KnowledgeService;
use registry_memory::MemoryService;
use registry_skills::SkillsService;

pub use compile::{Comparison, Manifest, Pack, PackRequest};
pub use error::{Error, Result};
pub use replay::{ChangeKind, Replay, ReplayChange, ReplayItem};

/// Compiles context packs from the memory, knowledge and skills services, and keeps their
/// manifests through the store's [`ManifestStore`].
#[derive(Clone)]
pub struct ContextService {
    pub(crate) memory: MemoryService,
    pub(crate) knowledge: Arc<KnowledgeService>,
    pub(crate) skills: SkillsService,
    pub(crate) embedder: Arc<dyn Embedder>,
    pub(crate) search: HybridSearcher,
    pub(crate) store: Arc<dyn AssetStore>,
    pub(crate) manifests: Arc<dyn ManifestStore>,
    /// The task layer's source (`PackRequest::task`).
    pub(crate) tasks: registry_tasks::TaskService,
}

impl std::fmt::Debug for ContextService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContextService").finish_non_exhaustive()
    }
}

impl ContextService {
    pub fn new(
        memory: MemoryService,
        knowledge: Arc<KnowledgeService>,
        skills: SkillsService,
        search: HybridSearcher,
        store: Arc<dyn AssetStore>,
        manifests: Arc<dyn ManifestStore>,
        tasks: registry_tasks::TaskService,
    ) -> Self {
        ContextService {
            embedder: search.embedder.clone(),
            memory,
            knowledge,
            skills,
            search,
            store,
            manifests,
            tasks,
        }
    }

    /// Compiles a pack for `p` and stores its manifest.
    pub fn compile(&self, p: &Principal, req: &PackRequest) -> Result<Pack> {
        compile::compile(self, p, req)
    }

    /// A stored manifest as `p` may read it.
    pub fn load(&self, p: &Principal, id: &str) -> Result<Manifest> {
        compile::load(self, p, id)
    }

    /// Stored pack `id` compiled again for `p` against the registry as it is now, and what
    /// differs item by item (see [`replay`]).
    pub fn replay(&self, p: &Principal, id: &str) -> Result<Replay> {
        replay::replay(self, p, id)
    }

    /// The stored manifests of `p`'s tenant that included `asset` and that `p` may read (its
    /// own, or any for whoever reads the tenant's manifests), newest first, at most `limit`,
    /// each with whether it can be replayed, and how many there are.
    pub fn manifests_with_asset(
        &self,
        p: &Principal,
        asset: &str,
        limit: usize,
    ) -> Result<(usize, Vec<(Manifest, bool)>)> {
        let principal =
            (!registry_core::access::reads_tenant_manifests(p)).then_some(p.user.as_str());
        let (total, stored) = self
            .manifests
            .manifests_with_asset(&p.tenant, principal, asset, limit)?;
        let manifests = stored
            .into_iter()
            .map(|m| {
                let replayable = m.request.is_some();
                let m = serde_json::from_value::<Manifest>(m.manifest).map_err(Error::internal)?;
                Ok((m.for_reader(p, self.store.as_ref())?, replayable))
            })
            .collect::<Result<_>>()?;
        Ok((total, manifests))
    }

    /// Why two packs `p` may read differ.
    pub fn compare(&self, p: &Principal, a: &str, b: &str) -> Result<Comparison> {
        Ok(compile::compare(&self.load(p, a)?, &self.load(p, b)?))
    }
}
