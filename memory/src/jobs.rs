//! Consolidation and decay. Both are idempotent and safe to rerun after being killed midway:
//! each step is one atomic commit whose status moves carry `expect`, ids of consolidated
//! records are derived from their members (a rerun rebuilds the same id), and index writes
//! after a commit are repeated by the next run.

use std::collections::{BTreeSet, HashMap};

use chrono::{DateTime, Utc};
use registry_core::asset::{AssetId, AssetKind, AssetRecord, AssetStatus};
use registry_core::audit::{AuditAction, AuditDraft};
use registry_core::deletion::Regenerator;
use registry_core::derivation::{ChildStore, DerivationEdge, Relation};
use registry_core::hash::sha256_hex;
use registry_core::retrieval::VisibilityFilter;
use registry_core::store::{AssetQuery, WriteOp};
use registry_core::{CoreError, Trust};
use serde::Serialize;

use crate::record::{Layer, MemoryBody, MemoryClass, MemoryStats, normalise};
use crate::service::{MemoryService, REVIEW_RETIRE, SERVABLE, same_audience};
use crate::{Error, Result};

/// Raw entries at or above this cosine, in the same scope and class, are consolidated.
pub const CONSOLIDATE_COSINE: f32 = 0.90;
/// Episodic weight halves after this many days without use or verification.
pub const EPISODIC_HALF_LIFE_DAYS: f32 = 30.0;
/// Below this weight a memory goes to the review queue.
pub const DECAY_FLOOR: f32 = 0.1;
/// Distinct harmful votes (more than helpful ones) that propose a procedure's retirement.
pub const PROCEDURE_RETIRE_HARMFUL: u64 = 2;

#[derive(Debug, Clone, Default, Serialize)]
pub struct ConsolidateReport {
    pub scanned: u64,
    pub groups: u64,
    pub consolidated_records: u64,
    pub raw_merged: u64,
    pub reindexed: u64,
    /// `conflict_pending` records the rules could settle (see [`MemoryService::resolve_conflicts`]).
    pub conflicts_resolved: u64,
    /// Still waiting for a reviewer.
    pub conflicts_left: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct DecayReport {
    pub scanned: u64,
    pub weights_changed: u64,
    pub expired: u64,
    pub to_review: u64,
    /// Procedures flagged for a reviewer to retire (they stay served until then).
    pub retire_proposed: u64,
    pub deindexed: u64,
}

const SYSTEM: &str = "system:jobs";
/// The actor of regenerations made by the deletion engine.
const DELETION: &str = "system:deletion";

fn draft(r: &AssetRecord, action: AuditAction, reason: String) -> AuditDraft {
    let mut d = AuditDraft::new(SYSTEM, action)
        .asset(&r.meta.id)
        .reason(reason);
    d.tenant = r.meta.scope.tenant.clone();
    d
}

/// A stable id for the consolidation of exactly these members.
fn consolidated_id(members: &BTreeSet<AssetId>) -> AssetId {
    let joined: Vec<&str> = members.iter().map(String::as_str).collect();
    let h = sha256_hex(joined.join(","));
    let bytes = hex::decode(&h[..32]).unwrap_or_else(|_| vec![0; 16]);
    let mut b = [0u8; 16];
    b.copy_from_slice(&bytes[..16]);
    uuid::Builder::from_custom_bytes(b).into_uuid().to_string()
}

fn be(e: impl std::fmt::Display) -> CoreError {
    CoreError::backend("memory", e)
}

/// The consolidated record of `members` (raw entries with their bodies, in id order), as
/// version `version` of asset `id`: the representative's body (highest trust, then the
/// earliest written; among equals the last in id order) with every member's entities and
/// evidence, the highest trust and sensitivity of any member, the earliest valid time.
/// Consolidation and regeneration after a deletion both build the record here, so a record is
/// a function of its members alone. `None` without members.
fn consolidated_record(
    id: AssetId,
    version: u32,
    members: &[(&AssetRecord, &MemoryBody)],
    now: DateTime<Utc>,
) -> Result<Option<AssetRecord>> {
    let Some(&(rep, rep_body)) = members.iter().max_by(|(a, _), (b, _)| {
        a.meta
            .trust
            .cmp(&b.meta.trust)
            .then(b.meta.created_at.cmp(&a.meta.created_at))
    }) else {
        return Ok(None);
    };
    let mut cb = rep_body.clone();
    cb.layer = Layer::Consolidated;
    cb.gate = vec![];
    cb.consolidated_from = members.iter().map(|(m, _)| m.meta.id.clone()).collect();
    let mut ents = BTreeSet::new();
    let mut evid = BTreeSet::new();
    for (_, b) in members {
        ents.extend(b.entities.iter().cloned());
        evid.extend(b.evidence.iter().cloned());
    }
    cb.entities = ents.into_iter().collect();
    cb.evidence = evid.into_iter().collect();
    let mut meta = rep.meta.clone();
    meta.id = id;
    meta.version = version;
    meta.status = AssetStatus::Active;
    meta.trust = members
        .iter()
        .map(|(m, _)| m.meta.trust)
        .max()
        .unwrap_or(Trust::ExternalContent);
    meta.sensitivity = members
        .iter()
        .map(|(m, _)| m.meta.sensitivity)
        .max()
        .unwrap_or(meta.sensitivity);
    meta.valid_from = members.iter().filter_map(|(m, _)| m.meta.valid_from).min();
    meta.created_at = now;
    meta.updated_at = now;
    meta.parents = cb.consolidated_from.clone();
    Ok(Some(AssetRecord {
        meta,
        lookup_key: rep.lookup_key.clone(),
        body: serde_json::to_value(&cb).map_err(be)?,
    }))
}

impl MemoryService {
    fn servable_memories(&self) -> Result<Vec<AssetRecord>> {
        Ok(self.store.find(&AssetQuery {
            kind: Some(AssetKind::Memory),
            statuses: Some(SERVABLE.to_vec()),
            heads_only: true,
            ..Default::default()
        })?)
    }

