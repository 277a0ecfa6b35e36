//! Maintenance jobs: one runner, one record of runs (the store's `JobRunStore`).
//!
//! [`Services::run_job`] records the start, runs the job, and records the end with its counts
//! or error. A run killed midway stays `running`; every job is written so that rerunning it
//! finishes what the dead run left (see `registry_memory::jobs`, the deletion engine's
//! receipts).

use chrono::{DateTime, Utc};
use registry_core::asset::{AssetKind, AssetStatus};
use registry_core::deletion::DeletionLevel;
use registry_core::store::{AssetQuery, PAGE, pages};
use registry_core::{FieldError, FieldReason};
use serde::{Deserialize, Serialize};

use crate::{Error, Result, Services};

/// Jobs this runner knows.
pub const JOBS: &[&str] = &[
    "consolidate",
    "decay",
    "purge",
    "retention",
    "reindex",
    "compact",
    "checkpoint",
];

/// What the retention job purges besides assets whose own `retain_until` has passed: assets of
/// a kind (memory: of a class) older than these many days since they were created. 0 keeps
/// them until they are deleted. Freshness (`expires_at`) never purges anything.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct RetentionPolicy {
    pub memory_working_days: u32,
    pub memory_episodic_days: u32,
    pub memory_semantic_days: u32,
    pub memory_procedural_days: u32,
    pub document_days: u32,
    /// Tasks closed (done or failed) this many days ago are purged with their events,
    /// artifacts and summaries.
    pub task_days: u32,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobReport {
    pub run_id: i64,
    pub name: String,
    pub started_at: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
    /// `ok` or `failed`.
    pub outcome: String,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub counts: serde_json::Value,
    pub error: Option<String>,
}

fn unknown(name: &str) -> Error {
    Error::validation(format!("unknown job {name:?} (known: {})", JOBS.join(", ")))
        .with_details(FieldError::new("name").reason(FieldReason::Unknown))
}

fn json<T: Serialize>(v: T) -> Result<serde_json::Value> {
    serde_json::to_value(v).map_err(Error::internal)
}

/// Jobs that act on the shared store rather than on this node's indexes: on a store several
/// nodes share, one node at a time runs each (see [`Services::run_scheduled_job`]).
pub const SHARED_JOBS: &[&str] = &["consolidate", "decay", "purge", "retention", "checkpoint"];

impl Services {
    /// Runs a job on its schedule. On a store several nodes share, a job of [`SHARED_JOBS`]
    /// runs once across nodes: under the store's lock of that job, and only when no node
    /// started a run of it within the last `interval` (less a tenth, for clock jitter).
    /// `None`: another node holds it or ran it.
    pub fn run_scheduled_job(
        &self,
        name: &str,
        interval: std::time::Duration,
    ) -> Result<Option<JobReport>> {
        let Some(cluster) = self.backends.store.cluster() else {
            return self.run_job(name).map(Some);
        };
        if !SHARED_JOBS.contains(&name) {
            return self.run_job(name).map(Some);
        }
        let Some(_lock) = cluster.try_lock_job(name)? else {
            return Ok(None);
        };
        let recent = chrono::Duration::from_std(interval.mul_f64(0.9)).unwrap_or_default();
        if let Some(last) = self.backends.store.recent_runs(Some(name), 1)?.first()
            && Utc::now() - last.started_at < recent
        {
            return Ok(None);
        }
        self.run_job(name).map(Some)
    }

    /// Runs one job and records the run. Unknown names fail before anything is recorded.
    pub fn run_job(&self, name: &str) -> Result<JobReport> {
        if !JOBS.contains(&name) {
            return Err(unknown(name));
        }
        let runs = &self.backends.store;
        let started_at = Utc::now();
        let run_id = runs.start_run(name, started_at)?;
        let result = self.run_named(name);
        let finished_at = Utc::now();
        let (outcome, counts, error) = match &result {
            Ok(c) => ("ok", c.clone(), None),
            Err(e) => ("failed", serde_json::Value::Null, Some(e.to_string())),
        };
        runs.finish_run(run_id, finished_at, outcome, &counts, error.as_deref())?;
        Ok(JobReport {
            run_id,
            name: name.to_string(),
            started_at,
            finished_at,
            outcome: outcome.to_string(),
            counts,
            error,
        })
    }

