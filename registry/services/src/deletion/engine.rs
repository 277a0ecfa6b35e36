//! The deletion engine (DESIGN §3): walks the derivation graph from the roots and moves every
//! reached asset through revoked, de-indexed and purged, recording each stage in the receipt
//! before the next begins. The receipts, levels and the traits domains implement
//! ([`Deleter`](registry_core::deletion::Deleter), [`Regenerator`]) are the core's vocabulary; this is the behaviour.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use chrono::Utc;
use registry_core::asset::{AssetId, AssetKind, AssetRecord, AssetStatus};
use registry_core::audit::{AuditAction, AuditDraft};
use registry_core::deletion::{
    DeletionLevel, Flagged, ReachedAsset, Receipt, ReceiptCounts, ReceiptStatus, ReceiptStore,
    Regenerator, StoreReach,
};
use registry_core::derivation::{ChildStore, Relation};
use registry_core::error::{CoreError, CoreResult};
use registry_core::retrieval::{TextIndex, VectorIndex};
use registry_core::store::{AssetQuery, AssetStore, BlobStore, WriteOp};

/// The reason a deletion gives is the caller's text: receipts keep it, audit events only its
/// hash (they outlive every erasure).
fn audit_reason(r: &Receipt) -> String {
    format!(
        "reason sha256:{}",
        &registry_core::hash::sha256_hex(&r.reason)[..16]
    )
}

/// Runs `f` and adds its wall time to `stage` in `r`.
fn timed<T>(
    r: &mut BTreeMap<String, u64>,
    stage: &str,
    f: impl FnOnce() -> CoreResult<T>,
) -> CoreResult<T> {
    let t = std::time::Instant::now();
    let out = f();
    *r.entry(stage.to_string()).or_default() += t.elapsed().as_millis() as u64;
    out
}

/// Blob keys an asset holds (skill archives, large bodies): by convention the string or
/// string array at `body.blob_digests`, and the archive's blob: `body.archive_blob` (a key
/// private to the asset's tenant), else `body.archive_sha256` (stores older than those keys).
fn blob_digests(rec: &AssetRecord) -> Vec<String> {
    let mut out = vec![];
    if let Some(s) = rec
        .body
        .get("archive_blob")
        .or_else(|| rec.body.get("archive_sha256"))
        .and_then(|v| v.as_str())
    {
        out.push(s.to_string());
    }
    if let Some(a) = rec.body.get("blob_digests").and_then(|v| v.as_array()) {
        out.extend(a.iter().filter_map(|v| v.as_str().map(String::from)));
    }
    out
}

pub struct DeletionEngine<'a> {
    pub store: &'a dyn AssetStore,
    pub receipts: &'a dyn ReceiptStore,
    pub text: &'a dyn TextIndex,
    pub vectors: &'a dyn VectorIndex,
    pub blobs: &'a dyn BlobStore,
    pub regenerator: Option<&'a dyn Regenerator>,
}