    /// Merges raw entries written since `since` (the start of the last successful run; `None`:
    /// all) with their duplicates into consolidated records.
    pub fn consolidate(&self, since: Option<DateTime<Utc>>) -> Result<ConsolidateReport> {
        let mut report = ConsolidateReport::default();
        let all = self.servable_memories()?;
        // Consolidated records of a run that died before indexing them are indexed again.
        let recent_consolidated: Vec<AssetRecord> = all
            .iter()
            .filter(|r| since.is_none_or(|s| r.meta.created_at >= s))
            .filter(|r| MemoryBody::from_record(r).is_some_and(|b| b.layer == Layer::Consolidated))
            .cloned()
            .collect();
        report.reindexed = self.reindex(&recent_consolidated)? as u64;
        let bodies: HashMap<AssetId, MemoryBody> = all
            .iter()
            .filter_map(|r| MemoryBody::from_record(r).map(|b| (r.meta.id.clone(), b)))
            .collect();
        let by_id: HashMap<&str, &AssetRecord> =
            all.iter().map(|r| (r.meta.id.as_str(), r)).collect();
        let mut done: BTreeSet<AssetId> = BTreeSet::new();
        for rec in &all {
            let Some(body) = bodies.get(&rec.meta.id) else {
                continue;
            };
            if body.layer != Layer::Raw
                || body.class == MemoryClass::Working
                || done.contains(&rec.meta.id)
                || since.is_some_and(|s| rec.meta.created_at < s)
            {
                continue;
            }
            report.scanned += 1;
            let key = rec.meta.scope.key();
            let value_key = |b: &MemoryBody| {
                b.subject.as_ref().map(|s| {
                    (
                        normalise(s),
                        normalise(b.attribute.as_deref().unwrap_or("")),
                        normalise(b.value.as_deref().unwrap_or("")),
                    )
                })
            };
            let mut matches: BTreeSet<AssetId> = BTreeSet::new();
            for other in &all {
                if other.meta.id == rec.meta.id
                    || done.contains(&other.meta.id)
                    || other.meta.scope.key() != key
                    || !same_audience(&rec.meta, &other.meta)
                {
                    continue;
                }
                let Some(ob) = bodies.get(&other.meta.id) else {
                    continue;
                };
                if ob.class != body.class {
                    continue;
                }
                let same_fact = value_key(body).is_some() && value_key(body) == value_key(ob);
                if other.meta.content_hash == rec.meta.content_hash || same_fact {
                    matches.insert(other.meta.id.clone());
                }
            }
            let v = self.search.embed_one(&body.embed_text())?;
            let filter = VisibilityFilter {
                scope_keys: vec![key.clone()],
                acl_keys: rec.meta.acl.keys(),
                kinds: vec![AssetKind::Memory],
                any_tags: vec![body.class.tag()],
                ..Default::default()
            };
            for h in self.search.vectors.search(&v, &filter, 10)? {
                if h.score >= CONSOLIDATE_COSINE
                    && h.asset_id != rec.meta.id
                    && !done.contains(&h.asset_id)
                    && by_id
                        .get(h.asset_id.as_str())
                        .is_some_and(|o| same_audience(&rec.meta, &o.meta))
                {
                    matches.insert(h.asset_id);
                }
            }
            if matches.is_empty() {
                continue;
            }
            let existing = matches
                .iter()
                .find(|id| {
                    bodies
                        .get(*id)
                        .is_some_and(|b| b.layer == Layer::Consolidated)
                })
                .cloned();
            let raw: BTreeSet<AssetId> = matches
                .iter()
                .filter(|id| bodies.get(*id).is_some_and(|b| b.layer == Layer::Raw))
                .cloned()
                .chain([rec.meta.id.clone()])
                .collect();
            report.groups += 1;
            let (target_id, mut ops, new_rec) = match existing {
                Some(c) => (c, vec![], None),
                None => {
                    let members: Vec<(&AssetRecord, &MemoryBody)> = raw
                        .iter()
                        .filter_map(|id| Some((*by_id.get(id.as_str())?, bodies.get(id)?)))
                        .collect();
                    let Some(new) =
                        consolidated_record(consolidated_id(&raw), 1, &members, Utc::now())?
                    else {
                        continue;
                    };
                    let ops = vec![WriteOp::PutVersion(Box::new(new.clone()))];
                    (new.meta.id.clone(), ops, Some(new))
                }
            };
            for id in &raw {
                let Some(m) = by_id.get(id.as_str()) else {
                    continue;
                };
                ops.push(WriteOp::AddEdge(DerivationEdge {
                    parent: id.clone(),
                    child: target_id.clone(),
                    relation: Relation::ConsolidatedFrom,
                    child_store: ChildStore::Assets,
                }));
                ops.push(WriteOp::SetStatus {
                    id: id.clone(),
                    version: None,
                    status: AssetStatus::Superseded,
                    expect: Some(m.meta.status),
                });
                ops.push(WriteOp::Audit(draft(
                    m,
                    AuditAction::MemoryConsolidate,
                    format!("into {target_id}"),
                )));
            }
            match self.store.commit(ops) {
                Ok(_) => {}
                // Another run got there first (same derived id, or members moved meanwhile).
                Err(CoreError::Conflict(_)) => continue,
                Err(e) => return Err(e.into()),
            }
            if let Some(new) = &new_rec {
                report.consolidated_records += 1;
                let b = MemoryBody::from_record(new).ok_or_else(|| be("bad body"))?;
                self.index_with_vector(new, &b, v)?;
            }
            report.raw_merged += raw.len() as u64;
            let ids: Vec<AssetId> = raw.iter().cloned().collect();
            self.search.remove(&ids)?;
            done.extend(raw);
            done.insert(target_id);
        }
        let (resolved, left) = self.resolve_conflicts()?;
        report.conflicts_resolved = resolved;
        report.conflicts_left = left;
        Ok(report)
    }

