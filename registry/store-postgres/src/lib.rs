#![doc = include_str!("../README.md")]

mod blobs;
mod cluster;
mod feed;
mod migrate;
mod ops;
mod pool;
mod store;
mod tasks;
pub mod test_support;

pub use blobs::PgBlobStore;
pub use migrate::{MIGRATIONS, SCHEMA_VERSION};
pub use store::{PgOptions, PgStore};

/// This crate's error: PostgreSQL and configuration failures.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("postgres: {}", describe(.0))]
    Postgres(#[from] postgres::Error),
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
    #[error("configuration: {0}")]
    Config(String),
    #[error("no free database connection within {0:?}")]
    PoolTimeout(std::time::Duration),
    #[error("database schema version {found} is newer than this build understands ({supported})")]
    SchemaTooNew { found: i64, supported: i64 },
}

pub type StoreResult<T> = Result<T, StoreError>;

impl From<StoreError> for registry_core::CoreError {
    fn from(e: StoreError) -> Self {
        registry_core::CoreError::backend("postgres", e)
    }
}

/// A driver error with the server's SQLSTATE and message when there is one (the driver's own
/// `Display` says only "db error").
pub(crate) fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => {
            let mut s = format!("{} {}", db.code().code(), db.message());
            if let Some(d) = db.detail() {
                s.push_str(": ");
                s.push_str(d);
            }
            s
        }
        None => {
            let mut s = e.to_string();
            let mut src = std::error::Error::source(e);
            while let Some(c) = src {
                s.push_str(": ");
                s.push_str(&c.to_string());
                src = c.source();
            }
            s
        }
    }
}
