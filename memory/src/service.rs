//! The memory service: writes through the gate, reads, feedback, review and revocation.

use std::collections::BTreeSet;
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use registry_core::access::{self, Action, Sight};
use registry_core::asset::{AssetId, AssetKind, AssetMeta, AssetRecord, AssetStatus};
use registry_core::audit::{AuditAction, AuditDraft};
use registry_core::derivation::{ChildStore, DerivationEdge, Relation};
use registry_core::hash::sha256_hex;
use registry_core::locks::KeyedLocks;
use registry_core::retrieval::{Embedder, IndexKeys, TextDoc, VectorEntry, VisibilityFilter};
use registry_core::store::{AssetQuery, AssetStore, WriteOp};
use registry_core::task::TaskLogStore;
use registry_core::{CoreError, Principal, Role, Scope, Trust};
use registry_engine::HybridSearcher;
use serde::{Deserialize, Serialize};

use crate::gate::{self, Decision, NEAR_DUPLICATE_COSINE, Reason, ReasonCode, Screen};
use crate::identity::identity_tokens;
use crate::record::{
    Layer, LevelName, MemoryBody, MemoryClass, MemoryStats, MemoryView, MergedWrite, ScopeSpec,
    WriteRequest, fact_key, normalise,
};
use crate::{Error, Result};

/// Where usage counters live (the core's trait; every store implements it).
pub use registry_core::usage::UsageStore as StatsStore;

/// Policies of the service that are not part of the wire contract (the contract's caps on a
/// write's fields are the constants in [`crate::record`], published as `maxLength`/`maxItems`).
#[derive(Debug, Clone)]
pub struct Limits {
    pub default_working_ttl_secs: u64,
    /// Writes kept on one record by merging; a further duplicate is stored as its own record.
    pub max_merges: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            default_working_ttl_secs: 24 * 3600,
            max_merges: 32,
        }
    }
}

/// The answer to a write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct MemoryDetail {
    pub memory: MemoryView,
    /// Every version of this record, oldest first.
    pub versions: Vec<MemoryView>,
    /// Other records on the same subject and attribute (superseded, pending, active), oldest
    /// first; those the caller may not read in full are shown without their content.
    pub related: Vec<MemoryView>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Helpful,
    Harmful,
}

/// Fields of one write the gate's second opinion embeds at most (each its first
/// `registry_detect::vector::VECTOR_TOKENS` tokens): the model's work per write is bounded
/// whatever the request holds (64-item lists of 512 bytes would otherwise be 192 model
/// inputs).
pub const MAX_SECOND_OPINION_FIELDS: usize = 4;

/// Longest `task` a feedback names, in characters.
pub const MAX_FEEDBACK_TASK_CHARS: usize = 256;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FeedbackRequest {
    pub outcome: Outcome,
    /// The task in which the memory helped or harmed (the audit log keeps its hash only).
    #[serde(default)]
    #[schemars(length(max = MAX_FEEDBACK_TASK_CHARS))]
    pub task: Option<String>,
}

pub(crate) const PENDING: [AssetStatus; 3] = [
    AssetStatus::Candidate,
    AssetStatus::Quarantined,
    AssetStatus::ConflictPending,
];
pub(crate) const SERVABLE: [AssetStatus; 2] = [AssetStatus::Active, AssetStatus::Confirmed];

/// Why a record is waiting for a reviewer while it stays served.
pub const REVIEW_RETIRE: &str = "retire_proposed";

