//! SQLite implementation of the memory usage counters (`memory_stats`, migration 0003; one
//! vote per principal in `memory_votes`, migration 0006).

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use parking_lot::Mutex;
use registry_core::asset::AssetId;
use registry_core::{CoreError, CoreResult};
use registry_memory::{MemoryStats, StatsStore};
use registry_store_sqlite::SqliteStore;
use rusqlite::{OptionalExtension, params};

/// Counters in the registry database. Retrievals are buffered and written in batches by
/// [`SqliteStats::flush`] (called every few hundred milliseconds and at shutdown), so a search
/// never waits for a write; every other change is written at once.
pub struct SqliteStats {
    store: Arc<SqliteStore>,
    retrievals: Mutex<Vec<(AssetId, DateTime<Utc>)>>,
}

impl std::fmt::Debug for SqliteStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStats").finish_non_exhaustive()
    }
}

fn be(e: rusqlite::Error) -> CoreError {
    CoreError::backend("sqlite", e)
}

fn ts(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

fn parse_ts(s: Option<String>) -> Option<DateTime<Utc>> {
    s.and_then(|s| DateTime::parse_from_rfc3339(&s).ok())
        .map(|d| d.with_timezone(&Utc))
}

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(String, MemoryStats)> {
    Ok((
        r.get(0)?,
        MemoryStats {
            usage_count: r.get::<_, i64>(1)? as u64,
            last_retrieved: parse_ts(r.get(2)?),
            last_verified: parse_ts(r.get(3)?),
            helpful: r.get::<_, i64>(4)? as u64,
            harmful: r.get::<_, i64>(5)? as u64,
            decay_weight: r.get::<_, f64>(6)? as f32,
            review: r.get(7)?,
        },
    ))
}

const COLS: &str =
    "id, usage_count, last_retrieved, last_verified, helpful, harmful, decay_weight, review";

impl SqliteStats {
    pub fn new(store: Arc<SqliteStore>) -> Self {
        SqliteStats {
            store,
            retrievals: Mutex::new(Vec::new()),
        }
    }

    pub fn has_pending(&self) -> bool {
        !self.retrievals.lock().is_empty()
    }

    /// Writes the buffered retrievals in one transaction; on failure they stay buffered.
    pub fn flush(&self) -> CoreResult<()> {
        let batch = std::mem::take(&mut *self.retrievals.lock());
        if batch.is_empty() {
            return Ok(());
        }
        let res = self.store.write(|tx| {
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
            let mut buf = self.retrievals.lock();
            let newer = std::mem::replace(&mut *buf, batch);
            buf.extend(newer);
        }
        res
    }

    fn recount_votes(tx: &rusqlite::Transaction<'_>, id: &str) -> CoreResult<()> {
        tx.execute(
            "INSERT INTO memory_stats (id, helpful, harmful)
             SELECT ?1, coalesce(sum(helpful), 0), coalesce(sum(1 - helpful), 0)
               FROM memory_votes WHERE id = ?1
             ON CONFLICT(id) DO UPDATE SET helpful = excluded.helpful, harmful = excluded.harmful",
            [id],
        )
        .map_err(be)?;
        Ok(())
    }
}

impl StatsStore for SqliteStats {
    fn stats(&self, ids: &[AssetId]) -> CoreResult<HashMap<AssetId, MemoryStats>> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        self.store.read_only(|c| {
            let mut out = HashMap::with_capacity(ids.len());
            for chunk in ids.chunks(500) {
                let marks = vec!["?"; chunk.len()].join(",");
                let mut st = c.prepare(&format!(
                    "SELECT {COLS} FROM memory_stats WHERE id IN ({marks})"
                ))?;
                let rows = st.query_map(rusqlite::params_from_iter(chunk.iter()), row)?;
                for r in rows {
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

    fn vote(
        &self,
        id: &str,
        voter: &str,
        helpful: bool,
        at: DateTime<Utc>,
    ) -> CoreResult<MemoryStats> {
        self.store.write(|tx| {
            tx.execute(
                "INSERT INTO memory_votes (id, voter, helpful, at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT(id, voter) DO UPDATE SET helpful = ?3, at = ?4",
                params![id, voter, helpful, ts(&at)],
            )
            .map_err(be)?;
            Self::recount_votes(tx, id)?;
            tx.query_row(
                &format!("SELECT {COLS} FROM memory_stats WHERE id = ?1"),
                [id],
                row,
            )
            .optional()
            .map_err(be)
            .map(|r| r.map(|(_, s)| s).unwrap_or_default())
        })
    }

    fn mark_verified(&self, id: &str, at: DateTime<Utc>) -> CoreResult<()> {
        self.store.write(|tx| {
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
        self.store.write(|tx| {
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
        self.store.write(|tx| {
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
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.store.read_only(|c| {
            let mut st = c.prepare(
                "SELECT id FROM memory_stats WHERE review IS NOT NULL ORDER BY id LIMIT ?1",
            )?;
            st.query_map([limit], |r| r.get(0))?.collect()
        })
    }
}
