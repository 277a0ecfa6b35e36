//! Maintenance jobs: one runner, one table of runs (`job_runs`, migration 0002).
//!
//! `run_job(state, name)` records the start, runs the job, and records the end with its counts
//! or error. A run killed midway stays `running` in the table; every job is written so that
//! rerunning it finishes what the dead run left (see `registry_memory::jobs`). Other jobs
//! (purge, retention, compact) plug in at [`run_named`].

use std::time::Duration;

use chrono::{DateTime, Utc};
use registry_core::CoreError;
use registry_memory::MemoryService;
use rusqlite::{OptionalExtension, params};
use serde::Serialize;

use crate::state::AppState;

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

#[derive(Debug, Clone, Serialize)]
pub struct JobReport {
    pub run_id: i64,
    pub name: String,
    pub started_at: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
    /// `ok` or `failed`.
    pub outcome: String,
    pub counts: serde_json::Value,
    pub error: Option<String>,
}

/// The memory service over the state's store, indexes and model.
pub fn memory_service(state: &AppState) -> MemoryService {
    MemoryService::new(
        state.store.clone(),
        state.search.clone(),
        state.stats.clone(),
    )
    .with_locks(state.memory_locks.clone())
}

/// Summaries that lose a parent to a deletion are rebuilt by their domain: consolidated
/// memories by the memory service; anything else is deleted with its last parent.
impl registry_core::deletion::Regenerator for AppState {
    fn regenerate(
        &self,
        child: &registry_core::asset::AssetRecord,
        remaining: &[registry_core::asset::AssetRecord],
    ) -> registry_core::CoreResult<Option<registry_core::asset::AssetId>> {
        registry_core::deletion::Regenerator::regenerate(&memory_service(self), child, remaining)
    }
}