#[derive(Clone)]
pub struct MemoryService {
    pub store: Arc<dyn AssetStore>,
    pub search: HybridSearcher,
    pub stats: Arc<dyn StatsStore>,
    pub limits: Limits,
    /// Check-then-write in the gate (rules 5–6 look at one scope) is serialised per scope.
    locks: KeyedLocks,
    /// The weights of the ranking mix ([`crate::weights::WEIGHTS`] unless set), shared by clones.
    weights: Arc<std::sync::RwLock<crate::weights::Breakdown>>,
    /// The model the gate's instruction detector takes its second opinion from
    /// (multilingual-e5-small, see `registry_detect::vector`); `None`: the classifier alone.
    gate_embedder: Option<Arc<dyn Embedder>>,
    /// Where an artifact named as evidence is looked up (its task becomes the parent);
    /// `None`: artifacts are not resolved.
    task_log: Option<Arc<dyn TaskLogStore>>,
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
    IndexKeys::of(
        &r.meta,
        AssetKind::Memory,
        vec![
            b.class.tag(),
            match b.layer {
                Layer::Raw => "layer:raw".into(),
                Layer::Consolidated => "layer:consolidated".into(),
            },
        ],
    )
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

fn audit(p: &Principal, action: AuditAction, rec: &AssetMeta) -> AuditDraft {
    AuditDraft::new(&p.user, action)
        .in_scope(&rec.scope)
        .asset(&rec.id)
}

fn be(e: impl std::fmt::Display) -> CoreError {
    CoreError::backend("memory", e)
}

/// A write the gate let through rules 1–4, ready for rules 5–6.
struct Candidate {
    meta: AssetMeta,
    body: MemoryBody,
    lookup_key: Option<String>,
    screen: Screen,
}

/// What rules 5–6 decided about a candidate.
enum Verdict {
    /// Stored as its own record with the status rules 1–4 gave it.
    Store,
    /// Kept on an existing record (its next version, or only an audit event when it brings
    /// nothing new).
    Merge {
        into: AssetRecord,
        reason: Reason,
    },
    Supersede {
        old: AssetRecord,
        reason: Reason,
    },
    Conflict {
        with: AssetId,
        reason: Reason,
    },
}

/// The asset or artifact id an evidence item names, if it has the shape of one: the item
/// without a `<kind>:` prefix and a `#…` anchor, when that is a UUID.
fn evidence_asset_id(item: &str) -> Option<&str> {
    let rest = match item.split_once(':') {
        Some((kind, rest))
            if !kind.is_empty() && kind.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') =>
        {
            rest
        }
        _ => item,
    };
    let id = rest.split('#').next().unwrap_or(rest).trim();
    (id.len() == 36 && uuid::Uuid::parse_str(id).is_ok()).then_some(id)
}

/// Whether two texts name the same things: same numbers, ids, dates, names.
fn same_identity(a: &str, b: &str) -> bool {
    identity_tokens(a) == identity_tokens(b)
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
            locks: KeyedLocks::new(),
            weights: Arc::new(std::sync::RwLock::new(crate::weights::WEIGHTS)),
            gate_embedder: None,
            task_log: None,
        }
    }

    /// The same service resolving artifact ids named as evidence through `log`.
    pub fn with_task_log(mut self, log: Arc<dyn TaskLogStore>) -> Self {
        self.task_log = Some(log);
        self
    }

    /// The same service with the gate's second opinion read from `embedder`'s vectors. A model
    /// other than the one the opinion was trained on is not used (the classifier decides
    /// alone); [`Self::gate_has_second_opinion`] says which.
    pub fn with_gate_embedder(mut self, embedder: Option<Arc<dyn Embedder>>) -> Self {
        self.gate_embedder = embedder.filter(|e| {
            e.info().name == registry_detect::vector::VECTOR_MODEL_NAME
                && e.info().dim == registry_detect::vector::VECTOR_DIM
        });
        self
    }

    /// Whether the gate's instruction detector has its second opinion (the embedding model).
    pub fn gate_has_second_opinion(&self) -> bool {
        self.gate_embedder.is_some()
    }

    /// The weights search ranks by.
    pub fn weights(&self) -> crate::weights::Breakdown {
        *self.weights.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Replaces the ranking weights for every clone of this service (a bench tuning them on
    /// a development set; the defaults are [`crate::weights::WEIGHTS`]).
    pub fn set_weights(&self, w: crate::weights::Breakdown) {
        *self.weights.write().unwrap_or_else(|e| e.into_inner()) = w;
    }

    /// The same service sharing `locks` (every service over one store must share them).
    pub fn with_locks(mut self, locks: KeyedLocks) -> Self {
        self.locks = locks;
        self
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
        req.check_contract()?;
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
    /// `<key>:<i>`. Past the request's deadline the remaining items fail with
    /// `DeadlineExceeded` and are not committed.
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
        // An item not committed by the deadline is not committed: each asks before its work
        // and again before its commit (`write_with`), even after earlier items committed.
        reqs.iter()
            .zip(vectors)
            .enumerate()
            .map(|(i, (r, pre))| {
                registry_core::deadline::check_step()?;
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
            let why = format!("cannot write into scope {}", scope.key());
            return Err(Error::Forbidden {
                message: why.clone(),
                reasons: vec![Reason::new(ReasonCode::ScopeNotPermitted, why)],
            });
        }
        if !p.may_restrict_to(&req.purposes) {
            return Err(Error::Forbidden {
                message: "purposes name a purpose the key does not hold".into(),
                reasons: vec![],
            });
        }
        let idem =
            idempotency_key.map(|k| (format!("memory:{}:{k}", p.user), request_hash(p, req)));
        if let Some((key, hash)) = &idem
            && let Some(prev) = self.remembered(&p.tenant, key, hash)?
        {
            return Ok(prev);
        }
        let fields = req.text_fields();
        // The stored vector is computed while the gate's second opinion embeds the fields (two
        // model calls at once rather than one after the other); it is thrown away when the
        // write is not accepted.
        let index_text = req.index_text();
        let speculate = pre_embedded.is_none() && self.gate_embedder.is_some();
        let (vectors, early) = std::thread::scope(|s| {
            let early = speculate.then(|| s.spawn(|| self.search.embed_one(&index_text)));
            let vectors = self.gate_vectors(&fields);
            let early = early.map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
            (vectors, early)
        });
        let screen = gate::screen_with_vectors(
            p,
            req.class,
            &scope,
            req.source,
            req.sensitivity,
            &fields,
            &vectors?,
        );
        if screen.decision == Decision::Rejected {
            return Err(Error::Rejected(screen.reasons));
        }
        let cand = self.candidate(p, req, scope, screen, now);
        debug_assert_eq!(cand.body.embed_text(), index_text);
        // Embedding happens outside the lock: it is the slow part and depends only on the text.
        let vector = match (cand.screen.decision, pre_embedded, early) {
            (Decision::Accepted, Some(v), _) => Some(v),
            (Decision::Accepted, None, Some(early)) => Some(early?),
            (Decision::Accepted, None, None) => {
                Some(self.search.embed_one(&cand.body.embed_text())?)
            }
            _ => None,
        };
        // What the evidence names is looked up before the scope's lock, like the vector.
        let cited = self.evidence_parents(p, &req.evidence)?;
        registry_core::deadline::check()?;
        let _guard = self.locks.lock(&cand.meta.scope.key());
        if let Some((key, hash)) = &idem
            && let Some(prev) = self.remembered(&p.tenant, key, hash)?
        {
            return Ok(prev);
        }
        let verdict = if cand.screen.decision == Decision::Accepted {
            self.decide(p, req, &cand, vector.as_deref())?
        } else {
            Verdict::Store
        };
        let (outcome, mut ops, index) = self.plan(p, req, cand, verdict, now)?;
        ops.extend(
            cited
                .into_iter()
                .filter(|c| *c != outcome.id)
                .map(|parent| {
                    WriteOp::AddEdge(DerivationEdge {
                        parent,
                        child: outcome.id.clone(),
                        relation: Relation::Cites,
                        child_store: ChildStore::Assets,
                    })
                }),
        );
        if let Some((key, hash)) = &idem {
            ops.push(WriteOp::Idempotency {
                tenant: p.tenant.clone(),
                key: key.clone(),
                request_hash: hash.clone(),
                response: serde_json::to_value(&outcome).map_err(be)?,
            });
        }
        registry_core::deadline::check_step()?;
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
        self.apply_index(index, vector)?;
        Ok(outcome)
    }

    /// The second opinion's vector of each field it judges, in the order of `fields` (one
    /// batch; a few milliseconds per field): only fields the cheap layers are unsure of
    /// (`registry_detect::wants_second_opinion`), at most [`MAX_SECOND_OPINION_FIELDS`] of
    /// them, the highest-scoring first; the others are judged by the rules and the classifier
    /// alone, as fields of a few words (names, tags, ids) are. Without the gate's model, none.
    fn gate_vectors(&self, fields: &[(&str, &str)]) -> Result<Vec<Option<Vec<f32>>>> {
        let Some(e) = &self.gate_embedder else {
            return Ok(vec![]);
        };
        let mut unsure: Vec<(usize, f32)> = Vec::new();
        for (i, (_, text)) in fields.iter().enumerate() {
            registry_core::deadline::check()?;
            if let Some(score) = registry_detect::wants_second_opinion(text) {
                unsure.push((i, score));
            }
        }
        unsure.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        unsure.truncate(MAX_SECOND_OPINION_FIELDS);
        let mut read: Vec<usize> = unsure.into_iter().map(|(i, _)| i).collect();
        read.sort_unstable();
        let texts: Vec<&str> = read.iter().map(|i| fields[*i].1).collect();
        let mut got = registry_detect::vector::gate_vectors(e.as_ref(), &texts)?
            .unwrap_or_default()
            .into_iter();
        let mut out = vec![None; fields.len()];
        for i in read {
            out[i] = got.next();
        }
        Ok(out)
    }

    /// The record a write would store: its governance metadata (trust from the writer's
    /// channel, sensitivity from the gate, retention of working memory) and its body.
    fn candidate(
        &self,
        p: &Principal,
        req: &WriteRequest,
        scope: Scope,
        screen: Screen,
        now: DateTime<Utc>,
    ) -> Candidate {
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
            merged: vec![],
        };
        let mut meta = AssetMeta::new(AssetKind::Memory, scope, &p.user, req.source);
        meta.created_at = now;
        meta.updated_at = now;
        // Trust comes from who writes through which channel; a declared source only lowers it.
        meta.trust = req.source.default_trust().min(p.trust_ceiling());
        meta.sensitivity = screen.sensitivity;
        meta.valid_from = req.valid_from;
        meta.valid_to = req.valid_to;
        meta.purposes = req.purposes.clone();
        meta.content_hash = sha256_hex(normalise(&req.content));
        if req.class == MemoryClass::Working {
            let ttl = req.ttl_secs.unwrap_or(self.limits.default_working_ttl_secs);
            let until = now + Duration::seconds(ttl.min(365 * 24 * 3600) as i64);
            // Working memory is forgotten at the end of its TTL: served until then, and
            // purged by the retention job after.
            meta.expires_at = Some(until);
            meta.retain_until = Some(until);
        }
        let lookup_key = match (&req.subject, &req.attribute) {
            (Some(s), Some(a)) => Some(fact_key(s, a)),
            _ => None,
        };
        Candidate {
            meta,
            body,
            lookup_key,
            screen,
        }
    }

    /// Whether `into` can keep `cand` without widening who sees the newcomer's text or losing
    /// it: same purposes, sensitivity no higher than the record's, room left.
    fn can_merge(&self, cand: &Candidate, into: &AssetRecord) -> bool {
        let body = MemoryBody::from_record(into);
        same_audience(&cand.meta, &into.meta)
            && cand.meta.sensitivity <= into.meta.sensitivity
            && body.is_some_and(|b| b.merged.len() < self.limits.max_merges)
    }

    /// Rules 5–6 (duplicates, conflicts) for a candidate rules 1–4 accepted. Only records the
    /// writer may read take part: a record hidden from it (ACL, clearance, purpose) is neither
    /// merged into nor superseded, and the new record is stored beside it, so that a write
    /// never confirms another's content nor names its id.
    fn decide(
        &self,
        p: &Principal,
        req: &WriteRequest,
        cand: &Candidate,
        vector: Option<&[f32]>,
    ) -> Result<Verdict> {
        let scope = &cand.meta.scope;
        let same_scope = Some(vec![scope.key()]);
        // Rule 5, exact: same normalised content in the same scope and class.
        let dup = self
            .store
            .find(&AssetQuery {
                kind: Some(AssetKind::Memory),
                tenant: scope.tenant.clone(),
                scope_keys: same_scope.clone(),
                statuses: Some(SERVABLE.to_vec()),
                content_hash: Some(cand.meta.content_hash.clone()),
                heads_only: true,
                ..Default::default()
            })?
            .into_iter()
            .find(|r| {
                access::may(p, Action::Read, &r.meta)
                    && MemoryBody::from_record(r).is_some_and(|b| b.class == req.class)
                    && self.can_merge(cand, r)
            });
        if let Some(d) = dup {
            let reason = Reason::new(ReasonCode::DuplicateContent, "same content already stored")
                .related(&d.meta.id);
            return Ok(Verdict::Merge { into: d, reason });
        }
        // Rule 6: same subject and attribute.
        if let Some(lk) = &cand.lookup_key {
            let existing = self
                .store
                .find(&AssetQuery {
                    kind: Some(AssetKind::Memory),
                    tenant: scope.tenant.clone(),
                    scope_keys: same_scope.clone(),
                    statuses: Some(SERVABLE.to_vec()),
                    lookup_key: Some(lk.clone()),
                    heads_only: true,
                    ..Default::default()
                })?
                .into_iter()
                .rfind(|r| access::may(p, Action::Read, &r.meta));
            if let Some(old) = existing {
                return Ok(self.fact_rule(req, cand, old));
            }
        }
        // Rule 5, near: a very similar record in the same scope and class that names the same
        // things (numbers, ids, dates, names): an embedding alone cannot tell those apart.
        if let Some(v) = vector {
            let filter = VisibilityFilter {
                scope_keys: vec![scope.key()],
                acl_keys: cand.meta.acl.keys(),
                kinds: vec![AssetKind::Memory],
                any_tags: vec![req.class.tag()],
                ..Default::default()
            };
            let text = cand.body.embed_text();
            for h in self.search.vectors.search(v, &filter, 3)? {
                if h.score < NEAR_DUPLICATE_COSINE {
                    break;
                }
                let Some(r) = self.store.get(&h.asset_id)? else {
                    continue;
                };
                let Some(rb) = MemoryBody::from_record(&r) else {
                    continue;
                };
                if SERVABLE.contains(&r.meta.status)
                    && access::may(p, Action::Read, &r.meta)
                    && r.lookup_key
                        .as_ref()
                        .is_none_or(|k| Some(k) == cand.lookup_key.as_ref())
                    && same_identity(&text, &rb.embed_text())
                    && self.can_merge(cand, &r)
                {
                    let reason = Reason::new(
                        ReasonCode::NearDuplicate,
                        format!(
                            "cosine {:.3} with an existing record naming the same things",
                            h.score
                        ),
                    )
                    .related(&r.meta.id);
                    return Ok(Verdict::Merge { into: r, reason });
                }
            }
        }
        Ok(Verdict::Store)
    }

    /// Rule 6 against the active record `old` on the same subject and attribute.
    fn fact_rule(&self, req: &WriteRequest, cand: &Candidate, old: AssetRecord) -> Verdict {
        let old_value = MemoryBody::from_record(&old).and_then(|b| b.value.map(|v| normalise(&v)));
        let id = old.meta.id.clone();
        if old_value == req.value.as_deref().map(normalise) && self.can_merge(cand, &old) {
            let reason =
                Reason::new(ReasonCode::SameFact, "same subject, attribute and value").related(&id);
            return Verdict::Merge { into: old, reason };
        }
        let conflict = |code, why: &str| Verdict::Conflict {
            with: id.clone(),
            reason: Reason::new(code, why).related(&id),
        };
        if old.meta.status == AssetStatus::Confirmed {
            return conflict(
                ReasonCode::ConfirmedRecord,
                "a reviewer confirmed the active record; only a reviewer supersedes it",
            );
        }
        if matches!((req.valid_from, old.meta.valid_from), (Some(n), Some(o)) if n < o) {
            return conflict(
                ReasonCode::OlderThanExisting,
                "the active record is valid from a later time",
            );
        }
        if cand.meta.trust >= effective_trust(&old.meta) {
            let reason = Reason::new(
                ReasonCode::SupersedesRecord,
                "replaces a record of lower or equal trust",
            )
            .related(&id);
            return Verdict::Supersede { old, reason };
        }
        conflict(
            ReasonCode::LowerTrustConflict,
            "a lower-trust source cannot supersede a higher-trust record",
        )
    }

    /// The commit for a verdict: the operations, the answer, and the index work after it.
    fn plan(
        &self,
        p: &Principal,
        req: &WriteRequest,
        cand: Candidate,
        verdict: Verdict,
        now: DateTime<Utc>,
    ) -> Result<(WriteOutcome, Vec<WriteOp>, IndexWork)> {
        let Candidate {
            mut meta,
            mut body,
            lookup_key,
            screen,
        } = cand;
        let mut reasons = screen.reasons.clone();
        let mut decision = screen.decision;
        let mut status = match (screen.decision, screen.quarantine) {
            (Decision::Candidate, true) => AssetStatus::Quarantined,
            (Decision::Candidate, false) => AssetStatus::Candidate,
            _ => AssetStatus::Active,
        };
        let mut replaced = None;
        let mut conflicts_with = None;
        let mut ops = vec![];
        match verdict {
            Verdict::Merge { into, reason } => {
                reasons.push(reason);
                return self.plan_merge(p, req, &meta, &body, into, reasons, now);
            }
            Verdict::Supersede { old, reason } => {
                reasons.push(reason);
                decision = Decision::Superseded;
                ops.push(WriteOp::SetStatus {
                    id: old.meta.id.clone(),
                    version: None,
                    status: AssetStatus::Superseded,
                    expect: Some(old.meta.status),
                });
                ops.push(WriteOp::Audit(
                    audit(p, AuditAction::MemorySupersede, &old.meta)
                        .hashes(
                            Some(old.meta.content_hash.clone()),
                            Some(meta.content_hash.clone()),
                        )
                        .reason(format!("superseded by {}", meta.id)),
                ));
                replaced = Some(old.meta.id);
            }
            Verdict::Conflict { with, reason } => {
                reasons.push(reason);
                decision = Decision::ConflictPending;
                status = AssetStatus::ConflictPending;
                conflicts_with = Some(with);
            }
            Verdict::Store => {}
        }
        body.gate = reasons.clone();
        body.supersedes = replaced.clone();
        body.conflicts_with = conflicts_with.clone();
        meta.status = status;
        let rec = AssetRecord {
            meta: meta.clone(),
            lookup_key,
            body: serde_json::to_value(&body).map_err(be)?,
        };
        ops.insert(0, WriteOp::PutVersion(Box::new(rec.clone())));
        ops.push(WriteOp::Audit(
            audit(p, AuditAction::MemoryWrite, &meta)
                .hashes(None, Some(meta.content_hash.clone()))
                .reason(decision.as_str()),
        ));
        let outcome = WriteOutcome {
            decision,
            id: meta.id.clone(),
            version: meta.version,
            status: status.as_str().to_string(),
            reasons,
            replaced: replaced.clone(),
            conflicts_with,
        };
        let index = IndexWork {
            remove: replaced.into_iter().collect(),
            add: status.is_servable().then_some((rec, body)),
            sync_text: false,
        };
        Ok((outcome, ops, index))
    }

    /// A merge keeps the newcomer on the surviving record: its evidence, source and (when its
    /// wording differs) its content go on the record's next version. A newcomer that brings
    /// nothing new leaves only an audit event.
    #[allow(clippy::too_many_arguments)]
    fn plan_merge(
        &self,
        p: &Principal,
        req: &WriteRequest,
        meta: &AssetMeta,
        body: &MemoryBody,
        into: AssetRecord,
        reasons: Vec<Reason>,
        now: DateTime<Utc>,
    ) -> Result<(WriteOutcome, Vec<WriteOp>, IndexWork)> {
        let mut target = MemoryBody::from_record(&into).ok_or_else(|| be("malformed memory"))?;
        let new_wording = meta.content_hash != into.meta.content_hash
            && !target
                .merged
                .iter()
                .any(|m| m.content_hash == meta.content_hash);
        let new_evidence: Vec<String> = body
            .evidence
            .iter()
            .filter(|e| !target.evidence.contains(e))
            .cloned()
            .collect();
        let new_source =
            into.meta.source != req.source && !target.merged.iter().any(|m| m.source == req.source);
        let mut ops = vec![];
        let mut head = into.clone();
        let mut index = IndexWork::default();
        if new_wording || !new_evidence.is_empty() || new_source {
            target.evidence.extend(new_evidence);
            target.merged.push(MergedWrite {
                at: now,
                by: p.user.clone(),
                source: req.source,
                evidence: body.evidence.clone(),
                content_hash: meta.content_hash.clone(),
                content: new_wording.then(|| req.content.clone()),
            });
            head.meta.version += 1;
            head.meta.updated_at = now;
            head.body = serde_json::to_value(&target).map_err(be)?;
            ops.push(WriteOp::PutVersion(Box::new(head.clone())));
            if head.meta.status.is_servable() {
                index.add = Some((head.clone(), target));
                index.sync_text = true;
            }
        }
        ops.push(WriteOp::Audit(
            audit(p, AuditAction::MemoryMerge, &into.meta)
                .hashes(
                    Some(into.meta.content_hash.clone()),
                    Some(meta.content_hash.clone()),
                )
                .reason(format!("version {}", head.meta.version)),
        ));
        let outcome = WriteOutcome {
            decision: Decision::Merged,
            id: head.meta.id.clone(),
            version: head.meta.version,
            status: head.meta.status.as_str().to_string(),
            reasons,
            replaced: None,
            conflicts_with: None,
        };
        Ok((outcome, ops, index))
    }

    /// The registry assets `evidence` names that `p` may read: a task (`task:<id>`, or one of
    /// its events as `task:<id>#<seq>`), an artifact (`artifact:<id>`: its task), a document,
    /// a memory or any other asset by its id, with or without a `<kind>:` prefix. The memory
    /// written cites each (a `cites` edge): deleting one flags the memory in its receipt, and
    /// its `impact` lists the memory. An item naming nothing `p` may read links nothing and
    /// says nothing: evidence is not an oracle.
    fn evidence_parents(&self, p: &Principal, evidence: &[String]) -> Result<BTreeSet<AssetId>> {
        let mut parents = BTreeSet::new();
        for item in evidence {
            let Some(named) = evidence_asset_id(item) else {
                continue;
            };
            let parent = match (self.store.get(named)?, &self.task_log) {
                (Some(rec), _) => Some(rec.meta),
                (None, Some(log)) => match log.artifact(named)? {
                    Some(a) => self.store.get(&a.task)?.map(|t| t.meta),
                    None => None,
                },
                (None, None) => None,
            };
            if let Some(m) = parent
                && access::may(p, Action::Read, &m)
            {
                parents.insert(m.id);
            }
        }
        Ok(parents)
    }

    fn apply_index(&self, work: IndexWork, vector: Option<Vec<f32>>) -> Result<()> {
        if !work.remove.is_empty() {
            self.search.remove(&work.remove)?;
        }
        let Some((rec, body)) = work.add else {
            return Ok(());
        };
        if work.sync_text {
            // A merged record's next version: same vector, new text (its wordings).
            self.search.text.upsert(&[TextDoc {
                keys: index_keys(&rec, &body),
                text: body.index_text(),
            }])?;
            return Ok(());
        }
        if let Some(v) = vector {
            self.index_with_vector(&rec, &body, v)?;
        }
        Ok(())
    }

    fn remembered(&self, tenant: &str, key: &str, hash: &str) -> Result<Option<WriteOutcome>> {
        match self.store.idempotent_response(tenant, key)? {
            None => Ok(None),
            Some((h, _)) if h != hash => Err(Error::IdempotencyKeyReused),
            Some((_, resp)) => Ok(Some(serde_json::from_value(resp).map_err(be)?)),
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
        self.reindex_text(&recs)
    }

    /// Writes the text entries of servable records, leaving their vectors alone (a node
    /// following a shared vector index, which the writing node filled). Returns the count.
    pub fn reindex_text(&self, recs: &[AssetRecord]) -> Result<usize> {
        let docs: Vec<TextDoc> = recs
            .iter()
            .filter(|r| SERVABLE.contains(&r.meta.status))
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
        let items: Vec<(AssetRecord, MemoryBody)> = recs
            .iter()
            .filter(|r| SERVABLE.contains(&r.meta.status))
            .filter_map(|r| MemoryBody::from_record(r).map(|b| (r.clone(), b)))
            .collect();
        for batch in items.chunks(registry_engine::EMBED_BATCH) {
            let texts: Vec<String> = batch.iter().map(|(_, b)| b.embed_text()).collect();
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            let vectors = self.search.embedder.embed(&refs)?;
            let model = self.search.embedder.info().tag();
            let mut entries = Vec::with_capacity(batch.len());
            let mut docs = Vec::with_capacity(batch.len());
            for ((r, b), v) in batch.iter().zip(vectors) {
                let keys = index_keys(r, b);
                entries.push(VectorEntry {
                    keys: keys.clone(),
                    vector: v,
                    model: model.clone(),
                });
                docs.push(TextDoc {
                    keys,
                    text: b.index_text(),
                });
            }
            self.search.vectors.upsert(&entries)?;
            self.search.text.upsert(&docs)?;
        }
        Ok(items.len())
    }

    /// The index keys every servable memory should carry now, for re-labelling an index whose
    /// entries predate a change of governance tags.
    pub fn current_index_entries(&self) -> Result<Vec<(IndexKeys, String)>> {
        let recs = self.store.find(&AssetQuery {
            kind: Some(AssetKind::Memory),
            statuses: Some(SERVABLE.to_vec()),
            heads_only: true,
            ..Default::default()
        })?;
        Ok(recs
            .iter()
            .filter_map(|r| MemoryBody::from_record(r).map(|b| (index_keys(r, &b), b.index_text())))
            .collect())
    }

    /// A memory the principal may see ([`access::may`] `See`: its scope, ACL, clearance and
    /// purpose admit the principal, and a held or retired record only those who judge or
    /// govern it); 404 otherwise, whether it exists or not, at every door that names a memory
    /// by id (read, feedback, confirm, reject, revoke).
    pub fn visible(&self, p: &Principal, id: &str) -> Result<AssetRecord> {
        match self.store.get(id)? {
            Some(r) if r.meta.kind == AssetKind::Memory && access::may(p, Action::See, &r.meta) => {
                Ok(r)
            }
            _ => Err(Error::NotFound(id.to_string())),
        }
    }

    /// How much of a visible record `p` may read: a servable one in full; a pending one its
    /// writer and the reviewers and governors of its scope in full (they must judge it); any
    /// other state (revoked, expired, superseded) only its governors, without content.
    fn readable(&self, p: &Principal, r: &AssetRecord) -> Readable {
        match access::sight(p, &r.meta) {
            Sight::Full => Readable::Full,
            Sight::Metadata => Readable::Metadata,
            Sight::None => Readable::No,
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

    /// The view of `r` that `p` may have: in full, without content, or none.
    pub fn view_as(&self, p: &Principal, r: &AssetRecord) -> Result<Option<MemoryView>> {
        Ok(match self.readable(p, r) {
            Readable::Full => Some(self.view(r)?),
            Readable::Metadata => Some(self.view(r)?.redacted()),
            Readable::No => None,
        })
    }

    /// The memory resource as `GET /v1/memories/{id}` serves it: [`Self::get`], except that a
    /// revoked memory (what `DELETE /v1/memories/{id}` leaves) answers 404 to everyone, as a
    /// deleted resource does. Its governors still see its metadata where records are governed
    /// (`GET /v1/assets/{id}`, the console's Memory and Derivation pages) and in its receipt.
    pub fn get_undeleted(&self, p: &Principal, id: &str) -> Result<MemoryDetail> {
        let rec = self.visible(p, id)?;
        if rec.meta.status == AssetStatus::Revoked {
            return Err(Error::NotFound(id.to_string()));
        }
        self.detail(p, &rec)
    }

    /// A visible memory with its versions and related records; a record that is not servable
    /// (revoked, expired, superseded) in metadata only, to its governors.
    pub fn get(&self, p: &Principal, id: &str) -> Result<MemoryDetail> {
        self.detail(p, &self.visible(p, id)?)
    }

    /// [`Self::get`] of a record already found visible.
    fn detail(&self, p: &Principal, rec: &AssetRecord) -> Result<MemoryDetail> {
        let id = rec.meta.id.as_str();
        let memory = self
            .view_as(p, rec)?
            .ok_or_else(|| Error::NotFound(id.to_string()))?;
        let redact = self.readable(p, rec) == Readable::Metadata;
        let versions = self
            .store
            .history(id)?
            .iter()
            .filter_map(|r| MemoryView::of(r, memory.stats.clone()))
            .map(|v| if redact { v.redacted() } else { v })
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
                if r.meta.id != rec.meta.id
                    && p.can_see(&r.meta)
                    && let Some(v) = self.view_as(p, &r)?
                {
                    related.push(v);
                }
            }
        }
        Ok(MemoryDetail {
            memory,
            versions,
            related,
        })
    }

    /// A vote that the memory helped or harmed a task: writers and feedback keys only, one
    /// vote per principal (a later vote replaces the earlier one).
    pub fn feedback(&self, p: &Principal, id: &str, req: &FeedbackRequest) -> Result<MemoryStats> {
        if !(p.has_role(Role::Writer) || p.has_role(Role::Feedback)) {
            return Err(Error::Forbidden {
                message: "voting on a memory needs the writer or feedback role".into(),
                reasons: vec![],
            });
        }
        if let Some(len) = req
            .task
            .as_deref()
            .and_then(|t| registry_core::text::over(t, MAX_FEEDBACK_TASK_CHARS))
        {
            return Err(Error::TooLarge {
                field: "task",
                len,
                limit: MAX_FEEDBACK_TASK_CHARS,
            });
        }
        let rec = self.visible(p, id)?;
        if self.readable(p, &rec) != Readable::Full || !rec.meta.status.is_servable() {
            return Err(Error::NotFound(id.to_string()));
        }
        let helpful = req.outcome == Outcome::Helpful;
        let mut draft = audit(p, AuditAction::MemoryFeedback, &rec.meta).reason(if helpful {
            "helpful"
        } else {
            "harmful"
        });
        // The task is the caller's text: the log keeps its hash only.
        if let Some(t) = &req.task {
            draft = draft.hashes(None, Some(sha256_hex(t)));
        }
        self.store.commit(vec![WriteOp::Audit(draft)])?;
        let voter = format!("{}/{}", p.tenant, p.user);
        Ok(self.stats.vote(id, &voter, helpful, Utc::now())?)
    }

    /// What waits for a reviewer in the principal's scopes: pending records (candidate,
    /// quarantined, conflict_pending) and served records flagged for review (a proposed
    /// retirement). Reviewers and admins only: the queue shows content nobody else may read.
    pub fn review_queue(&self, p: &Principal, limit: usize) -> Result<Vec<MemoryView>> {
        if !p.has_role(Role::Reviewer) {
            return Err(Error::Forbidden {
                message: "the reviewer role is required".into(),
                reasons: vec![],
            });
        }
        let mut recs = self.store.find(&AssetQuery {
            kind: Some(AssetKind::Memory),
            tenant: Some(p.tenant.clone()),
            scope_keys: Some(p.visible_scope_keys()),
            statuses: Some(PENDING.to_vec()),
            heads_only: true,
            limit: Some(limit),
            ..Default::default()
        })?;
        let flagged = self.stats.under_review(limit)?;
        if !flagged.is_empty() {
            recs.extend(self.store.find(&AssetQuery {
                ids: Some(flagged),
                statuses: Some(SERVABLE.to_vec()),
                heads_only: true,
                ..Default::default()
            })?);
        }
        let mut seen = BTreeSet::new();
        let mut out = vec![];
        for r in recs {
            if out.len() >= limit {
                break;
            }
            if r.meta.kind == AssetKind::Memory
                && p.can_see(&r.meta)
                && p.can_review_in(&r.meta.scope)
                && seen.insert(r.meta.id.clone())
            {
                out.push(self.view(&r)?);
            }
        }
        Ok(out)
    }

    fn require_reviewer(p: &Principal, rec: &AssetRecord) -> Result<()> {
        if p.can_review_in(&rec.meta.scope) {
            Ok(())
        } else {
            Err(Error::Forbidden {
                message: "the reviewer role in the memory's scope is required".into(),
                reasons: vec![],
            })
        }
    }

    /// A reviewer confirms a pending record (it becomes `confirmed`, and supersedes the record
    /// it conflicted with), verifies an active one, or keeps one proposed for retirement.
    pub fn confirm(&self, p: &Principal, id: &str) -> Result<MemoryView> {
        let rec = self.visible(p, id)?;
        Self::require_reviewer(p, &rec)?;
        let from = rec.meta.status;
        if !(PENDING.contains(&from) || SERVABLE.contains(&from)) {
            return Err(Error::Transition {
                from: from.as_str().into(),
                action: "confirm".into(),
                allowed: vec![
                    "candidate".into(),
                    "quarantined".into(),
                    "conflict_pending".into(),
                    "active".into(),
                    "confirmed".into(),
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
                // A record the reviewer may not read is not its to supersede.
                if old.meta.id == rec.meta.id || !access::may(p, Action::Read, &old.meta) {
                    continue;
                }
                ops.push(WriteOp::SetStatus {
                    id: old.meta.id.clone(),
                    version: None,
                    status: AssetStatus::Superseded,
                    expect: Some(old.meta.status),
                });
                ops.push(WriteOp::Audit(
                    audit(p, AuditAction::MemorySupersede, &old.meta)
                        .reason(format!("confirmed {id}")),
                ));
                old_ids.push(old.meta.id);
            }
        }
        ops.push(WriteOp::Audit(
            audit(p, AuditAction::MemoryConfirm, &rec.meta)
                .reason(format!("from {}", from.as_str())),
        ));
        let v = self.search.embed_one(&body.embed_text())?;
        self.store.commit(ops)?;
        self.stats.mark_verified(id, Utc::now())?;
        self.stats.set_review(id, None)?;
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

    /// A reviewer rejects a pending record (revoked, never served), or agrees to retire a
    /// served one proposed for retirement.
    pub fn reject(&self, p: &Principal, id: &str) -> Result<MemoryView> {
        let rec = self.visible(p, id)?;
        Self::require_reviewer(p, &rec)?;
        let from = rec.meta.status;
        let flagged = SERVABLE.contains(&from)
            && self
                .stats
                .stats(std::slice::from_ref(&rec.meta.id))?
                .get(id)
                .is_some_and(|s| s.review.is_some());
        if !PENDING.contains(&from) && !flagged {
            return Err(Error::Transition {
                from: from.as_str().into(),
                action: "reject".into(),
                allowed: PENDING.iter().map(|s| s.as_str().to_string()).collect(),
            });
        }
        let action = if flagged {
            AuditAction::MemoryRetire
        } else {
            AuditAction::MemoryReject
        };
        self.store.commit(vec![
            WriteOp::SetStatus {
                id: id.into(),
                version: None,
                status: AssetStatus::Revoked,
                expect: Some(from),
            },
            WriteOp::Audit(audit(p, action, &rec.meta).reason(format!("from {}", from.as_str()))),
        ])?;
        self.stats.set_review(id, None)?;
        self.search.remove(&[id.to_string()])?;
        let rec = self
            .store
            .get(id)?
            .ok_or_else(|| Error::NotFound(id.into()))?;
        self.view(&rec)
    }

    /// Revokes now: no further read, hit or injection; removed from both indexes. The writer
    /// of a record in a scope they may write, or whoever governs its scope.
    pub fn revoke(&self, p: &Principal, id: &str) -> Result<MemoryView> {
        // Whoever may delete a record finds it (its owner, its own superseded raw entry too);
        // anyone else as at every door.
        let rec = match self.store.get(id)? {
            Some(r)
                if r.meta.kind == AssetKind::Memory
                    && (access::may(p, Action::Delete, &r.meta)
                        || access::may(p, Action::See, &r.meta)) =>
            {
                r
            }
            _ => return Err(Error::NotFound(id.to_string())),
        };
        if !access::may(p, Action::Delete, &rec.meta) {
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
                    audit(p, AuditAction::MemoryRevoke, &rec.meta)
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
        // What was revoked, without its content: nobody reads that any more.
        Ok(self.view(&rec)?.redacted())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Readable {
    Full,
    Metadata,
    No,
}

/// Index work after a commit.
#[derive(Default)]
struct IndexWork {
    remove: Vec<AssetId>,
    add: Option<(AssetRecord, MemoryBody)>,
    /// `add` is a new version of a record already in both legs: rewrite its text entry only.
    sync_text: bool,
}

/// Whether two records are read by the same people apart from sensitivity (same purposes, same
/// ACL): the write gate's merge and the consolidation job join only such records, so that
/// neither widens who reads a record's text, evidence or entities.
pub(crate) fn same_audience(a: &AssetMeta, b: &AssetMeta) -> bool {
    a.purposes == b.purposes && a.acl == b.acl
}

#[cfg(test)]
mod tests {
    use super::evidence_asset_id;

    /// Evidence names a registry asset by its id, with or without a kind and an anchor;
    /// anything else (a URL, a message id, a braced or unhyphenated UUID) names nothing.
    #[test]
    fn evidence_names_an_asset_by_its_id() {
        let id = "0193a6f2-7c1e-7d44-9a51-0f3b2c1d4e5f";
        for item in [
            id.to_string(),
            format!("task:{id}"),
            format!("task:{id}#12"),
            format!("artifact:{id}"),
            format!(" {id} "),
        ] {
            assert_eq!(evidence_asset_id(&item), Some(id), "{item}");
        }
        for item in [
            "https://wiki.example/export",
            "msg-1182",
            "task:",
            "Task:0193a6f2-7c1e-7d44-9a51-0f3b2c1d4e5f",
            "{0193a6f2-7c1e-7d44-9a51-0f3b2c1d4e5f}",
            "0193a6f27c1e7d449a510f3b2c1d4e5f",
        ] {
            assert_eq!(evidence_asset_id(item), None, "{item}");
        }
    }
}
