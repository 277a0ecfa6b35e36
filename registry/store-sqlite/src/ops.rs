//! The store's operational tables behind the core's traits: job runs (`job_runs`, migration
//! 0003), context manifests (`context_manifests`, 0004), usage counters and votes
//! (`memory_stats`, 0003; `memory_votes`, 0006).

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use registry_core::asset::AssetId;
use registry_core::store::{JobRun, JobRunStore, ManifestStore, StoredManifest};
use registry_core::usage::{UsageStats, UsageStore};
use registry_core::{CoreError, CoreResult};
use rusqlite::{OptionalExtension, params};

use crate::store::{SqliteStore, parse_ts, parse_ts_opt, ts};

fn be(e: rusqlite::Error) -> CoreError {
    CoreError::backend("sqlite", e)
}

fn clamp(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl JobRunStore for SqliteStore {
    fn start_run(&self, name: &str, at: DateTime<Utc>) -> CoreResult<i64> {
        self.write(|tx| {
            tx.execute(
                "INSERT INTO job_runs (name, started_at, outcome) VALUES (?1, ?2, 'running')",
                params![name, ts(&at)],
            )
            .map_err(be)?;
            Ok(tx.last_insert_rowid())
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
        self.write(|tx| {
            tx.execute(
                "UPDATE job_runs SET finished_at = ?2, outcome = ?3, counts = ?4, error = ?5 WHERE id = ?1",
                params![id, ts(&at), outcome, counts.to_string(), error],
            )
            .map_err(be)?;
            Ok(())
        })
    }

    fn last_ok_start(&self, name: &str) -> CoreResult<Option<DateTime<Utc>>> {
        let s: Option<String> = self.read(|c| {
            c.query_row(
                "SELECT started_at FROM job_runs WHERE name = ?1 AND outcome = 'ok'
                 ORDER BY started_at DESC LIMIT 1",
                [name],
                |r| r.get(0),
            )
            .optional()
        })?;
        s.map(|s| registry_core::time::from_text(&s))
            .transpose()
            .map_err(|e| CoreError::backend("sqlite", e))
    }

    fn recent_runs(&self, name: Option<&str>, limit: usize) -> CoreResult<Vec<JobRun>> {
        self.read(|c| {
            let mut st = c.prepare(
                "SELECT id, name, started_at, finished_at, outcome, counts, error FROM job_runs
                 WHERE ?1 IS NULL OR name = ?1 ORDER BY id DESC LIMIT ?2",
            )?;
            st.query_map(params![name, clamp(limit)], |r| {
                let counts: Option<String> = r.get(5)?;
                Ok(JobRun {
                    id: r.get(0)?,
                    name: r.get(1)?,
                    started_at: parse_ts(&r.get::<_, String>(2)?)?,
                    finished_at: parse_ts_opt(r.get(3)?)?,
                    outcome: r.get(4)?,
                    counts: counts
                        .and_then(|c| serde_json::from_str(&c).ok())
                        .unwrap_or(serde_json::Value::Null),
                    error: r.get(6)?,
                })
            })?
            .collect()
        })
    }
}

const MANIFEST_COLS: &str = "id, tenant, principal, created_at, manifest, request";

fn manifest_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(StoredManifest, String)> {
    let body: String = r.get(4)?;
    let request: Option<String> = r.get(5)?;
    Ok((
        StoredManifest {
            id: r.get(0)?,
            tenant: r.get(1)?,
            principal: r.get(2)?,
            created_at: parse_ts(&r.get::<_, String>(3)?)?,
            manifest: serde_json::Value::Null,
            request: request.and_then(|t| serde_json::from_str(&t).ok()),
            assets: vec![],
        },
        body,
    ))
}

fn with_body((mut m, body): (StoredManifest, String)) -> CoreResult<StoredManifest> {
    m.manifest = serde_json::from_str(&body).map_err(|e| CoreError::backend("sqlite", e))?;
    Ok(m)
}

impl ManifestStore for SqliteStore {
    fn put_manifest(&self, m: &StoredManifest) -> CoreResult<()> {
        let body = m.manifest.to_string();
        let request = m.request.as_ref().map(|r| r.to_string());
        self.write(|tx| {
            tx.execute(
                "INSERT INTO context_manifests (id, tenant, principal, created_at, manifest, request)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![m.id, m.tenant, m.principal, ts(&m.created_at), body, request],
            )
            // A second write of an id is a conflict, as in every backend.
            .map_err(crate::store::conflict)?;
            let mut st = tx
                .prepare_cached(
                    "INSERT OR IGNORE INTO manifest_assets
                     (asset_id, manifest_id, tenant, principal, created_at)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                )
                .map_err(be)?;
            for a in &m.assets {
                st.execute(params![a, m.id, m.tenant, m.principal, ts(&m.created_at)])
                    .map_err(be)?;
            }
            Ok(())
        })
    }

    fn get_manifest(&self, id: &str) -> CoreResult<Option<StoredManifest>> {
        self.read(|c| {
            c.query_row(
                &format!("SELECT {MANIFEST_COLS} FROM context_manifests WHERE id = ?1"),
                [id],
                manifest_row,
            )
            .optional()
        })?
        .map(with_body)
        .transpose()
    }

    fn list_manifests(
        &self,
        tenant: &str,
        principal: Option<&str>,
        limit: usize,
    ) -> CoreResult<Vec<StoredManifest>> {
        let rows = self.read(|c| {
            let mut st = c.prepare(&format!(
                "SELECT {MANIFEST_COLS} FROM context_manifests
                 WHERE tenant = ?1 AND (?2 IS NULL OR principal = ?2)
                 ORDER BY created_at DESC, id DESC LIMIT ?3"
            ))?;
            st.query_map(params![tenant, principal, clamp(limit)], manifest_row)?
                .collect::<rusqlite::Result<Vec<_>>>()
        })?;
        rows.into_iter().map(with_body).collect()
    }

    fn count_manifests(&self, tenant: &str, principal: &str) -> CoreResult<usize> {
        Ok(self.read(|c| {
            c.query_row(
                "SELECT count(*) FROM context_manifests WHERE tenant = ?1 AND principal = ?2",
                params![tenant, principal],
                |r| r.get::<_, i64>(0),
            )
        })? as usize)
    }

    fn erase_manifests(&self, tenant: &str, principal: &str) -> CoreResult<usize> {
        // The trigger of migration 0013 deletes their asset index entries in the same
        // transaction.
        self.write(|tx| {
            tx.execute(
                "DELETE FROM context_manifests WHERE tenant = ?1 AND principal = ?2",
                params![tenant, principal],
            )
            .map_err(be)
        })
    }

    fn manifests_with_asset(
        &self,
        tenant: &str,
        principal: Option<&str>,
        asset: &str,
        limit: usize,
    ) -> CoreResult<(usize, Vec<StoredManifest>)> {
        let (total, rows) = self.read(|c| {
            let total: i64 = c.query_row(
                "SELECT count(*) FROM manifest_assets
                 WHERE asset_id = ?1 AND tenant = ?2 AND (?3 IS NULL OR principal = ?3)",
                params![asset, tenant, principal],
                |r| r.get(0),
            )?;
            let mut st = c.prepare(
                "SELECT m.id, m.tenant, m.principal, m.created_at, m.manifest, m.request
                 FROM manifest_assets a JOIN context_manifests m ON m.id = a.manifest_id
                 WHERE a.asset_id = ?1 AND a.tenant = ?2 AND (?3 IS NULL OR a.principal = ?3)
                 ORDER BY a.created_at DESC, a.manifest_id DESC LIMIT ?4",
            )?;
            let rows = st
                .query_map(
                    params![asset, tenant, principal, clamp(limit)],
                    manifest_row,
                )?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok((total, rows))
        })?;
        let rows = rows.into_iter().map(with_body).collect::<CoreResult<_>>()?;
        Ok((total as usize, rows))
    }
}

fn stats_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(String, UsageStats)> {
    Ok((
        r.get(0)?,
        UsageStats {
            usage_count: r.get::<_, i64>(1)? as u64,
            last_retrieved: parse_ts_opt(r.get(2)?)?,
            last_verified: parse_ts_opt(r.get(3)?)?,
            helpful: r.get::<_, i64>(4)? as u64,
            harmful: r.get::<_, i64>(5)? as u64,
            decay_weight: r.get::<_, f64>(6)? as f32,
            review: r.get(7)?,
        },
    ))
}

const STATS_COLS: &str =
    "id, usage_count, last_retrieved, last_verified, helpful, harmful, decay_weight, review";

impl UsageStore for SqliteStore {
    fn stats(&self, ids: &[AssetId]) -> CoreResult<HashMap<AssetId, UsageStats>> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        self.read(|c| {
            let mut out = HashMap::with_capacity(ids.len());
            for chunk in ids.chunks(500) {
                let marks = vec!["?"; chunk.len()].join(",");
                let mut st = c.prepare(&format!(
                    "SELECT {STATS_COLS} FROM memory_stats WHERE id IN ({marks})"
                ))?;
                for r in st.query_map(rusqlite::params_from_iter(chunk.iter()), stats_row)? {
                    let (id, s) = r?;
                    out.insert(id, s);
                }
            }
            Ok(out)
        })
    }

    fn record_retrievals(&self, ids: &[AssetId], at: DateTime<Utc>) -> CoreResult<()> {
        self.retrievals
            .lock()
            .extend(ids.iter().map(|id| (id.clone(), at)));
        Ok(())
    }

    fn usage_pending(&self) -> bool {
        !self.retrievals.lock().is_empty()
    }

    fn flush_usage(&self) -> CoreResult<bool> {
        let batch = std::mem::take(&mut *self.retrievals.lock());
        if batch.is_empty() {
            return Ok(false);
        }
        let res = self.write(|tx| {
            let mut st = tx
                .prepare_cached(
                    "INSERT INTO memory_stats (id, usage_count, last_retrieved) VALUES (?1, 1, ?2)
                     ON CONFLICT(id) DO UPDATE SET usage_count = usage_count + 1,
                       last_retrieved = max(coalesce(last_retrieved, ''), ?2)",
                )
                .map_err(be)?;
            for (id, at) in &batch {
                st.execute(params![id, ts(at)]).map_err(be)?;
            }
            Ok(())
        });
        if res.is_err() {
            // Kept for the next flush, ahead of anything recorded since.
            let mut buf = self.retrievals.lock();
            let newer = std::mem::replace(&mut *buf, batch);
            buf.extend(newer);
        }
        res.map(|()| true)
    }

    fn vote(
        &self,
        id: &str,
        voter: &str,
        helpful: bool,
        at: DateTime<Utc>,
    ) -> CoreResult<UsageStats> {
        self.write(|tx| {
            tx.execute(
                "INSERT INTO memory_votes (id, voter, helpful, at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT(id, voter) DO UPDATE SET helpful = ?3, at = ?4",
                params![id, voter, helpful, ts(&at)],
            )
            .map_err(be)?;
            tx.execute(
                "INSERT INTO memory_stats (id, helpful, harmful)
                 SELECT ?1, coalesce(sum(helpful), 0), coalesce(sum(1 - helpful), 0)
                   FROM memory_votes WHERE id = ?1
                 ON CONFLICT(id) DO UPDATE SET helpful = excluded.helpful, harmful = excluded.harmful",
                [id],
            )
            .map_err(be)?;
            tx.query_row(
                &format!("SELECT {STATS_COLS} FROM memory_stats WHERE id = ?1"),
                [id],
                stats_row,
            )
            .optional()
            .map_err(be)
            .map(|r| r.map(|(_, s)| s).unwrap_or_default())
        })
    }

    fn mark_verified(&self, id: &str, at: DateTime<Utc>) -> CoreResult<()> {
        self.write(|tx| {
            tx.execute(
                "INSERT INTO memory_stats (id, last_verified) VALUES (?1, ?2)
                 ON CONFLICT(id) DO UPDATE SET last_verified = ?2",
                params![id, ts(&at)],
            )
            .map_err(be)?;
            Ok(())
        })
    }

    fn set_weights(&self, weights: &[(AssetId, f32)]) -> CoreResult<()> {
        self.write(|tx| {
            for (id, w) in weights {
                tx.execute(
                    "INSERT INTO memory_stats (id, decay_weight) VALUES (?1, ?2)
                     ON CONFLICT(id) DO UPDATE SET decay_weight = ?2",
                    params![id, *w as f64],
                )
                .map_err(be)?;
            }
            Ok(())
        })
    }

    fn set_review(&self, id: &str, reason: Option<&str>) -> CoreResult<()> {
        self.write(|tx| {
            tx.execute(
                "INSERT INTO memory_stats (id, review) VALUES (?1, ?2)
                 ON CONFLICT(id) DO UPDATE SET review = ?2",
                params![id, reason],
            )
            .map_err(be)?;
            Ok(())
        })
    }

    fn under_review(&self, limit: usize) -> CoreResult<Vec<AssetId>> {
        self.read(|c| {
            let mut st = c.prepare(
                "SELECT id FROM memory_stats WHERE review IS NOT NULL ORDER BY id LIMIT ?1",
            )?;
            st.query_map([clamp(limit)], |r| r.get(0))?.collect()
        })
    }
}