    /// Settles `conflict_pending` records where the conflict rules decide without a person:
    /// - the record it conflicted with is no longer active (revoked, superseded, expired or
    ///   gone) and no other active record holds the same subject and attribute in that scope:
    ///   the pending record becomes active;
    /// - the active record now has the same value: the pending one is superseded by it (a
    ///   duplicate, not a conflict).
    ///
    /// Everything else stays for a reviewer. Each change is one atomic commit guarded by the
    /// expected status, so a rerun (or a run killed midway) never applies one twice.
    pub fn resolve_conflicts(&self) -> Result<(u64, u64)> {
        let now = Utc::now();
        let pending = self.store.find(&AssetQuery {
            kind: Some(AssetKind::Memory),
            statuses: Some(vec![AssetStatus::ConflictPending]),
            heads_only: true,
            ..Default::default()
        })?;
        let (mut resolved, mut left) = (0, 0);
        for rec in pending {
            let Some(body) = MemoryBody::from_record(&rec) else {
                left += 1;
                continue;
            };
            let live =
                |r: &AssetRecord| SERVABLE.contains(&r.meta.status) && !r.meta.is_expired_at(now);
            let other = match &body.conflicts_with {
                Some(id) => self.store.get(id)?,
                None => None,
            };
            let active_same_key: Vec<AssetRecord> = match &rec.lookup_key {
                Some(k) => self
                    .store
                    .find(&AssetQuery {
                        kind: Some(AssetKind::Memory),
                        tenant: rec.meta.scope.tenant.clone(),
                        scope_keys: Some(vec![rec.meta.scope.key()]),
                        statuses: Some(SERVABLE.to_vec()),
                        lookup_key: Some(k.clone()),
                        heads_only: true,
                        ..Default::default()
                    })?
                    .into_iter()
                    .filter(|r| r.meta.id != rec.meta.id && live(r))
                    .collect(),
                None => vec![],
            };
            let value = |b: &MemoryBody| b.value.as_deref().map(normalise);
            let agreeing = active_same_key
                .iter()
                .find(|r| MemoryBody::from_record(r).is_some_and(|b| value(&b) == value(&body)));
            let (status, reason) = if let Some(a) = agreeing {
                (
                    AssetStatus::Superseded,
                    format!("the active record {} now holds the same value", a.meta.id),
                )
            } else if active_same_key.is_empty() && other.as_ref().is_none_or(|o| !live(o)) {
                (
                    AssetStatus::Active,
                    "the record it conflicted with is no longer active".to_string(),
                )
            } else {
                left += 1;
                continue;
            };
            let res = self.store.commit(vec![
                WriteOp::SetStatus {
                    id: rec.meta.id.clone(),
                    version: None,
                    status,
                    expect: Some(AssetStatus::ConflictPending),
                },
                WriteOp::Audit(
                    draft(&rec, AuditAction::MemoryConflictResolved, reason)
                        .hashes(None, Some(rec.meta.content_hash.clone())),
                ),
            ]);
            match res {
                Ok(_) => {}
                // Someone (a reviewer, another run) settled it first.
                Err(CoreError::Conflict(_)) => continue,
                Err(e) => return Err(e.into()),
            }
            if status == AssetStatus::Active {
                let mut now_active = rec.clone();
                now_active.meta.status = AssetStatus::Active;
                let v = self.search.embed_one(&body.embed_text())?;
                self.index_with_vector(&now_active, &body, v)?;
            }
            resolved += 1;
        }
        Ok((resolved, left))
    }