    fn run_named(&self, name: &str) -> Result<serde_json::Value> {
        match name {
            "consolidate" => {
                let since = self.backends.store.last_ok_start(name)?;
                json(self.memory.consolidate(since)?)
            }
            "decay" => json(self.memory.decay(Utc::now())?),
            "purge" => self.purge(),
            "reindex" => self.reindex(),
            "retention" => self.retention(),
            "checkpoint" => {
                let cp = self.audit.checkpoint()?;
                Ok(serde_json::json!({
                    "checkpoint": cp.map(|c| serde_json::json!({"seq": c.seq, "hash": c.hash}))
                }))
            }
            "compact" => {
                self.backends.text.compact()?;
                self.backends.vectors.compact()?;
                let complete = self.backends.store.checkpoint()?;
                Ok(serde_json::json!({
                    "compacted": ["text_index", "vector_index", "store_log"],
                    "store_checkpoint_complete": complete,
                }))
            }
            other => Err(unknown(other)),
        }
    }

    /// Whether any vector in the index was made by a model other than the embedder's (the
    /// configured model changed since it was written).
    pub fn has_foreign_vectors(&self) -> Result<bool> {
        let b = &self.backends;
        Ok(!b
            .vectors
            .ids_not_made_by(&b.embedder.info().tag(), 1)?
            .is_empty())
    }

