//! Numbered migrations. `PRAGMA user_version` records how many have run.

use rusqlite::Connection;

use crate::{StoreError, StoreResult};

/// Every migration in order; index + 1 is its number. Never edit a released entry.
pub const MIGRATIONS: &[(&str, &str)] = &[
    ("0001_init", include_str!("../migrations/0001_init.sql")),
    (
        "0002_receipts",
        include_str!("../migrations/0002_receipts.sql"),
    ),
    ("0003_jobs", include_str!("../migrations/0003_jobs.sql")),
    (
        "0004_context",
        include_str!("../migrations/0004_context.sql"),
    ),
    (
        "0005_created_index",
        include_str!("../migrations/0005_created_index.sql"),
    ),
    (
        "0006_governance",
        include_str!("../migrations/0006_governance.sql"),
    ),
    (
        "0007_retention_immutable",
        include_str!("../migrations/0007_retention_immutable.sql"),
    ),
    (
        "0008_rowid_tables",
        include_str!("../migrations/0008_rowid_tables.sql"),
    ),
    (
        "0009_key_purposes",
        include_str!("../migrations/0009_key_purposes.sql"),
    ),
    ("0010_tasks", include_str!("../migrations/0010_tasks.sql")),
    ("0011_feed", include_str!("../migrations/0011_feed.sql")),
    (
        "0013_manifest_assets",
        include_str!("../migrations/0013_manifest_assets.sql"),
    ),
];

pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Brings the schema up to [`SCHEMA_VERSION`], each migration in its own transaction.
pub fn migrate(conn: &mut Connection) -> StoreResult<i64> {
    let found: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if found > SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew {
            found,
            supported: SCHEMA_VERSION,
        });
    }
    let mut rewrote = false;
    for (i, (name, sql)) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        let tx = conn.transaction()?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)?;
        tx.commit()?;
        tracing::info!(migration = name, "applied migration");
        rewrote |= found > 0 && REWRITES_TABLES.contains(name);
    }
    if rewrote {
        compact(conn)?;
    }
    Ok(SCHEMA_VERSION)
}

/// Migrations that copy whole tables: on an existing store they leave the old tables' pages
/// free in the file (4.3 of 5.6 GB after 0008 on a million memories), so the file is compacted
/// once after them.
const REWRITES_TABLES: &[&str] = &["0008_rowid_tables"];

/// Rebuilds the file without its free pages (`VACUUM`, outside any transaction) and truncates
/// the WAL, which held every copied page.
fn compact(conn: &Connection) -> StoreResult<()> {
    let started = std::time::Instant::now();
    conn.execute_batch("VACUUM")?;
    let _busy: i64 = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))?;
    tracing::info!(
        seconds = started.elapsed().as_secs_f64(),
        "compacted the store after a table rewrite"
    );
    Ok(())
}