    /// Lowers weights by the per-class policy at time `now`; expires working memory past its
    /// TTL; sends episodic memory below the floor, and procedures with harmful feedback, to
    /// review. The weight is a pure function of the counters and `now`, so reruns agree.
    pub fn decay(&self, now: DateTime<Utc>) -> Result<DecayReport> {
        let mut report = DecayReport::default();
        let all = self.servable_memories()?;
        let mut stats: HashMap<AssetId, MemoryStats> = HashMap::new();
        for chunk in all.chunks(500) {
            let ids: Vec<AssetId> = chunk.iter().map(|r| r.meta.id.clone()).collect();
            stats.extend(self.stats.stats(&ids)?);
        }
        let mut weights = vec![];
        for rec in &all {
            report.scanned += 1;
            let Some(body) = MemoryBody::from_record(rec) else {
                continue;
            };
            let st = stats.get(&rec.meta.id).cloned().unwrap_or_default();
            let harm = (st.helpful as f32 + 1.0) / ((st.helpful + st.harmful) as f32 + 1.0);
            let (weight, moved) = match body.class {
                MemoryClass::Working => {
                    let expired = rec.meta.is_expired_at(now);
                    (
                        st.decay_weight,
                        expired.then_some((
                            AssetStatus::Expired,
                            AuditAction::MemoryExpire,
                            "ttl elapsed",
                        )),
                    )
                }
                MemoryClass::Semantic => (1.0, None),
                MemoryClass::Episodic => {
                    let last = [
                        st.last_retrieved,
                        st.last_verified,
                        Some(rec.meta.created_at),
                    ]
                    .into_iter()
                    .flatten()
                    .max()
                    .unwrap_or(rec.meta.created_at);
                    let days = ((now - last).num_seconds().max(0) as f32) / 86400.0;
                    let w = (0.5f32.powf(days / EPISODIC_HALF_LIFE_DAYS) * harm).clamp(0.0, 1.0);
                    let low = w < DECAY_FLOOR && rec.meta.status == AssetStatus::Active;
                    (
                        w,
                        low.then_some((
                            AssetStatus::Candidate,
                            AuditAction::MemoryDecayReview,
                            "weight below floor",
                        )),
                    )
                }
                MemoryClass::Procedural => {
                    // Votes propose a retirement; a reviewer decides it. The procedure stays
                    // served meanwhile, so voters alone can never take it away.
                    let retire = st.harmful >= PROCEDURE_RETIRE_HARMFUL
                        && st.harmful > st.helpful
                        && st.review.is_none();
                    if retire {
                        self.stats.set_review(&rec.meta.id, Some(REVIEW_RETIRE))?;
                        let d = draft(
                            rec,
                            AuditAction::MemoryRetireProposed,
                            format!("{} harmful, {} helpful votes", st.harmful, st.helpful),
                        );
                        self.store.commit(vec![WriteOp::Audit(d)])?;
                        report.retire_proposed += 1;
                    }
                    (harm.clamp(0.0, 1.0), None)
                }
            };
            if (weight - st.decay_weight).abs() > 1e-4 {
                weights.push((rec.meta.id.clone(), weight));
            }
            if let Some((status, action, why)) = moved {
                let res = self.store.commit(vec![
                    WriteOp::SetStatus {
                        id: rec.meta.id.clone(),
                        version: None,
                        status,
                        expect: Some(rec.meta.status),
                    },
                    WriteOp::Audit(draft(rec, action, why.to_string())),
                ]);
                match res {
                    Ok(_) => {}
                    Err(CoreError::Conflict(_)) => continue,
                    Err(e) => return Err(e.into()),
                }
                match status {
                    AssetStatus::Expired => report.expired += 1,
                    _ => report.to_review += 1,
                }
                self.search.remove(std::slice::from_ref(&rec.meta.id))?;
                report.deindexed += 1;
            }
        }
        for chunk in weights.chunks(500) {
            self.stats.set_weights(chunk)?;
        }
        report.weights_changed = weights.len() as u64;
        Ok(report)
    }
}

impl MemoryService {
    /// Rebuilds the consolidated memory `child` from the raw entries that remain after a
    /// deletion took some of its members: its next version, built as consolidation builds it
    /// (so nothing of a deleted member's body is in it), with `ConsolidatedFrom` edges from the
    /// remaining members, committed with an audit event (hashes only) and re-indexed in both
    /// legs. The deletion engine purges the earlier versions and the deleted members' edges.
    /// `None` (the engine then deletes the child) when `child` is not a consolidated memory or
    /// no raw member remains.
    pub fn regenerate_consolidated(
        &self,
        child: &AssetRecord,
        remaining: &[AssetRecord],
    ) -> Result<Option<AssetId>> {
        if child.meta.kind != AssetKind::Memory
            || !MemoryBody::from_record(child).is_some_and(|b| b.layer == Layer::Consolidated)
        {
            return Ok(None);
        }
        let mut members: Vec<(&AssetRecord, MemoryBody)> = remaining
            .iter()
            .filter(|r| r.meta.kind == AssetKind::Memory)
            .filter_map(|r| {
                MemoryBody::from_record(r)
                    .filter(|b| b.layer == Layer::Raw)
                    .map(|b| (r, b))
            })
            .collect();
        members.sort_by(|a, b| a.0.meta.id.cmp(&b.0.meta.id));
        members.dedup_by(|a, b| a.0.meta.id == b.0.meta.id);
        let members: Vec<(&AssetRecord, &MemoryBody)> =
            members.iter().map(|(r, b)| (*r, b)).collect();
        let version = child.meta.version + 1;
        let Some(mut new) =
            consolidated_record(child.meta.id.clone(), version, &members, Utc::now())?
        else {
            return Ok(None);
        };
        if self.superseded_by_another(child)? {
            new.meta.status = AssetStatus::Superseded;
        }
        // A rerun after a crash between this commit and the receipt finds its own version as
        // the head: nothing more to write.
        let written = child.meta.status != AssetStatus::Revoked
            && child.body == new.body
            && child.meta.content_hash == new.meta.content_hash;
        let head = if written {
            child.clone()
        } else {
            let mut ops = vec![WriteOp::PutVersion(Box::new(new.clone()))];
            for (m, _) in &members {
                ops.push(WriteOp::AddEdge(DerivationEdge {
                    parent: m.meta.id.clone(),
                    child: child.meta.id.clone(),
                    relation: Relation::ConsolidatedFrom,
                    child_store: ChildStore::Assets,
                }));
            }
            let mut d = AuditDraft::new(DELETION, AuditAction::MemoryRegenerate)
                .asset(&child.meta.id)
                .hashes(
                    Some(child.meta.content_hash.clone()),
                    Some(new.meta.content_hash.clone()),
                )
                .reason(format!(
                    "version {version} rebuilt from {} remaining members",
                    members.len()
                ));
            d.tenant = child.meta.scope.tenant.clone();
            ops.push(WriteOp::Audit(d));
            self.store.commit(ops)?;
            new
        };
        self.reindex(std::slice::from_ref(&head))?;
        Ok(Some(child.meta.id.clone()))
    }

    /// Whether a live record on the same subject and attribute replaced `child` (it then comes
    /// back superseded, not active).
    fn superseded_by_another(&self, child: &AssetRecord) -> Result<bool> {
        let Some(lk) = &child.lookup_key else {
            return Ok(false);
        };
        Ok(self
            .store
            .find(&AssetQuery {
                kind: Some(AssetKind::Memory),
                tenant: child.meta.scope.tenant.clone(),
                lookup_key: Some(lk.clone()),
                heads_only: true,
                ..Default::default()
            })?
            .iter()
            .any(|r| {
                r.meta.id != child.meta.id
                    && r.meta.status != AssetStatus::Revoked
                    && MemoryBody::from_record(r)
                        .is_some_and(|b| b.supersedes.as_deref() == Some(child.meta.id.as_str()))
            }))
    }
}

impl Regenerator for MemoryService {
    fn regenerate(
        &self,
        child: &AssetRecord,
        remaining: &[AssetRecord],
    ) -> registry_core::CoreResult<Option<AssetId>> {
        self.regenerate_consolidated(child, remaining)
            .map_err(|e| match e {
                Error::Core(c) => c,
                other => be(other),
            })
    }
}
