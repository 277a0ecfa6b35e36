//! Deletion over a deployment's backends: the engine (DESIGN §3, [`engine`]) bound to the store,
//! both indexes and the blobs, with the memory domain regenerating consolidated records, and
//! the store checkpointed after every purge so no deleted byte survives in a log.

use registry_core::asset::{AssetId, AssetRecord};
use registry_core::deletion::{Deleter, DeletionLevel, Receipt, Regenerator};
use registry_core::principal::Principal;
use registry_core::{CoreError, CoreResult};
use registry_memory::MemoryService;

use crate::Backends;

mod engine;

pub use engine::DeletionEngine;

pub struct Deletions {
    backends: Backends,
    memory: MemoryService,
    cluster: crate::follow::ClusterOptions,
}

impl std::fmt::Debug for Deletions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deletions").finish_non_exhaustive()
    }
}

impl Regenerator for Deletions {
    fn regenerate(
        &self,
        child: &AssetRecord,
        remaining: &[AssetRecord],
    ) -> CoreResult<Option<AssetId>> {
        Regenerator::regenerate(&self.memory, child, remaining)
    }
}

impl Deletions {
    pub fn new(backends: Backends, memory: MemoryService) -> Self {
        Deletions {
            backends,
            memory,
            cluster: Default::default(),
        }
    }

    /// How long a purge waits for the other nodes of a shared store.
    pub fn with_cluster(mut self, cluster: crate::follow::ClusterOptions) -> Self {
        self.cluster = cluster;
        self
    }

    /// Checkpoints after a purge, then, on a shared store, waits for every live node to apply
    /// it and says in the receipt which have.
    fn finish(&self, r: &mut Receipt) -> CoreResult<()> {
        self.checkpoint_after(r)?;
        crate::follow::settle_nodes(self.backends.store.as_ref(), &self.cluster, r)
    }

