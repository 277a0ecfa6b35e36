//! The memory service: writes through the gate, reads, feedback, review and revocation.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Duration, Utc};
use registry_core::asset::{AssetId, AssetKind, AssetMeta, AssetRecord, AssetStatus};
use registry_core::audit::AuditDraft;
use registry_core::hash::sha256_hex;
use registry_core::retrieval::{IndexKeys, TextDoc, VectorEntry, VisibilityFilter};
use registry_core::store::{AssetQuery, AssetStore, WriteOp};
use registry_core::{CoreError, CoreResult, Principal, Role, Scope, Trust};
use registry_engine::HybridSearcher;
use serde::{Deserialize, Serialize};

use crate::gate::{self, Decision, NEAR_DUPLICATE_COSINE, Reason, ReasonCode};
use crate::record::{
    Layer, LevelName, MemoryBody, MemoryClass, MemoryStats, MemoryView, ScopeSpec, WriteRequest,
    fact_key, normalise,
};
use crate::{Error, Result};

/// Mutable usage counters beside the immutable versions (usage, feedback, verification, decay
/// weight). They are not content, so they do not make new versions.
pub trait StatsStore: Send + Sync {
    fn stats(&self, ids: &[AssetId]) -> CoreResult<HashMap<AssetId, MemoryStats>>;
    fn record_retrievals(&self, ids: &[AssetId], at: DateTime<Utc>) -> CoreResult<()>;
    fn add_feedback(&self, id: &str, helpful: bool) -> CoreResult<MemoryStats>;
    fn mark_verified(&self, id: &str, at: DateTime<Utc>) -> CoreResult<()>;
    fn set_weights(&self, weights: &[(AssetId, f32)]) -> CoreResult<()>;
}

/// Limits applied before the gate.
#[derive(Debug, Clone)]
pub struct Limits {
    pub max_content_bytes: usize,
    pub default_working_ttl_secs: u64,
    pub max_list_items: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_content_bytes: 16 * 1024,
            default_working_ttl_secs: 24 * 3600,
            max_list_items: 64,
        }
    }
}

/// Gate decisions and the commits they make are serialised within a process, so that two
/// concurrent duplicates cannot both pass rule 5.
static WRITE_LOCK: Mutex<()> = Mutex::new(());

/// The answer to a write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WriteOutcome {
    pub decision: Decision,
    /// The record written, or (merged) the existing record the write was merged into.
    pub id: AssetId,
    pub version: u32,
    pub status: String,
    pub reasons: Vec<Reason>,
    /// The record this write superseded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaced: Option<AssetId>,
    /// The active record this write conflicts with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflicts_with: Option<AssetId>,
}

/// A memory with its version history and the records it relates to.
#[derive(Debug, Clone, Serialize)]
pub struct MemoryDetail {
    pub memory: MemoryView,
    /// Every version of this record, oldest first.
    pub versions: Vec<MemoryView>,
    /// Other records on the same subject and attribute (superseded, pending, active), oldest
    /// first.
    pub related: Vec<MemoryView>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Helpful,
    Harmful,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeedbackRequest {
    pub outcome: Outcome,
    /// The task in which the memory helped or harmed.
    #[serde(default)]
    pub task: Option<String>,
}

pub(crate) const PENDING: [AssetStatus; 3] = [
    AssetStatus::Candidate,
    AssetStatus::Quarantined,
    AssetStatus::ConflictPending,
];
pub(crate) const SERVABLE: [AssetStatus; 2] = [AssetStatus::Active, AssetStatus::Confirmed];

#[derive(Clone)]
pub struct MemoryService {
    pub store: Arc<dyn AssetStore>,
    pub search: HybridSearcher,
    pub stats: Arc<dyn StatsStore>,
    pub limits: Limits,
}

impl std::fmt::Debug for MemoryService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryService").finish_non_exhaustive()
    }
}

/// Trust a record holds against a challenger: a reviewer's confirmation counts as verified.
fn effective_trust(m: &AssetMeta) -> Trust {
    if m.status == AssetStatus::Confirmed {
        m.trust.max(Trust::VerifiedFact)
    } else {
        m.trust
    }
}