    /// Whether the vector index is empty while the store holds a memory or chunk it should
    /// index (a new Qdrant collection after a change of model, a vector directory lost): the
    /// server then fills it from the store ([`Self::rebuild_indexes`]) before serving.
    pub fn vectors_missing(&self) -> Result<bool> {
        let b = &self.backends;
        if !b.vectors.is_empty()? {
            return Ok(false);
        }
        for kind in [AssetKind::Memory, AssetKind::Chunk] {
            let any = b.store.find(&AssetQuery {
                kind: Some(kind),
                statuses: Some(vec![AssetStatus::Active, AssetStatus::Confirmed]),
                heads_only: true,
                limit: Some(1),
                ..Default::default()
            })?;
            if !any.is_empty() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Re-embeds every entry whose vector another model made (the model tag is stored beside
    /// each vector): memories, knowledge chunks and skill discover entries alike. Idempotent: a rerun finds nothing.
    fn reindex(&self) -> Result<serde_json::Value> {
        let b = &self.backends;
        let tag = b.embedder.info().tag();
        let (mut memories, mut chunks, mut skills, mut other) = (0, 0, 0, 0);
        loop {
            let stale = b.vectors.ids_not_made_by(&tag, 512)?;
            if stale.is_empty() {
                break;
            }
            let recs = b.store.find(&AssetQuery {
                ids: Some(stale.clone()),
                heads_only: true,
                ..Default::default()
            })?;
            let mem: Vec<_> = recs
                .iter()
                .filter(|r| r.meta.kind == AssetKind::Memory)
                .cloned()
                .collect();
            let chunk_ids: Vec<String> = recs
                .iter()
                .filter(|r| r.meta.kind == AssetKind::Chunk)
                .map(|r| r.meta.id.clone())
                .collect();
            let before = (memories, chunks, skills);
            memories += self.memory.reindex(&mem)?;
            if !chunk_ids.is_empty() {
                chunks += self.knowledge.reindex_only(Some(chunk_ids))?;
            }
            // Skill discover entries: every current one is re-embedded at once (a few per
            // tenant); a pointer with no current release has its vector dropped.
            if recs.iter().any(|r| r.meta.kind == AssetKind::SkillVersion) {
                skills += self.skills.reindex()?;
            }
            // Vectors with no servable asset behind them (revoked, superseded) are dropped
            // rather than re-embedded, so the loop always makes progress.
            let left = b.vectors.ids_not_made_by(&tag, 512)?;
            let stuck: Vec<String> = left.into_iter().filter(|id| stale.contains(id)).collect();
            if !stuck.is_empty() {
                other += stuck.len();
                b.vectors.delete(&stuck)?;
            }
            if before == (memories, chunks, skills) && stuck.is_empty() {
                break;
            }
        }
        let (missing_memories, missing_chunks) = self.embed_missing_vectors()?;
        Ok(serde_json::json!({
            "model": tag,
            "memories": memories,
            "chunks": chunks,
            "skills": skills,
            "dropped_unservable": other,
            "missing_memories": missing_memories,
            "missing_chunks": missing_chunks,
        }))
    }

    /// Embeds the servable memories and chunks that have no vector (an index write that failed
    /// after its store commit, or a shared index that missed one): the store is walked in pages
    /// of 1,000 and the index asked which of each page it lacks. Returns the counts embedded.
    fn embed_missing_vectors(&self) -> Result<(usize, usize)> {
        let b = &self.backends;
        let mut counts = (0, 0);
        for kind in [AssetKind::Memory, AssetKind::Chunk] {
            let query = AssetQuery {
                kind: Some(kind),
                statuses: Some(vec![
                    AssetStatus::Active,
                    AssetStatus::Confirmed,
                    AssetStatus::Deprecated,
                ]),
                heads_only: true,
                ..Default::default()
            };
            for page in pages(&*b.store, query) {
                let page = page?;
                let ids: Vec<String> = page.iter().map(|r| r.meta.id.clone()).collect();
                let missing = b.vectors.missing(&ids)?;
                if !missing.is_empty() {
                    match kind {
                        AssetKind::Memory => {
                            let recs: Vec<_> = page
                                .iter()
                                .filter(|r| missing.contains(&r.meta.id))
                                .cloned()
                                .collect();
                            counts.0 += self.memory.reindex(&recs)?;
                        }
                        _ => counts.1 += self.knowledge.reindex_only(Some(missing))?,
                    }
                }
                if page.len() < PAGE {
                    break;
                }
            }
        }
        Ok(counts)
    }

    /// Finishes every deletion a crash interrupted (each receipt resumes from its last stage).
    fn purge(&self) -> Result<serde_json::Value> {
        let done = self.deletions.resume_unfinished()?;
        Ok(serde_json::json!({
            "receipts_completed": done.len(),
            "receipts": done.iter().map(|r| r.id.clone()).collect::<Vec<_>>(),
        }))
    }

    /// Deletes, down to the purged level, every asset whose retention has passed: its own
    /// `retain_until`, or the age its kind (memory: its class) is kept for. Freshness
    /// (`expires_at`) purges nothing: a document past it is kept, out of answers, until its
    /// retention ends. One receipt per tenant.
    fn retention(&self) -> Result<serde_json::Value> {
        let store = &self.backends.store;
        let now = Utc::now();
        let mut due = store.find(&AssetQuery {
            retain_before: Some(now),
            heads_only: true,
            ..Default::default()
        })?;
        let r = &self.options.retention;
        let rules = [
            (AssetKind::Memory, Some("working"), r.memory_working_days),
            (AssetKind::Memory, Some("episodic"), r.memory_episodic_days),
            (AssetKind::Memory, Some("semantic"), r.memory_semantic_days),
            (
                AssetKind::Memory,
                Some("procedural"),
                r.memory_procedural_days,
            ),
            (AssetKind::Document, None, r.document_days),
        ];
        for (kind, class, days) in rules {
            if days == 0 {
                continue;
            }
            let old = store.find(&AssetQuery {
                kind: Some(kind),
                created_before: Some(now - chrono::Duration::days(i64::from(days))),
                heads_only: true,
                ..Default::default()
            })?;
            due.extend(old.into_iter().filter(|a| {
                class.is_none_or(|c| a.body.get("class").and_then(|v| v.as_str()) == Some(c))
            }));
        }
        let mut by_tenant: std::collections::BTreeMap<Option<String>, Vec<String>> =
            Default::default();
        let mut seen = std::collections::BTreeSet::new();
        for r in due {
            if seen.insert(r.meta.id.clone()) {
                by_tenant
                    .entry(r.meta.scope.tenant.clone())
                    .or_default()
                    .push(r.meta.id);
            }
        }
        let task_days = self.options.retention.task_days;
        if task_days > 0 {
            let cutoff = now - chrono::Duration::days(i64::from(task_days));
            for (tenant, id) in self.tasks.closed_before(cutoff, usize::MAX)? {
                if seen.insert(id.clone()) {
                    by_tenant.entry(tenant).or_default().push(id);
                }
            }
        }
        let mut receipts = vec![];
        let mut assets = 0;
        for (tenant, ids) in by_tenant {
            let r = self.deletions.delete_for_tenant(
                tenant.as_deref(),
                "retention",
                "retention period expired",
                &ids,
                DeletionLevel::Purged,
            )?;
            assets += r.counts.assets;
            receipts.push(r.id);
        }
        Ok(serde_json::json!({ "assets_purged": assets, "receipts": receipts }))
    }
}