    fn engine(&self) -> DeletionEngine<'_> {
        let b = &self.backends;
        DeletionEngine {
            store: b.store.as_ref(),
            receipts: b.store.as_ref(),
            text: b.text.as_ref(),
            vectors: b.vectors.as_ref(),
            blobs: b.blobs.as_ref(),
            regenerator: Some(self),
        }
    }

    /// After a purge, earlier images of the pages it overwrote may still sit in the store's
    /// log: checkpoint until it completes.
    fn checkpoint_after(&self, r: &Receipt) -> CoreResult<()> {
        if r.level_reached == DeletionLevel::Purged {
            for _ in 0..20 {
                if self.backends.store.checkpoint()? {
                    return Ok(());
                }
            }
            return Err(CoreError::backend(
                "deletion",
                "the store's log checkpoint did not complete after the purge",
            ));
        }
        Ok(())
    }

    /// Deletes `roots` and everything derived from them, up to `level`, as `actor`. The
    /// deletion is filed under the roots' tenant (none for the global scope), so its receipt
    /// and events sit in the audit of whoever governs them.
    pub fn delete_as(
        &self,
        fallback_tenant: Option<&str>,
        actor: &str,
        reason: &str,
        roots: &[AssetId],
        level: DeletionLevel,
    ) -> CoreResult<Receipt> {
        let tenant = match roots.first() {
            Some(id) => self
                .backends
                .store
                .get(id)?
                .map_or(fallback_tenant.map(String::from), |r| r.meta.scope.tenant),
            None => fallback_tenant.map(String::from),
        };
        let mut r = self
            .engine()
            .delete(tenant.as_deref(), actor, reason, roots, level)?;
        self.finish(&mut r)?;
        Ok(r)
    }

    /// As [`Self::delete_as`] for principal `p`.
    pub fn delete(
        &self,
        p: &Principal,
        roots: &[AssetId],
        level: DeletionLevel,
        reason: &str,
    ) -> CoreResult<Receipt> {
        self.delete_as(Some(&p.tenant), &p.user, reason, roots, level)
    }

    /// Deletes as a system actor (retention), filed under `tenant`.
    pub fn delete_for_tenant(
        &self,
        tenant: Option<&str>,
        actor: &str,
        reason: &str,
        roots: &[AssetId],
        level: DeletionLevel,
    ) -> CoreResult<Receipt> {
        let mut r = self.engine().delete(tenant, actor, reason, roots, level)?;
        self.finish(&mut r)?;
        Ok(r)
    }

    /// Finishes every deletion that a crash interrupted. Idempotent.
    pub fn resume_unfinished(&self) -> CoreResult<Vec<Receipt>> {
        let eng = self.engine();
        let mut done = vec![];
        for r in self.backends.store.unfinished_receipts()? {
            let mut r = eng.advance(r)?;
            self.finish(&mut r)?;
            done.push(r);
        }
        Ok(done)
    }

    /// A receipt `p` may read: whoever asked for the deletion, or whoever governs the tenant
    /// (or, for the global scope, the platform). Anything else answers "not found".
    pub fn receipt(&self, p: &Principal, id: &str) -> CoreResult<Receipt> {
        match self.backends.store.get_receipt(id)? {
            Some(r) if registry_core::access::may_read_receipt(p, &r) => self.for_reader(p, r),
            _ => Err(CoreError::NotFound(format!("no receipt {id}"))),
        }
    }

    /// Receipt `r` as `p` reads it, at every door that answers with one: its `flagged` list
    /// (assets that cite what was deleted, kept and flagged rather than deleted) names only the
    /// assets `p` may see now ([`crate::overview::may_see`]), so a deletion tells its deleter
    /// nothing of the private records of others that cited it; an admin also keeps the entries
    /// of assets purged since. The reached `assets` beyond the roots and the deleted assets'
    /// own parts (chunks, index entries, runs, task products), records built from several
    /// (a consolidated memory, a summary, a superseding version), are listed while stored (or
    /// rebuilt as a replacement) only to whoever may see them. `counts` stay the deletion's
    /// totals. The stored receipt keeps every entry.
    pub fn for_reader(&self, p: &Principal, mut r: Receipt) -> CoreResult<Receipt> {
        use registry_core::derivation::Relation;
        let crossing = |via: &str| {
            matches!(
                Relation::parse(via),
                Some(
                    Relation::ConsolidatedFrom
                        | Relation::SummaryOf
                        | Relation::Supersedes
                        | Relation::Cites
                )
            )
        };
        let reached: Vec<AssetId> = r
            .assets
            .iter()
            .filter(|a| crossing(&a.via))
            .map(|a| a.regenerated_as.clone().unwrap_or_else(|| a.id.clone()))
            .collect();
        let ids: Vec<AssetId> = r
            .flagged
            .iter()
            .map(|f| f.id.clone())
            .chain(reached)
            .collect();
        if ids.is_empty() {
            return Ok(r);
        }
        // Ids still stored, and of those the ones `p` may see.
        let mut stored = std::collections::HashSet::new();
        let mut seen = std::collections::HashSet::new();
        for part in ids.chunks(500) {
            registry_core::deadline::check()?;
            let recs = self
                .backends
                .store
                .find(&registry_core::store::AssetQuery {
                    ids: Some(part.to_vec()),
                    heads_only: true,
                    ..Default::default()
                })?;
            for rec in recs {
                if crate::overview::may_see(p, &rec) {
                    seen.insert(rec.meta.id.clone());
                }
                stored.insert(rec.meta.id);
            }
        }
        // An entry whose asset is gone since (purged) stays a record for the tenant's admins.
        let admin = p.is_admin();
        let keep = |id: &AssetId| seen.contains(id) || (admin && !stored.contains(id));
        r.flagged.retain(|f| keep(&f.id));
        r.counts.flagged = r.flagged.len() as u64;
        // A rebuilt record still stored answers to the rule; one the deletion purged held
        // nothing but deleted parents, and stays listed to the deleter.
        r.assets.retain(|a| {
            let id = a.regenerated_as.as_ref().unwrap_or(&a.id);
            !crossing(&a.via) || seen.contains(id) || !stored.contains(id)
        });
        Ok(r)
    }
}

/// Domains delete through this (a skill version, a document).
impl Deleter for Deletions {
    fn delete(
        &self,
        actor: &str,
        reason: &str,
        roots: &[AssetId],
        level: DeletionLevel,
    ) -> CoreResult<Receipt> {
        // The roots' own tenant files the deletion.
        self.delete_as(None, actor, reason, roots, level)
    }
}