fn ts(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

fn be(e: rusqlite::Error) -> CoreError {
    CoreError::backend("sqlite", e)
}

/// Start time of the last run of `name` that finished `ok`.
pub fn last_ok_start(state: &AppState, name: &str) -> Result<Option<DateTime<Utc>>, CoreError> {
    let s: Option<String> = state.store.write(|tx| {
        tx.query_row(
            "SELECT started_at FROM job_runs WHERE name = ?1 AND outcome = 'ok'
             ORDER BY started_at DESC LIMIT 1",
            [name],
            |r| r.get(0),
        )
        .optional()
        .map_err(be)
    })?;
    Ok(s.and_then(|s| DateTime::parse_from_rfc3339(&s).ok())
        .map(|d| d.with_timezone(&Utc)))
}

fn run_named(state: &AppState, name: &str) -> anyhow::Result<serde_json::Value> {
    let svc = memory_service(state);
    match name {
        "consolidate" => {
            let since = last_ok_start(state, name)?;
            Ok(serde_json::to_value(svc.consolidate(since)?)?)
        }
        "decay" => Ok(serde_json::to_value(svc.decay(Utc::now())?)?),
        "purge" => purge(state),
        "reindex" => reindex(state),
        "retention" => retention(state),
        "checkpoint" => {
            let cp = crate::audit::checkpoint(state.store.as_ref(), &state.config)?;
            Ok(
                serde_json::json!({ "checkpoint": cp.map(|c| serde_json::json!({"seq": c.seq, "hash": c.hash})) }),
            )
        }
        "compact" => {
            use registry_core::retrieval::{TextIndex, VectorIndex};
            state.text.compact()?;
            state.vectors.compact()?;
            state.store.checkpoint()?;
            Ok(serde_json::json!({ "compacted": ["text_index", "vector_index", "sqlite_wal"] }))
        }
        other => anyhow::bail!("unknown job {other:?} (known: {})", JOBS.join(", ")),
    }
}

/// Re-embeds every entry whose vector another model made (the model tag is stored beside
/// each vector), memories and knowledge chunks alike. Idempotent: a rerun finds nothing.
fn reindex(state: &AppState) -> anyhow::Result<serde_json::Value> {
    use registry_core::asset::AssetKind;
    use registry_core::retrieval::{Embedder, VectorIndex};
    use registry_core::store::{AssetQuery, AssetStore};
    let tag = state.embedder.info().tag();
    let mut memories = 0;
    let mut chunks = 0;
    let mut other = 0;
    loop {
        let stale = state.vectors.ids_not_made_by(&tag, 512)?;
        if stale.is_empty() {
            break;
        }
        let recs = state.store.find(&AssetQuery {
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
        let before = (memories, chunks);
        memories += memory_service(state).reindex(&mem)?;
        if !chunk_ids.is_empty() {
            chunks += crate::routes::knowledge::service(state).reindex_only(Some(chunk_ids))?;
        }
        // Vectors with no servable asset behind them (revoked, superseded) are dropped
        // rather than re-embedded, so the loop always makes progress.
        let left = state.vectors.ids_not_made_by(&tag, 512)?;
        let stuck: Vec<String> = left.into_iter().filter(|id| stale.contains(id)).collect();
        if !stuck.is_empty() {
            other += stuck.len();
            state.vectors.delete(&stuck)?;
        }
        if before == (memories, chunks) && stuck.is_empty() {
            break;
        }
    }
    Ok(serde_json::json!({
        "model": tag,
        "memories": memories,
        "chunks": chunks,
        "dropped_unservable": other,
    }))
}

/// Finishes every deletion a crash interrupted (each receipt resumes from its last stage).
fn purge(state: &AppState) -> anyhow::Result<serde_json::Value> {
    let done = crate::routes::deletion::resume_unfinished(state)
        .map_err(|e| anyhow::anyhow!("{}", e.message))?;
    Ok(serde_json::json!({
        "receipts_completed": done.len(),
        "receipts": done.iter().map(|r| r.id.clone()).collect::<Vec<_>>(),
    }))
}

/// Deletes, down to the purged level, every asset whose retention has passed: its own
/// `retain_until`, or the age its kind (memory: its class) is kept for (`config.retention`).
/// Freshness (`expires_at`) purges nothing: a document past it is kept, out of answers, until
/// its retention ends. One receipt per tenant.
fn retention(state: &AppState) -> anyhow::Result<serde_json::Value> {
    use registry_core::asset::AssetKind;
    use registry_core::deletion::DeletionLevel;
    use registry_core::store::{AssetQuery, AssetStore};
    let now = Utc::now();
    let mut due = state.store.find(&AssetQuery {
        retain_before: Some(now),
        heads_only: true,
        ..Default::default()
    })?;
    let r = &state.config.retention;
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
        let old = state.store.find(&AssetQuery {
            kind: Some(kind),
            created_before: Some(now - chrono::Duration::days(i64::from(days))),
            heads_only: true,
            ..Default::default()
        })?;
        due.extend(old.into_iter().filter(|a| {
            class.is_none_or(|c| a.body.get("class").and_then(|v| v.as_str()) == Some(c))
        }));
    }
    let mut by_tenant: std::collections::BTreeMap<Option<String>, Vec<String>> = Default::default();
    let mut seen = std::collections::BTreeSet::new();
    for r in due {
        if seen.insert(r.meta.id.clone()) {
            by_tenant
                .entry(r.meta.scope.tenant.clone())
                .or_default()
                .push(r.meta.id);
        }
    }
    let mut receipts = vec![];
    let mut assets = 0;
    for (tenant, ids) in by_tenant {
        let engine = crate::routes::deletion::engine(state, state.regenerator());
        let r = engine.delete(
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

/// Runs one job and records the run. Unknown names fail before anything is recorded.
pub fn run_job(state: &AppState, name: &str) -> anyhow::Result<JobReport> {
    if !JOBS.contains(&name) {
        anyhow::bail!("unknown job {name:?} (known: {})", JOBS.join(", "));
    }
    let started_at = Utc::now();
    let run_id = state.store.write(|tx| {
        tx.execute(
            "INSERT INTO job_runs (name, started_at, outcome) VALUES (?1, ?2, 'running')",
            params![name, ts(&started_at)],
        )
        .map_err(be)?;
        Ok(tx.last_insert_rowid())
    })?;
    let result = run_named(state, name);
    let finished_at = Utc::now();
    let (outcome, counts, error) = match &result {
        Ok(c) => ("ok", c.clone(), None),
        Err(e) => ("failed", serde_json::Value::Null, Some(format!("{e:#}"))),
    };
    state.store.write(|tx| {
        tx.execute(
            "UPDATE job_runs SET finished_at = ?2, outcome = ?3, counts = ?4, error = ?5 WHERE id = ?1",
            params![run_id, ts(&finished_at), outcome, counts.to_string(), error],
        )
        .map_err(be)?;
        Ok(())
    })?;
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

/// Starts one periodic task per job with a non-zero interval (`config.jobs`). Runs of one job
/// never overlap: each task awaits its run before sleeping again.
pub fn spawn_scheduler(state: &AppState) -> Vec<tokio::task::JoinHandle<()>> {
    let cfg = &state.config.jobs;
    if !cfg.enabled {
        return vec![];
    }
    let mut handles = vec![];
    for (name, secs) in [
        ("consolidate", cfg.consolidate_interval_secs),
        ("decay", cfg.decay_interval_secs),
        ("retention", cfg.retention_interval_secs),
        ("purge", cfg.purge_interval_secs),
        ("checkpoint", cfg.audit_checkpoint_interval_secs),
    ] {
        if secs == 0 {
            continue;
        }
        let st = state.clone();
        handles.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(secs));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                let s = st.clone();
                match tokio::task::spawn_blocking(move || run_job(&s, name)).await {
                    Ok(Ok(r)) => tracing::info!(job = name, outcome = %r.outcome, counts = %r.counts, "job finished"),
                    Ok(Err(e)) => tracing::error!(job = name, error = %e, "job failed"),
                    Err(e) => tracing::error!(job = name, error = %e, "job panicked"),
                }
            }
        }));
    }
    handles
}