impl DeletionEngine<'_> {
    /// Plans the deletion, revokes every reached asset at once (one atomic commit), records
    /// the receipt, and carries on to `target`.
    pub fn delete(
        &self,
        tenant: Option<&str>,
        actor: &str,
        reason: &str,
        roots: &[AssetId],
        target: DeletionLevel,
    ) -> CoreResult<Receipt> {
        if roots.is_empty() {
            return Err(CoreError::validation("nothing to delete"));
        }
        let now = Utc::now();
        let mut stage_ms = BTreeMap::new();
        let (assets, flagged) = timed(&mut stage_ms, "plan", || self.plan(roots))?;
        let mut receipt = Receipt {
            id: format!("rcpt_{}", uuid::Uuid::now_v7().simple()),
            tenant: tenant.map(String::from),
            actor: actor.into(),
            reason: reason.into(),
            roots: roots.to_vec(),
            target,
            status: ReceiptStatus::InProgress,
            level_reached: DeletionLevel::Revoked,
            counts: ReceiptCounts {
                assets: assets.len() as u64,
                versions: assets.iter().map(|a| a.versions).sum(),
                flagged: flagged.len() as u64,
                ..Default::default()
            },
            assets,
            flagged,
            started_at: now,
            updated_at: now,
            finished_at: None,
            stage_ms,
            reowned: vec![],
            nodes: vec![],
        };
        let mut stage_ms = std::mem::take(&mut receipt.stage_ms);
        timed(&mut stage_ms, "revoke", || self.revoke(&mut receipt))?;
        receipt.stage_ms = stage_ms;
        self.receipts.put_receipt(&receipt)?;
        self.advance(receipt)
    }

    /// Walks the graph from the roots. Children in the asset store are followed; a child
    /// with parents outside the set is marked for regeneration; `Cites` children are flagged.
    fn plan(&self, roots: &[AssetId]) -> CoreResult<(Vec<ReachedAsset>, Vec<Flagged>)> {
        let mut seen: BTreeMap<AssetId, String> = BTreeMap::new();
        let mut queue: VecDeque<AssetId> = VecDeque::new();
        let mut flagged = vec![];
        for r in roots {
            if seen.insert(r.clone(), "root".into()).is_none() {
                queue.push_back(r.clone());
            }
        }
        // Blobs an asset produced (a task's artifacts) are reached with it.
        let mut produced: BTreeMap<AssetId, BTreeSet<String>> = BTreeMap::new();
        while let Some(id) = queue.pop_front() {
            for e in self.store.edges_from(&id)? {
                if e.child_store == ChildStore::Blobs {
                    produced.entry(id.clone()).or_default().insert(e.child);
                    continue;
                }
                if e.child_store != ChildStore::Assets || seen.contains_key(&e.child) {
                    continue;
                }
                if e.relation == Relation::Cites {
                    flagged.push(Flagged {
                        id: e.child.clone(),
                        cites: id.clone(),
                        relation: e.relation.as_str().into(),
                    });
                    continue;
                }
                seen.insert(e.child.clone(), e.relation.as_str().to_string());
                queue.push_back(e.child);
            }
        }
        let mut out = vec![];
        for (id, via) in seen {
            let history = self.store.history(&id)?;
            let Some(head) = history.last() else {
                // Already purged (a rerun) or never existed: nothing to reach.
                continue;
            };
            let mut blobs = produced.remove(&id).unwrap_or_default();
            for v in &history {
                blobs.extend(blob_digests(v));
            }
            out.push(ReachedAsset {
                kind: head.meta.kind,
                via,
                content_hashes: history
                    .iter()
                    .map(|r| r.meta.content_hash.clone())
                    .collect(),
                versions: history.len() as u64,
                stores: vec![],
                regenerated_as: None,
                regenerated_version: None,
                blobs: blobs.into_iter().collect(),
                id,
            });
        }
        Ok((out, flagged))
    }

    fn revoke(&self, r: &mut Receipt) -> CoreResult<()> {
        let mut ops = vec![];
        for a in &r.assets {
            if let Some(head) = self.store.get(&a.id)?
                && head.meta.status != AssetStatus::Revoked
            {
                ops.push(WriteOp::SetStatus {
                    id: a.id.clone(),
                    version: None,
                    status: AssetStatus::Revoked,
                    expect: None,
                });
            }
        }
        ops.push(WriteOp::Audit(AuditDraft {
            actor: r.actor.clone(),
            tenant: r.tenant.clone(),
            action: AuditAction::DeletionRevoke.into(),
            asset_id: Some(r.id.clone()),
            before_hash: None,
            after_hash: None,
            reason: Some(format!("{} ({} assets)", audit_reason(r), r.assets.len())),
        }));
        self.store.commit(ops)?;
        for a in &mut r.assets {
            a.stores = vec![StoreReach {
                store: ChildStore::Assets.as_str().into(),
                level: DeletionLevel::Revoked,
                count: a.versions,
                method: None,
            }];
        }
        r.level_reached = DeletionLevel::Revoked;
        Ok(())
    }

    /// Continues a receipt from its last finished stage up to its target. Idempotent.
    pub fn advance(&self, mut r: Receipt) -> CoreResult<Receipt> {
        let mut ms = std::mem::take(&mut r.stage_ms);
        let out = self.advance_timed(&mut r, &mut ms);
        r.stage_ms = ms;
        out?;
        r.status = ReceiptStatus::Completed;
        r.finished_at = Some(Utc::now());
        self.save(&mut r)?;
        // The change feed's `receipt.completed` (ids only, as every audit event).
        self.store.commit(vec![WriteOp::Audit(AuditDraft {
            actor: r.actor.clone(),
            tenant: r.tenant.clone(),
            action: AuditAction::DeletionComplete.into(),
            asset_id: Some(r.id.clone()),
            before_hash: None,
            after_hash: None,
            reason: None,
        })])?;
        Ok(r)
    }

    fn advance_timed(&self, r: &mut Receipt, ms: &mut BTreeMap<String, u64>) -> CoreResult<()> {
        if r.target >= DeletionLevel::Deindexed && r.level_reached < DeletionLevel::Deindexed {
            let ids: Vec<AssetId> = r.assets.iter().map(|a| a.id.clone()).collect();
            timed(ms, "deindex", || {
                self.text.delete(&ids)?;
                self.vectors.delete(&ids)
            })?;
            for a in &mut r.assets {
                for store in [ChildStore::TextIndex, ChildStore::VectorIndex] {
                    a.stores.push(StoreReach {
                        store: store.as_str().into(),
                        level: DeletionLevel::Deindexed,
                        count: 1,
                        method: None,
                    });
                }
            }
            r.counts.text_entries = ids.len() as u64;
            r.counts.vectors = ids.len() as u64;
            r.level_reached = DeletionLevel::Deindexed;
            r.stage_ms = ms.clone();
            self.save(r)?;
        }
        if r.target >= DeletionLevel::Purged && r.level_reached < DeletionLevel::Purged {
            timed(ms, "regenerate", || self.regenerate(r))?;
            r.stage_ms = ms.clone();
            self.save(r)?;
            // A summary regenerated as a new version of itself stays; only its earlier
            // versions go. Everything else reached goes whole.
            let ids: Vec<AssetId> = r
                .assets
                .iter()
                .filter(|a| a.regenerated_version.is_none())
                .map(|a| a.id.clone())
                .collect();
            timed(ms, "purge_store", || {
                self.store.purge(
                    &ids,
                    AuditDraft {
                        actor: r.actor.clone(),
                        tenant: r.tenant.clone(),
                        action: AuditAction::DeletionPurge.into(),
                        asset_id: Some(r.id.clone()),
                        before_hash: None,
                        after_hash: None,
                        reason: Some(audit_reason(r)),
                    },
                )?;
                for a in &r.assets {
                    if let Some(v) = a.regenerated_version {
                        self.store.purge_versions_before(
                            &a.id,
                            v,
                            AuditDraft {
                                actor: r.actor.clone(),
                                tenant: r.tenant.clone(),
                                action: AuditAction::DeletionPurgeVersions.into(),
                                asset_id: Some(a.id.clone()),
                                before_hash: None,
                                after_hash: None,
                                reason: Some(format!("{}: versions before {v}", r.id)),
                            },
                        )?;
                    }
                }
                Ok(())
            })?;
            timed(ms, "compact_text", || self.text.compact())?;
            timed(ms, "compact_vectors", || self.vectors.compact())?;
            let mut blob_count = 0;
            let t = std::time::Instant::now();
            for a in &mut r.assets {
                let mut kept = vec![];
                for d in &a.blobs {
                    // Blobs are content-addressed and may be shared by an asset that stays
                    // (identical archives, another tenant's): only an unreferenced one goes.
                    if self.blob_still_referenced(a.kind, d)? {
                        kept.push(d.clone());
                        continue;
                    }
                    self.blobs.delete(d)?;
                    blob_count += 1;
                }
                a.blobs.retain(|d| !kept.contains(d));
                for s in &mut a.stores {
                    s.level = DeletionLevel::Purged;
                    if s.store == ChildStore::Assets.as_str() {
                        s.method = self.store.purge_method().map(String::from);
                    } else if s.store == ChildStore::VectorIndex.as_str() {
                        s.method = self.vectors.purge_method().map(String::from);
                    }
                }
                if !a.blobs.is_empty() {
                    a.stores.push(StoreReach {
                        store: ChildStore::Blobs.as_str().into(),
                        level: DeletionLevel::Purged,
                        count: a.blobs.len() as u64,
                        method: None,
                    });
                }
            }
            *ms.entry("blobs".into()).or_default() += t.elapsed().as_millis() as u64;
            r.counts.blobs = blob_count;
            // Prove it: no version of any reached asset is left in the store, but the
            // regenerated version of a summary rebuilt in place.
            timed(ms, "verify", || self.verify_purged(&r.assets))?;
            r.level_reached = DeletionLevel::Purged;
        }
        Ok(())
    }

    /// Fails unless every reached asset is gone from the store (a regenerated one: every
    /// version before its regenerated one).
    fn verify_purged(&self, assets: &[ReachedAsset]) -> CoreResult<()> {
        let whole: Vec<AssetId> = assets
            .iter()
            .filter(|a| a.regenerated_version.is_none())
            .map(|a| a.id.clone())
            .collect();
        for ids in whole.chunks(500) {
            let left = self.store.find(&AssetQuery {
                ids: Some(ids.to_vec()),
                limit: Some(1),
                ..Default::default()
            })?;
            if let Some(x) = left.first() {
                return Err(CoreError::backend(
                    "deletion",
                    format!("{} survived the purge", x.meta.id),
                ));
            }
        }
        for a in assets {
            let Some(v) = a.regenerated_version else {
                continue;
            };
            if let Some(x) = self.store.history(&a.id)?.first()
                && x.meta.version < v
            {
                return Err(CoreError::backend(
                    "deletion",
                    format!("{} version {} survived the purge", a.id, x.meta.version),
                ));
            }
        }
        Ok(())
    }

    /// Whether any stored asset of `kind` (the purged ones are gone already) holds blob `d`,
    /// or another asset still produced it (a task's artifact: its edge to the blob).
    fn blob_still_referenced(&self, kind: AssetKind, d: &str) -> CoreResult<bool> {
        if !self.store.edges_to(d)?.is_empty() {
            return Ok(true);
        }
        if kind == AssetKind::Task {
            return Ok(false);
        }
        let all = self.store.find(&AssetQuery {
            kind: Some(kind),
            ..Default::default()
        })?;
        Ok(all.iter().any(|r| blob_digests(r).iter().any(|x| x == d)))
    }

    fn save(&self, r: &mut Receipt) -> CoreResult<()> {
        r.updated_at = Utc::now();
        self.receipts.put_receipt(r)
    }

    /// Summaries with parents outside the deletion are rebuilt from the parents that remain.
    fn regenerate(&self, r: &mut Receipt) -> CoreResult<()> {
        let deleting: BTreeSet<AssetId> = r.assets.iter().map(|a| a.id.clone()).collect();
        for a in &mut r.assets {
            if a.regenerated_as.is_some() {
                continue;
            }
            let Some(relation) = Relation::parse(&a.via)
                .filter(|rel| matches!(rel, Relation::SummaryOf | Relation::ConsolidatedFrom))
            else {
                continue;
            };
            let parents: Vec<AssetId> = self
                .store
                .edges_to(&a.id)?
                .into_iter()
                .filter(|e| e.relation == relation && e.child_store == ChildStore::Assets)
                .map(|e| e.parent)
                .filter(|p| !deleting.contains(p))
                .collect();
            if parents.is_empty() {
                continue;
            }
            let (Some(regen), Some(child)) = (self.regenerator, self.store.history(&a.id)?.pop())
            else {
                continue;
            };
            let mut remaining = vec![];
            for p in parents {
                if let Some(rec) = self.store.get(&p)?
                    && feeds_regeneration(relation, &child, &rec)
                {
                    remaining.push(rec);
                }
            }
            if remaining.is_empty() {
                continue;
            }
            let Some(new_id) = regen.regenerate(&child, &remaining)? else {
                continue;
            };
            if new_id == a.id {
                // Rebuilt in place: the new head must be a live version, never the revoked
                // one that still holds the deleted parents' content.
                let head = self.store.get(&a.id)?;
                match head {
                    Some(h) if h.meta.status != AssetStatus::Revoked => {
                        a.regenerated_version = Some(h.meta.version);
                    }
                    _ => {
                        return Err(CoreError::backend(
                            "deletion",
                            format!("{} was regenerated without a new version", a.id),
                        ));
                    }
                }
            }
            a.regenerated_as = Some(new_id);
            r.counts.regenerated += 1;
        }
        Ok(())
    }
}

/// Whether a remaining parent feeds the regenerated child. Raw memory entries stay
/// `superseded` once consolidated, yet they are the live members of the consolidated record;
/// every other derived asset is rebuilt from servable parents only.
fn feeds_regeneration(relation: Relation, child: &AssetRecord, parent: &AssetRecord) -> bool {
    let status = parent.meta.status;
    status.is_servable()
        || (relation == Relation::ConsolidatedFrom
            && child.meta.kind == AssetKind::Memory
            && parent.meta.kind == AssetKind::Memory
            && status == AssetStatus::Superseded)
}
