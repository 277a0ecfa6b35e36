//! SQLite implementation of the memory usage counters (`memory_stats`, migration 0002).

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use registry_core::asset::AssetId;
use registry_core::{CoreError, CoreResult};
use registry_memory::{MemoryStats, StatsStore};
use registry_store_sqlite::SqliteStore;
use rusqlite::{OptionalExtension, params};

/// Counters in the registry database. Reads go through the writer connection: the table is
/// small per query and this keeps the store's reader pool private.
#[derive(Clone)]
pub struct SqliteStats(pub std::sync::Arc<SqliteStore>);

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
        },
    ))
}

const COLS: &str = "id, usage_count, last_retrieved, last_verified, helpful, harmful, decay_weight";

impl StatsStore for SqliteStats {
    fn stats(&self, ids: &[AssetId]) -> CoreResult<HashMap<AssetId, MemoryStats>> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        self.0.write(|tx| {
            let mut out = HashMap::with_capacity(ids.len());
            for chunk in ids.chunks(500) {
                let marks = vec!["?"; chunk.len()].join(",");
                let mut st = tx
                    .prepare(&format!(
                        "SELECT {COLS} FROM memory_stats WHERE id IN ({marks})"
                    ))
                    .map_err(be)?;
                let rows = st
                    .query_map(rusqlite::params_from_iter(chunk.iter()), row)
                    .map_err(be)?;
                for r in rows {
                    let (id, s) = r.map_err(be)?;
                    out.insert(id, s);
                }
            }
            Ok(out)
        })
    }

    fn record_retrievals(&self, ids: &[AssetId], at: DateTime<Utc>) -> CoreResult<()> {
        let at = ts(&at);
        self.0.write(|tx| {
            for id in ids {
                tx.execute(
                    "INSERT INTO memory_stats (id, usage_count, last_retrieved) VALUES (?1, 1, ?2)
                     ON CONFLICT(id) DO UPDATE SET usage_count = usage_count + 1, last_retrieved = ?2",
                    params![id, at],
                )
                .map_err(be)?;
            }
            Ok(())
        })
    }

    fn add_feedback(&self, id: &str, helpful: bool) -> CoreResult<MemoryStats> {
        let (h, x) = if helpful { (1, 0) } else { (0, 1) };
        self.0.write(|tx| {
            tx.execute(
                "INSERT INTO memory_stats (id, helpful, harmful) VALUES (?1, ?2, ?3)
                 ON CONFLICT(id) DO UPDATE SET helpful = helpful + ?2, harmful = harmful + ?3",
                params![id, h, x],
            )
            .map_err(be)?;
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
        self.0.write(|tx| {
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
        self.0.write(|tx| {
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
}