pub(crate) fn index_keys(r: &AssetRecord, b: &MemoryBody) -> IndexKeys {
    IndexKeys {
        asset_id: r.meta.id.clone(),
        kind: AssetKind::Memory,
        scope_key: r.meta.scope.key(),
        acl_keys: r.meta.acl.keys(),
        tags: vec![
            b.class.tag(),
            match b.layer {
                Layer::Raw => "layer:raw".into(),
                Layer::Consolidated => "layer:consolidated".into(),
            },
        ],
    }
}

fn request_hash(p: &Principal, req: &WriteRequest) -> String {
    let body = serde_json::to_string(req).unwrap_or_default();
    registry_core::hash::sha256_fields([
        p.user.as_bytes(),
        p.project.as_deref().unwrap_or("").as_bytes(),
        p.session.as_deref().unwrap_or("").as_bytes(),
        p.task.as_deref().unwrap_or("").as_bytes(),
        body.as_bytes(),
    ])
}

fn audit(p: &Principal, action: &str, id: &str) -> AuditDraft {
    AuditDraft::new(&p.user, action).tenant(&p.tenant).asset(id)
}

impl MemoryService {
    pub fn new(
        store: Arc<dyn AssetStore>,
        search: HybridSearcher,
        stats: Arc<dyn StatsStore>,
    ) -> Self {
        MemoryService {
            store,
            search,
            stats,
            limits: Limits::default(),
        }
    }

    /// Resolves where a write lands.
    pub fn resolve_scope(
        &self,
        p: &Principal,
        class: MemoryClass,
        spec: Option<&ScopeSpec>,
    ) -> Result<Scope> {
        let level = match spec {
            Some(ScopeSpec::Explicit(s)) => {
                s.validate()?;
                return Ok(s.clone());
            }
            Some(ScopeSpec::Level(l)) => *l,
            None if class == MemoryClass::Working => {
                if p.session.is_none() && p.task.is_some() {
                    LevelName::Task
                } else {
                    LevelName::Session
                }
            }
            None => LevelName::User,
        };
        let mut s = Scope::tenant(&p.tenant);
        let need = |what: &str, v: &Option<String>| -> Result<String> {
            v.clone().ok_or_else(|| {
                Error::invalid("scope", format!("scope {what} needs the X-{what} header"))
            })
        };
        match level {
            LevelName::Tenant => {}
            LevelName::Project => s.project = Some(need("project", &p.project)?),
            LevelName::User => {
                s.project = p.project.clone();
                s.user = Some(p.user.clone());
            }
            LevelName::Session => {
                s.project = p.project.clone();
                s.user = Some(p.user.clone());
                s.session = Some(need("session", &p.session)?);
            }
            LevelName::Task => {
                s.project = p.project.clone();
                s.user = Some(p.user.clone());
                s.session = p.session.clone();
                s.task = Some(need("task", &p.task)?);
            }
        }
        Ok(s)
    }

    fn validate(&self, req: &WriteRequest) -> Result<()> {
        if req.content.len() > self.limits.max_content_bytes {
            return Err(Error::TooLarge {
                len: req.content.len(),
                limit: self.limits.max_content_bytes,
            });
        }
        if req.content.trim().is_empty() {
            return Err(Error::invalid("content", "content is empty"));
        }
        if req.subject.is_some() != req.attribute.is_some() {
            return Err(Error::invalid(
                "subject",
                "subject and attribute go together",
            ));
        }
        if req.value.is_some() && req.subject.is_none() {
            return Err(Error::invalid(
                "value",
                "a value needs a subject and attribute",
            ));
        }
        for (field, list) in [
            ("entities", &req.entities),
            ("applicability", &req.applicability),
            ("evidence", &req.evidence),
        ] {
            if list.len() > self.limits.max_list_items || list.iter().any(|e| e.len() > 512) {
                return Err(Error::invalid(
                    field,
                    format!("at most {} items of 512 bytes", self.limits.max_list_items),
                ));
            }
        }
        if let (Some(a), Some(b)) = (req.valid_from, req.valid_to)
            && b < a
        {
            return Err(Error::invalid("valid_to", "valid_to is before valid_from"));
        }
        Ok(())
    }

