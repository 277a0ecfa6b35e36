#![doc = include_str!("../README.md")]

mod blobs;
mod feed;
mod migrate;
mod ops;
mod store;
mod tasks;

pub use blobs::FsBlobStore;
pub use migrate::{MIGRATIONS, SCHEMA_VERSION};
pub use store::{SqliteStore, StoreOptions};

/// This crate's error: SQLite and I/O failures, plus the core's own.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
    #[error("database schema version {found} is newer than this build understands ({supported})")]
    SchemaTooNew { found: i64, supported: i64 },
}

pub type StoreResult<T> = Result<T, StoreError>;

impl From<StoreError> for registry_core::CoreError {
    fn from(e: StoreError) -> Self {
        registry_core::CoreError::backend("sqlite", e)
    }
}
