//! Numbered migrations. `schema_migrations` records each one applied; two nodes starting at once
//! migrate one after the other (an advisory lock per schema), and the second finds nothing to do.

use postgres::Client;

use crate::{StoreError, StoreResult};

/// Every migration in order; index + 1 is its number. Never edit a released entry.
pub const MIGRATIONS: &[(&str, &str)] = &[
    ("0001_assets", include_str!("../migrations/0001_assets.sql")),
    ("0002_audit", include_str!("../migrations/0002_audit.sql")),
    (
        "0003_keys_receipts",
        include_str!("../migrations/0003_keys_receipts.sql"),
    ),
    (
        "0004_operations",
        include_str!("../migrations/0004_operations.sql"),
    ),
    (
        "0005_changes",
        include_str!("../migrations/0005_changes.sql"),
    ),
    ("0006_blobs", include_str!("../migrations/0006_blobs.sql")),
    (
        "0007_key_purposes",
        include_str!("../migrations/0007_key_purposes.sql"),
    ),
    ("0008_tasks", include_str!("../migrations/0008_tasks.sql")),
    ("0009_feed", include_str!("../migrations/0009_feed.sql")),
    (
        "0011_manifest_assets",
        include_str!("../migrations/0011_manifest_assets.sql"),
    ),
];

pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// The advisory-lock key that serialises migrations of `schema`.
fn migration_lock_key(schema: &str) -> i64 {
    lock_key(&format!("registry-store-postgres/migrate/{schema}"))
}

/// An advisory-lock key: the first 64 bits of the name's sha256.
pub(crate) fn lock_key(name: &str) -> i64 {
    let h = registry_core::hash::sha256_hex(name);
    u64::from_str_radix(&h[..16], 16).expect("hex") as i64
}

/// Creates `schema` if needed and brings it up to [`SCHEMA_VERSION`] in one transaction. The
/// connection's `search_path` must name `schema` (the store sets it when connecting).
pub(crate) fn migrate(client: &mut Client, schema: &str) -> StoreResult<i64> {
    let mut tx = client.transaction()?;
    tx.execute(
        "SELECT pg_advisory_xact_lock($1)",
        &[&migration_lock_key(schema)],
    )?;
    // `schema` was validated as a plain lower-case identifier.
    tx.batch_execute(&format!(
        "CREATE SCHEMA IF NOT EXISTS {schema};
         CREATE TABLE IF NOT EXISTS schema_migrations (
             version    integer     PRIMARY KEY,
             name       text        NOT NULL,
             applied_at timestamptz NOT NULL DEFAULT now()
         );"
    ))?;
    let found: i64 = tx
        .query_one(
            "SELECT COALESCE(MAX(version), 0)::bigint FROM schema_migrations",
            &[],
        )?
        .get(0);
    if found > SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew {
            found,
            supported: SCHEMA_VERSION,
        });
    }
    for (i, (name, sql)) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        tx.batch_execute(sql)?;
        tx.execute(
            "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
            &[&((i + 1) as i32), name],
        )?;
        tracing::info!(migration = name, schema, "applied migration");
    }
    tx.commit()?;
    Ok(SCHEMA_VERSION)
}
