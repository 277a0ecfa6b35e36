//! For tests that need PostgreSQL: where the test database is, and a fresh schema per store.
//!
//! A test reads the database's URL from `REGISTRY_TEST_PG_URL` (`scripts/pg-test.sh` starts a
//! throw-away cluster and sets it). Without it the test **fails**, unless the run asked for the
//! skip by name with `REGISTRY_SKIP_PG=1`: a missing database is never a silent pass.

use std::sync::atomic::{AtomicU64, Ordering};

use registry_core::audit::AuditKey;

use crate::{PgOptions, PgStore};

/// The variable holding the test database's URL.
pub const URL_VAR: &str = "REGISTRY_TEST_PG_URL";
/// Set to `1` to skip the tests that need PostgreSQL.
pub const SKIP_VAR: &str = "REGISTRY_SKIP_PG";

/// The test database's URL, or `None` when the run set `REGISTRY_SKIP_PG=1` (the caller then
/// returns at once; this has said so on stderr). Panics when neither is set.
pub fn test_database_url(test: &str) -> Option<String> {
    if let Ok(url) = std::env::var(URL_VAR)
        && !url.is_empty()
    {
        return Some(url);
    }
    if std::env::var(SKIP_VAR).as_deref() == Ok("1") {
        eprintln!("{test}: skipped, {SKIP_VAR}=1 (no PostgreSQL)");
        return None;
    }
    panic!(
        "{test} needs PostgreSQL: run it under `scripts/pg-test.sh -- cargo test ...` (which \
         starts a throw-away cluster and sets {URL_VAR}), set {URL_VAR} to a database of your \
         own, or skip these tests by name with {SKIP_VAR}=1"
    );
}

/// A schema of its own in the test database, dropped with everything in it when this value is
/// dropped: each store a test opens starts empty, and tests run side by side.
#[derive(Debug)]
pub struct TestSchema {
    url: String,
    name: String,
}

impl TestSchema {
    pub fn new(url: &str) -> Self {
        static N: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        TestSchema {
            url: url.to_string(),
            name: format!(
                "test_{}_{}_{nanos}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Options for a store in this schema.
    pub fn options(&self, audit_key: Option<AuditKey>) -> PgOptions {
        PgOptions {
            schema: self.name.clone(),
            audit_key,
            pool_size: 4,
            ..PgOptions::new(self.url.clone())
        }
    }

    /// A plain connection whose `search_path` is this schema, for looking past the store.
    pub fn client(&self) -> postgres::Client {
        let mut config: postgres::Config = self
            .url
            .parse()
            .unwrap_or_else(|e| panic!("{URL_VAR}: {e}"));
        config.options(&format!("-c search_path={}", self.name));
        config
            .connect(postgres::NoTls)
            .unwrap_or_else(|e| panic!("connecting to the test database: {e}"))
    }

    /// Opens (and on first use creates and migrates) a store in this schema.
    pub fn open(&self, audit_key: Option<AuditKey>) -> PgStore {
        PgStore::connect(self.options(audit_key))
            .unwrap_or_else(|e| panic!("connecting to the test database: {e}"))
    }
}

impl Drop for TestSchema {
    fn drop(&mut self) {
        let dropped = postgres::Client::connect(&self.url, postgres::NoTls).and_then(|mut c| {
            c.batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name))
        });
        if let Err(e) = dropped {
            eprintln!("test schema {} was not dropped: {e}", self.name);
        }
    }
}
