//! The operational tables behind the core's traits: job runs (`job_runs`), context manifests
//! (`context_manifests`), usage counters and votes (`memory_stats`, `memory_votes`), all from
//! migration 0004, and the `Store` supertrait. Semantics are the SQLite store's (`ops.rs`
//! there), checked by the same contract suite.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use postgres::Row;
use postgres::types::Json;
use registry_core::asset::AssetId;
use registry_core::store::{JobRun, JobRunStore, ManifestStore, StoredManifest, refuse_nul};
use registry_core::usage::{UsageStats, UsageStore};
use registry_core::{CoreError, CoreResult};

use crate::store::{PgStore, micros, nul, pg};

fn clamp(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn row_to_run(r: &Row) -> CoreResult<JobRun> {
    let counts: Option<serde_json::Value> = r.try_get(5).map_err(pg)?;
    Ok(JobRun {
        id: r.try_get(0).map_err(pg)?,
        name: r.try_get(1).map_err(pg)?,
        started_at: r.try_get(2).map_err(pg)?,
        finished_at: r.try_get(3).map_err(pg)?,
        outcome: r.try_get(4).map_err(pg)?,
        counts: counts.unwrap_or(serde_json::Value::Null),
        error: r.try_get(6).map_err(pg)?,
    })
}

impl JobRunStore for PgStore {
    fn start_run(&self, name: &str, at: DateTime<Utc>) -> CoreResult<i64> {
        crate::pool::off_runtime(|| {
            refuse_nul([("job.name", Some(name))])?;
            self.write(|db| {
                Ok(db
                    .query_one(
                        "INSERT INTO job_runs (name, started_at, outcome) VALUES ($1, $2, 'running')
                         RETURNING id",
                        &[&name, &micros(&at)],
                    )
                    .map_err(pg)?
                    .get(0))
            })
        })
    }

    fn finish_run(
        &self,
        id: i64,
        at: DateTime<Utc>,
        outcome: &str,
        counts: &serde_json::Value,
        error: Option<&str>,
    ) -> CoreResult<()> {
        crate::pool::off_runtime(|| {
            refuse_nul([("job.outcome", Some(outcome)), ("job.error", error)])?;
            self.write(|db| {
                db.execute(
                    "UPDATE job_runs SET finished_at = $2, outcome = $3, counts = $4, error = $5
                      WHERE id = $1",
                    &[&id, &micros(&at), &outcome, counts, &error],
                )
                .map_err(pg)?;
                Ok(())
            })
        })
    }

    fn last_ok_start(&self, name: &str) -> CoreResult<Option<DateTime<Utc>>> {
        crate::pool::off_runtime(|| {
            if nul(name) {
                return Ok(None);
            }
            self.read(|db| {
                Ok(db
                    .query_opt(
                        "SELECT started_at FROM job_runs WHERE name = $1 AND outcome = 'ok'
                          ORDER BY started_at DESC LIMIT 1",
                        &[&name],
                    )
                    .map_err(pg)?
                    .map(|r| r.get(0)))
            })
        })
    }

    fn recent_runs(&self, name: Option<&str>, limit: usize) -> CoreResult<Vec<JobRun>> {
        crate::pool::off_runtime(|| {
            if name.is_some_and(nul) {
                return Ok(vec![]);
            }
            self.read(|db| {
                db.query(
                    "SELECT id, name, started_at, finished_at, outcome, counts, error FROM job_runs
                      WHERE $1::text IS NULL OR name = $1 ORDER BY id DESC LIMIT $2",
                    &[&name, &clamp(limit)],
                )
                .map_err(pg)?
                .iter()
                .map(row_to_run)
                .collect()
            })
        })
    }
}

fn row_to_manifest(r: &Row) -> CoreResult<StoredManifest> {
    Ok(StoredManifest {
        id: r.try_get(0).map_err(pg)?,
        tenant: r.try_get(1).map_err(pg)?,
        principal: r.try_get(2).map_err(pg)?,
        created_at: r.try_get(3).map_err(pg)?,
        manifest: r.try_get(4).map_err(pg)?,
        request: r
            .try_get::<_, Option<Json<serde_json::Value>>>(5)
            .map_err(pg)?
            .map(|j| j.0),
        assets: vec![],
    })
}

/// A duplicate manifest id is a conflict, as in SQLite (a primary-key violation).
fn manifest_conflict(e: postgres::Error) -> CoreError {
    if e.code() == Some(&postgres::error::SqlState::UNIQUE_VIOLATION) {
        CoreError::Conflict(crate::describe(&e))
    } else {
        pg(e)
    }
}

impl ManifestStore for PgStore {
    fn put_manifest(&self, m: &StoredManifest) -> CoreResult<()> {
        crate::pool::off_runtime(|| {
            refuse_nul([
                ("manifest.id", Some(m.id.as_str())),
                ("manifest.tenant", Some(m.tenant.as_str())),
                ("manifest.principal", Some(m.principal.as_str())),
            ])?;
            self.write(|db| {
                db.execute(
                    "INSERT INTO context_manifests
                     (id, tenant, principal, created_at, manifest, request)
                     VALUES ($1, $2, $3, $4, $5, $6)",
                    &[
                        &m.id,
                        &m.tenant,
                        &m.principal,
                        &micros(&m.created_at),
                        &Json(&m.manifest),
                        &m.request.as_ref().map(Json),
                    ],
                )
                .map_err(manifest_conflict)?;
                if !m.assets.is_empty() {
                    let assets: Vec<&str> = m
                        .assets
                        .iter()
                        .map(String::as_str)
                        .filter(|a| !nul(a))
                        .collect();
                    db.execute(
                        "INSERT INTO manifest_assets
                         (asset_id, manifest_id, tenant, principal, created_at)
                         SELECT DISTINCT a, $2::text, $3::text, $4::text, $5::timestamptz
                         FROM unnest($1::text[]) AS a
                         ON CONFLICT DO NOTHING",
                        &[
                            &assets,
                            &m.id,
                            &m.tenant,
                            &m.principal,
                            &micros(&m.created_at),
                        ],
                    )
                    .map_err(pg)?;
                }
                Ok(())
            })
        })
    }

    fn get_manifest(&self, id: &str) -> CoreResult<Option<StoredManifest>> {
        crate::pool::off_runtime(|| {
            if nul(id) {
                return Ok(None);
            }
            self.read(|db| {
                db.query_opt(
                    "SELECT id, tenant, principal, created_at, manifest, request
                       FROM context_manifests WHERE id = $1",
                    &[&id],
                )
                .map_err(pg)?
                .as_ref()
                .map(row_to_manifest)
                .transpose()
            })
        })
    }

    fn list_manifests(
        &self,
        tenant: &str,
        principal: Option<&str>,
        limit: usize,
    ) -> CoreResult<Vec<StoredManifest>> {
        crate::pool::off_runtime(|| {
            if nul(tenant) || principal.is_some_and(nul) {
                return Ok(vec![]);
            }
            self.read(|db| {
                db.query(
                    "SELECT id, tenant, principal, created_at, manifest, request
                       FROM context_manifests WHERE tenant = $1 AND ($2::text IS NULL OR principal = $2)
                      ORDER BY created_at DESC, id DESC LIMIT $3",
                    &[&tenant, &principal, &clamp(limit)],
                )
                .map_err(pg)?
                .iter()
                .map(row_to_manifest)
                .collect()
            })
        })
    }

    fn count_manifests(&self, tenant: &str, principal: &str) -> CoreResult<usize> {
        crate::pool::off_runtime(|| {
            if nul(tenant) || nul(principal) {
                return Ok(0);
            }
            self.read(|db| {
                let n: i64 = db
                    .query_one(
                        "SELECT count(*) FROM context_manifests WHERE tenant = $1 AND principal = $2",
                        &[&tenant, &principal],
                    )
                    .map_err(pg)?
                    .get(0);
                Ok(n as usize)
            })
        })
    }

    fn erase_manifests(&self, tenant: &str, principal: &str) -> CoreResult<usize> {
        crate::pool::off_runtime(|| {
            if nul(tenant) || nul(principal) {
                return Ok(0);
            }
            self.write(|db| {
                Ok(db
                    .execute(
                        "DELETE FROM context_manifests WHERE tenant = $1 AND principal = $2",
                        &[&tenant, &principal],
                    )
                    .map_err(pg)? as usize)
            })
        })
    }

    fn manifests_with_asset(
        &self,
        tenant: &str,
        principal: Option<&str>,
        asset: &str,
        limit: usize,
    ) -> CoreResult<(usize, Vec<StoredManifest>)> {
        crate::pool::off_runtime(|| {
            if nul(tenant) || nul(asset) || principal.is_some_and(nul) {
                return Ok((0, vec![]));
            }
            self.read(|db| {
                let total: i64 = db
                    .query_one(
                        "SELECT count(*) FROM manifest_assets
                          WHERE asset_id = $1 AND tenant = $2
                            AND ($3::text IS NULL OR principal = $3)",
                        &[&asset, &tenant, &principal],
                    )
                    .map_err(pg)?
                    .get(0);
                let rows = db
                    .query(
                        "SELECT m.id, m.tenant, m.principal, m.created_at, m.manifest, m.request
                           FROM manifest_assets a JOIN context_manifests m ON m.id = a.manifest_id
                          WHERE a.asset_id = $1 AND a.tenant = $2
                            AND ($3::text IS NULL OR a.principal = $3)
                          ORDER BY a.created_at DESC, a.manifest_id DESC LIMIT $4",
                        &[&asset, &tenant, &principal, &clamp(limit)],
                    )
                    .map_err(pg)?
                    .iter()
                    .map(row_to_manifest)
                    .collect::<CoreResult<Vec<_>>>()?;
                Ok((total as usize, rows))
            })
        })
    }
}

const STATS_COLS: &str =
    "id, usage_count, last_retrieved, last_verified, helpful, harmful, decay_weight, review";

fn row_to_stats(r: &Row) -> CoreResult<(AssetId, UsageStats)> {
    Ok((
        r.try_get(0).map_err(pg)?,
        UsageStats {
            usage_count: r.try_get::<_, i64>(1).map_err(pg)? as u64,
            last_retrieved: r.try_get(2).map_err(pg)?,
            last_verified: r.try_get(3).map_err(pg)?,
            helpful: r.try_get::<_, i64>(4).map_err(pg)? as u64,
            harmful: r.try_get::<_, i64>(5).map_err(pg)? as u64,
            decay_weight: r.try_get::<_, f64>(6).map_err(pg)? as f32,
            review: r.try_get(7).map_err(pg)?,
        },
    ))
}

impl UsageStore for PgStore {
    fn stats(&self, ids: &[AssetId]) -> CoreResult<HashMap<AssetId, UsageStats>> {
        crate::pool::off_runtime(|| {
            let ids: Vec<&str> = ids.iter().map(String::as_str).filter(|i| !nul(i)).collect();
            if ids.is_empty() {
                return Ok(HashMap::new());
            }
            let sql = format!("SELECT {STATS_COLS} FROM memory_stats WHERE id = ANY($1)");
            self.read(|db| {
                db.query(&sql, &[&ids])
                    .map_err(pg)?
                    .iter()
                    .map(row_to_stats)
                    .collect()
            })
        })
    }

    fn record_retrievals(&self, ids: &[AssetId], at: DateTime<Utc>) -> CoreResult<()> {
        crate::pool::off_runtime(|| {
            self.retrievals
                .lock()
                .extend(ids.iter().filter(|i| !nul(i)).map(|id| (id.clone(), at)));
            Ok(())
        })
    }

    fn usage_pending(&self) -> bool {
        !self.retrievals.lock().is_empty()
    }

    fn flush_usage(&self) -> CoreResult<bool> {
        crate::pool::off_runtime(|| {
            let batch = std::mem::take(&mut *self.retrievals.lock());
            if batch.is_empty() {
                return Ok(false);
            }
            // One row per id: the count of its retrievals and the latest time.
            let mut per_id: HashMap<&str, (i64, DateTime<Utc>)> = HashMap::new();
            for (id, at) in &batch {
                let e = per_id.entry(id.as_str()).or_insert((0, *at));
                e.0 += 1;
                e.1 = e.1.max(*at);
            }
            let mut ids = vec![];
            let mut counts = vec![];
            let mut times = vec![];
            for (id, (n, at)) in per_id {
                ids.push(id);
                counts.push(n);
                times.push(micros(&at));
            }
            let res = self.write(|db| {
                db.execute(
                    "INSERT INTO memory_stats (id, usage_count, last_retrieved)
                     SELECT * FROM unnest($1::text[], $2::bigint[], $3::timestamptz[])
                     ON CONFLICT (id) DO UPDATE
                        SET usage_count = memory_stats.usage_count + EXCLUDED.usage_count,
                            last_retrieved = GREATEST(memory_stats.last_retrieved,
                                                      EXCLUDED.last_retrieved)",
                    &[&ids, &counts, &times],
                )
                .map_err(pg)?;
                Ok(())
            });
            if res.is_err() {
                // Kept for the next flush, ahead of anything recorded since.
                let mut buf = self.retrievals.lock();
                let newer = std::mem::replace(&mut *buf, batch);
                buf.extend(newer);
            }
            res.map(|()| true)
        })
    }

    fn vote(
        &self,
        id: &str,
        voter: &str,
        helpful: bool,
        at: DateTime<Utc>,
    ) -> CoreResult<UsageStats> {
        crate::pool::off_runtime(|| {
            refuse_nul([("vote.id", Some(id)), ("vote.voter", Some(voter))])?;
            let sql = format!("SELECT {STATS_COLS} FROM memory_stats WHERE id = $1");
            self.write(|db| {
                db.execute(
                    "INSERT INTO memory_votes (id, voter, helpful, at) VALUES ($1, $2, $3, $4)
                     ON CONFLICT (id, voter) DO UPDATE SET helpful = $3, at = $4",
                    &[&id, &voter, &helpful, &micros(&at)],
                )
                .map_err(pg)?;
                db.execute(
                    "INSERT INTO memory_stats (id, helpful, harmful)
                     SELECT $1, count(*) FILTER (WHERE helpful), count(*) FILTER (WHERE NOT helpful)
                       FROM memory_votes WHERE id = $1
                     ON CONFLICT (id) DO UPDATE
                        SET helpful = EXCLUDED.helpful, harmful = EXCLUDED.harmful",
                    &[&id],
                )
                .map_err(pg)?;
                Ok(db
                    .query_opt(&sql, &[&id])
                    .map_err(pg)?
                    .as_ref()
                    .map(row_to_stats)
                    .transpose()?
                    .map(|(_, s)| s)
                    .unwrap_or_default())
            })
        })
    }

    fn mark_verified(&self, id: &str, at: DateTime<Utc>) -> CoreResult<()> {
        crate::pool::off_runtime(|| {
            refuse_nul([("id", Some(id))])?;
            self.write(|db| {
                db.execute(
                    "INSERT INTO memory_stats (id, last_verified) VALUES ($1, $2)
                     ON CONFLICT (id) DO UPDATE SET last_verified = $2",
                    &[&id, &micros(&at)],
                )
                .map_err(pg)?;
                Ok(())
            })
        })
    }

    fn set_weights(&self, weights: &[(AssetId, f32)]) -> CoreResult<()> {
        crate::pool::off_runtime(|| {
            refuse_nul(weights.iter().map(|(id, _)| ("id", Some(id.as_str()))))?;
            if weights.is_empty() {
                return Ok(());
            }
            // The last weight given for an id wins, as when applied one by one.
            let mut last: HashMap<&str, f64> = HashMap::new();
            for (id, w) in weights {
                last.insert(id.as_str(), f64::from(*w));
            }
            let (ids, ws): (Vec<&str>, Vec<f64>) = last.into_iter().unzip();
            self.write(|db| {
                db.execute(
                    "INSERT INTO memory_stats (id, decay_weight)
                     SELECT * FROM unnest($1::text[], $2::float8[])
                     ON CONFLICT (id) DO UPDATE SET decay_weight = EXCLUDED.decay_weight",
                    &[&ids, &ws],
                )
                .map_err(pg)?;
                Ok(())
            })
        })
    }

    fn set_review(&self, id: &str, reason: Option<&str>) -> CoreResult<()> {
        crate::pool::off_runtime(|| {
            refuse_nul([("id", Some(id)), ("review", reason)])?;
            self.write(|db| {
                db.execute(
                    "INSERT INTO memory_stats (id, review) VALUES ($1, $2)
                     ON CONFLICT (id) DO UPDATE SET review = $2",
                    &[&id, &reason],
                )
                .map_err(pg)?;
                Ok(())
            })
        })
    }

    fn under_review(&self, limit: usize) -> CoreResult<Vec<AssetId>> {
        crate::pool::off_runtime(|| {
            self.read(|db| {
                Ok(db
                    .query(
                        "SELECT id FROM memory_stats WHERE review IS NOT NULL ORDER BY id LIMIT $1",
                        &[&clamp(limit)],
                    )
                    .map_err(pg)?
                    .iter()
                    .map(|r| r.get(0))
                    .collect())
            })
        })
    }
}

impl registry_core::store::Store for PgStore {
    /// Every commit is durable once acknowledged (the write-ahead log is flushed at commit), and
    /// a purge has already vacuumed what it deleted. What stays is the log itself: asking the
    /// server for a `CHECKPOINT` lets it recycle the segments that still hold deleted bytes,
    /// but only a superuser or a member of `pg_checkpoint` may; for any other role this answers
    /// `true` with nothing done, and the server recycles them at its own checkpoints.
    fn checkpoint(&self) -> CoreResult<bool> {
        self.request_checkpoint()?;
        Ok(true)
    }

    fn schema_version(&self) -> CoreResult<i64> {
        PgStore::schema_version(self).map_err(Into::into)
    }

    fn cluster(&self) -> Option<&dyn registry_core::cluster::Cluster> {
        self.node_id
            .is_some()
            .then_some(self as &dyn registry_core::cluster::Cluster)
    }
}