    /// Runs a candidate through the gate and stores what it allows.
    pub fn write(
        &self,
        p: &Principal,
        req: &WriteRequest,
        idempotency_key: Option<&str>,
    ) -> Result<WriteOutcome> {
        self.write_at(p, req, idempotency_key, Utc::now())
    }

    pub fn write_at(
        &self,
        p: &Principal,
        req: &WriteRequest,
        idempotency_key: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<WriteOutcome> {
        self.write_with(p, req, idempotency_key, now, None)
    }

    /// Writes several candidates in order, each through the whole gate (a later one can merge
    /// into an earlier one), with one embedding call for all of them. Each answer stands on its
    /// own: a rejected item does not stop the others. With `idempotency_key`, item `i` uses
    /// `<key>:<i>`.
    pub fn write_batch(
        &self,
        p: &Principal,
        reqs: &[WriteRequest],
        idempotency_key: Option<&str>,
    ) -> Vec<Result<WriteOutcome>> {
        let now = Utc::now();
        // Embed every item that could be stored, in one call; an item the gate refuses or that
        // fails validation simply has its vector unused.
        let valid: Vec<usize> = (0..reqs.len())
            .filter(|&i| self.validate(&reqs[i]).is_ok())
            .collect();
        let texts: Vec<String> = valid.iter().map(|&i| reqs[i].index_text()).collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        // If the batch call fails, each item embeds on its own and reports its own error.
        let mut vectors: Vec<Option<Vec<f32>>> = vec![None; reqs.len()];
        if !refs.is_empty()
            && let Ok(vs) = self.search.embedder.embed(&refs)
            && vs.len() == valid.len()
        {
            for (i, v) in valid.into_iter().zip(vs) {
                vectors[i] = Some(v);
            }
        }
        reqs.iter()
            .zip(vectors)
            .enumerate()
            .map(|(i, (r, pre))| {
                let key = idempotency_key.map(|k| format!("{k}:{i}"));
                self.write_with(p, r, key.as_deref(), now, pre)
            })
            .collect()
    }

    fn write_with(
        &self,
        p: &Principal,
        req: &WriteRequest,
        idempotency_key: Option<&str>,
        now: DateTime<Utc>,
        pre_embedded: Option<Vec<f32>>,
    ) -> Result<WriteOutcome> {
        self.validate(req)?;
        let scope = self.resolve_scope(p, req.class, req.scope.as_ref())?;
        if !p.can_write_into(&scope) {
            return Err(Error::Forbidden {
                message: format!("cannot write into scope {}", scope.key()),
                reasons: vec![Reason::new(
                    ReasonCode::ScopeNotPermitted,
                    format!("cannot write into scope {}", scope.key()),
                )],
            });
        }
        let idem =
            idempotency_key.map(|k| (format!("memory:{}:{k}", p.user), request_hash(p, req)));
        if let Some((key, hash)) = &idem
            && let Some(prev) = self.remembered(&p.tenant, key, hash)?
        {
            return Ok(prev);
        }
        let screen = gate::screen(
            p,
            req.class,
            &scope,
            req.source,
            req.sensitivity,
            &req.content,
        );
        if screen.decision == Decision::Rejected {
            return Err(Error::Rejected(screen.reasons));
        }
        let body = MemoryBody {
            class: req.class,
            content: req.content.clone(),
            layer: Layer::Raw,
            log_day: now.format("%Y-%m-%d").to_string(),
            subject: req.subject.clone(),
            attribute: req.attribute.clone(),
            value: req.value.clone(),
            entities: req.entities.clone(),
            applicability: req.applicability.clone(),
            evidence: req.evidence.clone(),
            speaker: req.speaker.clone(),
            session_date: req.session_date,
            session_label: req.session_label.clone(),
            gate: vec![],
            supersedes: None,
            conflicts_with: None,
            consolidated_from: vec![],
        };
        let mut meta = AssetMeta::new(AssetKind::Memory, scope.clone(), &p.user, req.source);
        meta.created_at = now;
        meta.updated_at = now;
        meta.sensitivity = screen.sensitivity;
        meta.valid_from = req.valid_from;
        meta.valid_to = req.valid_to;
        meta.content_hash = sha256_hex(normalise(&req.content));
        if req.class == MemoryClass::Working {
            let ttl = req.ttl_secs.unwrap_or(self.limits.default_working_ttl_secs);
            meta.expires_at = Some(now + Duration::seconds(ttl.min(365 * 24 * 3600) as i64));
        }
        let lookup_key = match (&req.subject, &req.attribute) {
            (Some(s), Some(a)) => Some(fact_key(s, a)),
            _ => None,
        };
        // Embedding happens outside the lock: it is the slow part and depends only on the text.
        let vector = if screen.decision == Decision::Accepted {
            match pre_embedded {
                Some(v) => Some(v),
                None => Some(self.search.embed_one(&body.index_text())?),
            }
        } else {
            None
        };
        let _guard = WRITE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((key, hash)) = &idem
            && let Some(prev) = self.remembered(&p.tenant, key, hash)?
        {
            return Ok(prev);
        }
        let mut reasons = screen.reasons.clone();
        let mut decision = screen.decision;
        let mut status = if screen.decision == Decision::Candidate {
            if screen.quarantine {
                AssetStatus::Quarantined
            } else {
                AssetStatus::Candidate
            }
        } else {
            AssetStatus::Active
        };
        let mut merged_into: Option<AssetRecord> = None;
        let mut replaced: Option<AssetRecord> = None;
        let mut conflicts_with: Option<AssetId> = None;
        if decision == Decision::Accepted {
            let same_scope = Some(vec![scope.key()]);
            // Rule 5, exact: same normalised content in the same scope and class.
            let dup = self
                .store
                .find(&AssetQuery {
                    kind: Some(AssetKind::Memory),
                    tenant: Some(p.tenant.clone()),
                    scope_keys: same_scope.clone(),
                    statuses: Some(SERVABLE.to_vec()),
                    content_hash: Some(meta.content_hash.clone()),
                    heads_only: true,
                    ..Default::default()
                })?
                .into_iter()
                .find(|r| MemoryBody::from_record(r).is_some_and(|b| b.class == req.class));
            if let Some(d) = dup {
                reasons.push(
                    Reason::new(ReasonCode::DuplicateContent, "same content already stored")
                        .related(&d.meta.id),
                );
                decision = Decision::Merged;
                merged_into = Some(d);
            }
            // Rule 6: same subject and attribute.
            if decision == Decision::Accepted
                && let Some(lk) = &lookup_key
            {
                let existing = self
                    .store
                    .find(&AssetQuery {
                        kind: Some(AssetKind::Memory),
                        tenant: Some(p.tenant.clone()),
                        scope_keys: same_scope.clone(),
                        statuses: Some(SERVABLE.to_vec()),
                        lookup_key: Some(lk.clone()),
                        heads_only: true,
                        ..Default::default()
                    })?
                    .into_iter()
                    .next_back();
                if let Some(old) = existing {
                    let old_body = MemoryBody::from_record(&old);
                    let same_value = old_body
                        .as_ref()
                        .and_then(|b| b.value.as_deref())
                        .map(normalise)
                        == req.value.as_deref().map(normalise);
                    let old_from = old.meta.valid_from;
                    if same_value {
                        reasons.push(
                            Reason::new(ReasonCode::SameFact, "same subject, attribute and value")
                                .related(&old.meta.id),
                        );
                        decision = Decision::Merged;
                        merged_into = Some(old);
                    } else if matches!((req.valid_from, old_from), (Some(n), Some(o)) if n < o) {
                        reasons.push(
                            Reason::new(
                                ReasonCode::OlderThanExisting,
                                "the active record is valid from a later time",
                            )
                            .related(&old.meta.id),
                        );
                        decision = Decision::ConflictPending;
                        status = AssetStatus::ConflictPending;
                        conflicts_with = Some(old.meta.id.clone());
                    } else if meta.trust >= effective_trust(&old.meta) {
                        reasons.push(
                            Reason::new(
                                ReasonCode::SupersedesRecord,
                                "replaces a record of lower or equal trust",
                            )
                            .related(&old.meta.id),
                        );
                        decision = Decision::Superseded;
                        replaced = Some(old);
                    } else {
                        reasons.push(
                            Reason::new(
                                ReasonCode::LowerTrustConflict,
                                "a lower-trust source cannot supersede a higher-trust record",
                            )
                            .related(&old.meta.id),
                        );
                        decision = Decision::ConflictPending;
                        status = AssetStatus::ConflictPending;
                        conflicts_with = Some(old.meta.id.clone());
                    }
                }
            }
            // Rule 5, near: a very similar record in the same scope and class.
            if decision == Decision::Accepted
                && let Some(v) = &vector
            {
                let filter = VisibilityFilter {
                    scope_keys: vec![scope.key()],
                    acl_keys: meta.acl.keys(),
                    kinds: vec![AssetKind::Memory],
                    any_tags: vec![req.class.tag()],
                };
                let hits = self.search.vectors.search(v, &filter, 3)?;
                for h in hits.iter().filter(|h| h.score >= NEAR_DUPLICATE_COSINE) {
                    if let Some(r) = self.store.get(&h.asset_id)?
                        && SERVABLE.contains(&r.meta.status)
                        && r.lookup_key
                            .as_ref()
                            .is_none_or(|k| Some(k) == lookup_key.as_ref())
                    {
                        reasons.push(
                            Reason::new(
                                ReasonCode::NearDuplicate,
                                format!("cosine {:.3} with an existing record", h.score),
                            )
                            .related(&r.meta.id),
                        );
                        decision = Decision::Merged;
                        merged_into = Some(r);
                        break;
                    }
                }
            }
        }
        let outcome;
        let mut ops = vec![];
        let mut to_index: Option<(AssetRecord, MemoryBody)> = None;
        if let Some(target) = &merged_into {
            outcome = WriteOutcome {
                decision: Decision::Merged,
                id: target.meta.id.clone(),
                version: target.meta.version,
                status: target.meta.status.as_str().to_string(),
                reasons: reasons.clone(),
                replaced: None,
                conflicts_with: None,
            };
            ops.push(WriteOp::Audit(
                audit(p, "memory.merge", &target.meta.id)
                    .hashes(None, Some(meta.content_hash.clone()))
                    .reason(decision.as_str()),
            ));
        } else {
            let mut body = body;
            body.gate = reasons.clone();
            body.supersedes = replaced.as_ref().map(|r| r.meta.id.clone());
            body.conflicts_with = conflicts_with.clone();
            meta.status = status;
            let rec = AssetRecord {
                meta: meta.clone(),
                lookup_key: lookup_key.clone(),
                body: serde_json::to_value(&body).map_err(|e| CoreError::backend("memory", e))?,
            };
            outcome = WriteOutcome {
                decision,
                id: meta.id.clone(),
                version: meta.version,
                status: status.as_str().to_string(),
                reasons: reasons.clone(),
                replaced: replaced.as_ref().map(|r| r.meta.id.clone()),
                conflicts_with: conflicts_with.clone(),
            };
            ops.push(WriteOp::PutVersion(Box::new(rec.clone())));
            if let Some(old) = &replaced {
                ops.push(WriteOp::SetStatus {
                    id: old.meta.id.clone(),
                    version: None,
                    status: AssetStatus::Superseded,
                    expect: Some(old.meta.status),
                });
                ops.push(WriteOp::Audit(
                    audit(p, "memory.supersede", &old.meta.id)
                        .hashes(
                            Some(old.meta.content_hash.clone()),
                            Some(meta.content_hash.clone()),
                        )
                        .reason(format!("superseded by {}", meta.id)),
                ));
            }
            ops.push(WriteOp::Audit(
                audit(p, "memory.write", &meta.id)
                    .hashes(None, Some(meta.content_hash.clone()))
                    .reason(decision.as_str()),
            ));
            if status.is_servable() {
                to_index = Some((rec, body));
            }
        }
        if let Some((key, hash)) = &idem {
            ops.push(WriteOp::Idempotency {
                tenant: p.tenant.clone(),
                key: key.clone(),
                request_hash: hash.clone(),
                response: serde_json::to_value(&outcome)
                    .map_err(|e| CoreError::backend("memory", e))?,
            });
        }
        match self.store.commit(ops) {
            Ok(_) => {}
            Err(CoreError::Conflict(_)) if idem.is_some() => {
                let (key, hash) = idem.as_ref().expect("checked");
                if let Some(prev) = self.remembered(&p.tenant, key, hash)? {
                    return Ok(prev);
                }
                return Err(Error::Core(CoreError::Conflict("concurrent write".into())));
            }
            Err(e) => return Err(e.into()),
        }
        if let Some(old) = &replaced {
            self.search.remove(std::slice::from_ref(&old.meta.id))?;
        }
        if let (Some((rec, body)), Some(v)) = (to_index, vector) {
            self.index_with_vector(&rec, &body, v)?;
        }
        Ok(outcome)
    }

    fn remembered(&self, tenant: &str, key: &str, hash: &str) -> Result<Option<WriteOutcome>> {
        match self.store.idempotent_response(tenant, key)? {
            None => Ok(None),
            Some((h, _)) if h != hash => Err(Error::IdempotencyKeyReused),
            Some((_, resp)) => Ok(Some(
                serde_json::from_value(resp).map_err(|e| CoreError::backend("memory", e))?,
            )),
        }
    }

    /// Writes both index legs with a vector computed already.
    pub fn index_with_vector(
        &self,
        rec: &AssetRecord,
        body: &MemoryBody,
        v: Vec<f32>,
    ) -> Result<()> {
        let keys = index_keys(rec, body);
        self.search.vectors.upsert(&[VectorEntry {
            keys: keys.clone(),
            vector: v,
            model: self.search.embedder.info().tag(),
        }])?;
        // The store holds the record durably already; the text entry is made durable by the
        // next commit (a search makes it visible first), and a restart re-indexes what the
        // last commit missed (`reindex_text_since`).
        self.search.text.upsert_deferred(&[TextDoc {
            keys,
            text: body.index_text(),
        }])?;
        Ok(())
    }

    /// Re-writes the text entries of servable memories created since `since`: after a crash,
    /// entries deferred but not yet committed to the text index are restored from the store.
    pub fn reindex_text_since(&self, since: DateTime<Utc>) -> Result<usize> {
        let recs = self.store.find(&AssetQuery {
            kind: Some(AssetKind::Memory),
            statuses: Some(SERVABLE.to_vec()),
            created_since: Some(since),
            heads_only: true,
            ..Default::default()
        })?;
        let docs: Vec<TextDoc> = recs
            .iter()
            .filter_map(|r| {
                MemoryBody::from_record(r).map(|b| TextDoc {
                    keys: index_keys(r, &b),
                    text: b.index_text(),
                })
            })
            .collect();
        for chunk in docs.chunks(1000) {
            self.search.text.upsert(chunk)?;
        }
        Ok(docs.len())
    }

    /// Embeds and indexes servable records (re-indexing replaces).
    pub fn reindex(&self, recs: &[AssetRecord]) -> Result<usize> {
        let items: Vec<(IndexKeys, String)> = recs
            .iter()
            .filter(|r| SERVABLE.contains(&r.meta.status))
            .filter_map(|r| MemoryBody::from_record(r).map(|b| (index_keys(r, &b), b.index_text())))
            .collect();
        self.search.index_batch(&items)?;
        Ok(items.len())
    }

    /// A memory the principal may see (404 otherwise, whether it exists or not).
    pub fn visible(&self, p: &Principal, id: &str) -> Result<AssetRecord> {
        match self.store.get(id)? {
            Some(r)
                if r.meta.kind == AssetKind::Memory && p.can_see(&r.meta.scope, &r.meta.acl) =>
            {
                Ok(r)
            }
            _ => Err(Error::NotFound(id.to_string())),
        }
    }

    pub fn view(&self, r: &AssetRecord) -> Result<MemoryView> {
        let stats = self
            .stats
            .stats(std::slice::from_ref(&r.meta.id))?
            .remove(&r.meta.id)
            .unwrap_or_default();
        MemoryView::of(r, stats).ok_or_else(|| Error::NotFound(r.meta.id.clone()))
    }

    pub fn get(&self, p: &Principal, id: &str) -> Result<MemoryDetail> {
        let rec = self.visible(p, id)?;
        let memory = self.view(&rec)?;
        let versions = self
            .store
            .history(id)?
            .iter()
            .filter_map(|r| MemoryView::of(r, memory.stats.clone()))
            .collect();
        let mut related = vec![];
        if let Some(lk) = &rec.lookup_key {
            for r in self.store.find(&AssetQuery {
                kind: Some(AssetKind::Memory),
                tenant: Some(p.tenant.clone()),
                scope_keys: Some(vec![rec.meta.scope.key()]),
                lookup_key: Some(lk.clone()),
                heads_only: true,
                ..Default::default()
            })? {
                if r.meta.id != rec.meta.id && p.can_see(&r.meta.scope, &r.meta.acl) {
                    related.push(self.view(&r)?);
                }
            }
        }
        Ok(MemoryDetail {
            memory,
            versions,
            related,
        })
    }

    pub fn feedback(&self, p: &Principal, id: &str, req: &FeedbackRequest) -> Result<MemoryStats> {
        let rec = self.visible(p, id)?;
        let helpful = req.outcome == Outcome::Helpful;
        let mut draft = audit(p, "memory.feedback", &rec.meta.id).reason(if helpful {
            "helpful"
        } else {
            "harmful"
        });
        if let Some(t) = &req.task {
            draft = draft.reason(format!(
                "{} task={t}",
                if helpful { "helpful" } else { "harmful" }
            ));
        }
        self.store.commit(vec![WriteOp::Audit(draft)])?;
        Ok(self.stats.add_feedback(id, helpful)?)
    }

    /// Pending records (candidate, quarantined, conflict_pending) in the principal's scopes.
    pub fn review_queue(&self, p: &Principal, limit: usize) -> Result<Vec<MemoryView>> {
        let recs = self.store.find(&AssetQuery {
            kind: Some(AssetKind::Memory),
            tenant: Some(p.tenant.clone()),
            scope_keys: Some(p.visible_scope_keys()),
            statuses: Some(PENDING.to_vec()),
            heads_only: true,
            limit: Some(limit),
            ..Default::default()
        })?;
        recs.iter()
            .filter(|r| p.can_see(&r.meta.scope, &r.meta.acl))
            .map(|r| self.view(r))
            .collect()
    }

    fn require_reviewer(p: &Principal) -> Result<()> {
        if p.has_role(Role::Reviewer) {
            Ok(())
        } else {
            Err(Error::Forbidden {
                message: "the reviewer role is required".into(),
                reasons: vec![],
            })
        }
    }

    /// A reviewer confirms a pending record (it becomes `confirmed`, and supersedes the record
    /// it conflicted with) or verifies an active one.
    pub fn confirm(&self, p: &Principal, id: &str) -> Result<MemoryView> {
        Self::require_reviewer(p)?;
        let rec = self.visible(p, id)?;
        let from = rec.meta.status;
        if !(PENDING.contains(&from) || from == AssetStatus::Active) {
            return Err(Error::Transition {
                from: from.as_str().into(),
                action: "confirm".into(),
                allowed: vec![
                    "candidate".into(),
                    "quarantined".into(),
                    "conflict_pending".into(),
                    "active".into(),
                ],
            });
        }
        let body = MemoryBody::from_record(&rec).ok_or_else(|| Error::NotFound(id.into()))?;
        let mut ops = vec![WriteOp::SetStatus {
            id: id.into(),
            version: None,
            status: AssetStatus::Confirmed,
            expect: Some(from),
        }];
        let mut old_ids = vec![];
        if let Some(lk) = &rec.lookup_key {
            for old in self.store.find(&AssetQuery {
                kind: Some(AssetKind::Memory),
                tenant: Some(p.tenant.clone()),
                scope_keys: Some(vec![rec.meta.scope.key()]),
                statuses: Some(SERVABLE.to_vec()),
                lookup_key: Some(lk.clone()),
                heads_only: true,
                ..Default::default()
            })? {
                if old.meta.id == rec.meta.id {
                    continue;
                }
                ops.push(WriteOp::SetStatus {
                    id: old.meta.id.clone(),
                    version: None,
                    status: AssetStatus::Superseded,
                    expect: Some(old.meta.status),
                });
                ops.push(WriteOp::Audit(
                    audit(p, "memory.supersede", &old.meta.id).reason(format!("confirmed {id}")),
                ));
                old_ids.push(old.meta.id);
            }
        }
        ops.push(WriteOp::Audit(
            audit(p, "memory.confirm", id).reason(format!("from {}", from.as_str())),
        ));
        let v = self.search.embed_one(&body.index_text())?;
        self.store.commit(ops)?;
        self.stats.mark_verified(id, Utc::now())?;
        if !old_ids.is_empty() {
            self.search.remove(&old_ids)?;
        }
        let rec = self
            .store
            .get(id)?
            .ok_or_else(|| Error::NotFound(id.into()))?;
        self.index_with_vector(&rec, &body, v)?;
        self.view(&rec)
    }

    /// A reviewer rejects a pending record: it is revoked and never served.
    pub fn reject(&self, p: &Principal, id: &str) -> Result<MemoryView> {
        Self::require_reviewer(p)?;
        let rec = self.visible(p, id)?;
        let from = rec.meta.status;
        if !PENDING.contains(&from) {
            return Err(Error::Transition {
                from: from.as_str().into(),
                action: "reject".into(),
                allowed: PENDING.iter().map(|s| s.as_str().to_string()).collect(),
            });
        }
        self.store.commit(vec![
            WriteOp::SetStatus {
                id: id.into(),
                version: None,
                status: AssetStatus::Revoked,
                expect: Some(from),
            },
            WriteOp::Audit(audit(p, "memory.reject", id).reason(format!("from {}", from.as_str()))),
        ])?;
        self.search.remove(&[id.to_string()])?;
        let rec = self
            .store
            .get(id)?
            .ok_or_else(|| Error::NotFound(id.into()))?;
        self.view(&rec)
    }

    /// Revokes now: no further read, hit or injection; removed from both indexes.
    pub fn revoke(&self, p: &Principal, id: &str) -> Result<MemoryView> {
        let rec = self.visible(p, id)?;
        let may = p.has_role(Role::Admin)
            || (p.can_write_into(&rec.meta.scope) && rec.meta.owner == p.user);
        if !may {
            return Err(Error::Forbidden {
                message: "only the owner or an admin may revoke this memory".into(),
                reasons: vec![],
            });
        }
        if rec.meta.status != AssetStatus::Revoked {
            self.store.commit(vec![
                WriteOp::SetStatus {
                    id: id.into(),
                    version: None,
                    status: AssetStatus::Revoked,
                    expect: Some(rec.meta.status),
                },
                WriteOp::Audit(
                    audit(p, "memory.revoke", id)
                        .hashes(Some(rec.meta.content_hash.clone()), None)
                        .reason(format!("from {}", rec.meta.status.as_str())),
                ),
            ])?;
        }
        self.search.remove(&[id.to_string()])?;
        let rec = self
            .store
            .get(id)?
            .ok_or_else(|| Error::NotFound(id.into()))?;
        self.view(&rec)
    }
}
